"""What people read for the codes the system stores: one place for every page.

Each code has a short label and a one-sentence definition (shown on hover and
to screen readers). Codes themselves stay in code, tests, docs/ and the
auditors' technical details; pages show these labels (``governance.templatetags.labels``).
Pure data: no ORM import.
"""

from __future__ import annotations

from typing import NamedTuple


class Label(NamedTuple):
    text: str
    definition: str


SOURCE_TYPES: dict[str, Label] = {
    "config": Label("Configuration", "Synced from the project's configuration by a trusted agent."),
    "documentation": Label("Documentation", "Taken from the project's own documentation."),
    "reviewer": Label("Reviewer", "Entered or edited by a person in the console."),
    "user_statement": Label("Person's own words", "Something the person said about themselves."),
    "support_ticket": Label("Support ticket", "Taken from a support ticket."),
    "tool_output": Label("Tool output", "Produced by a tool the agent ran, such as CI or a script."),
    "chat_message": Label("Chat message", "Taken from a chat message, not the person's own statement."),
    "model_inference": Label("Model's guess", "Inferred by a language model, not stated by anyone."),
    "summarizer": Label("Conversation summary", "Written by the summarizer at the end of a session."),
    "web_page": Label("Web page", "Read from a web page: the least trusted source."),
}

KINDS: dict[str, Label] = {
    "preference": Label("Preference", "How the person likes things done."),
    "profile": Label("Profile", "A fact about who the person is (role, location, team)."),
    "project_fact": Label("Project fact", "A fact about the project, not about one person."),
    "incident": Label("Incident", "What happened during an incident and what was concluded."),
    "tool_instruction": Label("Tool instruction", "How a tool should be used in this project."),
    "episodic": Label("Episode", "Something that happened in a past conversation."),
    "summary": Label("Session summary", "A summary of a finished session."),
    "slot": Label("Working note", "Working memory that belongs to one session only."),
}

STATUSES: dict[str, Label] = {
    "active": Label("Active", "In memory: agents may receive it."),
    "pending_review": Label("Waiting for review", "Held until a reviewer approves or rejects it."),
    "quarantined": Label("Quarantined", "Held because the write guard found something suspicious."),
    "rejected": Label("Rejected", "A reviewer refused it; agents never receive it."),
    "superseded": Label("Replaced", "A newer fact replaced it."),
    "withdrawn": Label("Withdrawn", "Removed on request; it will not be learned again."),
    "expired": Label("Expired", "Its validity period has ended."),
    "out_of_scope": Label("Out of scope", "Not something this memory keeps."),
    "ended": Label("Ended", "The session was closed."),
}

CONFIDENCE: dict[str, Label] = {
    "unverified": Label("Unverified", "Nobody has confirmed it yet."),
    "corroborated": Label("Corroborated", "Another source said the same."),
    "verified": Label("Verified", "A person or the source of truth confirmed it."),
    "disputed": Label(
        "Disputed", "The person it is about says it is wrong or outdated, or another source contradicts it."
    ),
}

REASONS: dict[str, Label] = {
    "below_authority": Label("Too little authority", "Its authority is below the agent's floor."),
    "stale": Label("Too old", "Not verified for longer than the agent's policy allows."),
    "expired": Label("Expired", "Its validity period has ended."),
    "not_yet_valid": Label("Not valid yet", "Its validity period has not started."),
    "superseded": Label("Replaced", "A newer fact replaced it."),
    "withdrawn": Label("Withdrawn", "Removed on request."),
    "not_active": Label("Not active", "Waiting for review, quarantined or rejected."),
    "kind_not_allowed": Label("Kind not allowed", "This agent's policy does not allow this kind of fact."),
    "identity_unverified": Label(
        "Identity not verified", "The caller did not confirm who the person is, so no personal memory."
    ),
    "low_relevance": Label("Not relevant enough", "Less similar to the question than the policy's floor."),
    "duplicate": Label("Duplicate", "Says the same as a fact already included."),
    "conflict_lost": Label(
        "Lost a conflict",
        "Another fact gives a different value for the same thing and wins (newer or keyed).",
    ),
    "over_budget": Label("Over the token budget", "Did not fit in the agent's token budget."),
}

MODES: dict[str, Label] = {
    "new": Label("New person", "Not seen recently: starts without a resume hint."),
    "resume": Label("Resumed", "Seen recently: picks up where the last session left off."),
    "confirm": Label("Confirm first", "Seen a while ago: the agent confirms identity and memory first."),
}

ROLES: dict[str, Label] = {
    "reviewer": Label("Reviewer", "Approves or rejects memory writes."),
    "policy_editor": Label("Policy editor", "Tunes agents' policies."),
    "auditor": Label("Auditor", "Reads everything, changes nothing."),
    "admin": Label("Administrator", "May do everything in the project."),
}

# The write guard's findings, as a reviewer reads them.
FINDINGS: dict[str, Label] = {
    "possible_conflict": Label(
        "May contradict a current fact", "It may give a different value for something already remembered."
    ),
    "disputed": Label(
        "The person says this is wrong or outdated", "The person it is about disputed it; a reviewer decides."
    ),
    "empty_statement": Label("Nothing visible left", "Once hidden characters are removed, nothing remains."),
    "authority_cap": Label(
        "Asks for more authority than its source allows",
        "The source type caps the authority a write may carry.",
    ),
    "source_trust": Label(
        "Source is not trusted enough to store this on its own", "This source may not set this kind of fact."
    ),
    "instruction": Label(
        "Instruction aimed at the assistant", "Reads like an order to the agent, not a fact."
    ),
    "markup": Label("Role or markup tags", "Contains tags that could change how the agent reads its memory."),
    "hidden_text": Label("Hidden characters", "Contains characters a reader would not see."),
    "encoded_payload": Label("Encoded payload", "Contains a block of encoded data."),
    "homoglyph": Label(
        "Look-alike letters from another alphabet", "Letters that imitate others to hide words."
    ),
    "exfiltration_link": Label("Link that could carry data away", "A link built to send data elsewhere."),
    "reviewer_address": Label("Tries to talk to the reviewer", "Text aimed at whoever reviews it."),
    "resubmitted_rejected": Label(
        "Re-submits a rejected assertion", "The same statement was rejected before."
    ),
    "tombstoned": Label(
        "Re-learns a withdrawn fact", "This statement was withdrawn at the person's request."
    ),
    "withdrawn_since": Label(
        "Withdrawn since it was written", "The statement was withdrawn while it waited."
    ),
    "derived_from_retrieval": Label("Derived from a retrieval", "Repeats memory the agent was just given."),
    "write_back_amplification": Label(
        "Written back again and again from retrievals", "The agent keeps storing what it was given."
    ),
    "burst": Label("Burst of near-duplicate writes", "Many similar writes arrived in a short time."),
    "contradicts_verified": Label("Contradicts a verified fact", "Says the opposite of something confirmed."),
    "semantic": Label("Reads like a known attack", "Its meaning is close to known injection attempts."),
    "semantic_unavailable": Label("Meaning not checked", "The meaning check could not run for this write."),
    "conflict": Label("Would replace the current fact", "Another fact with the same key would be replaced."),
    "summary_check": Label("Summary dropped details", "The summary leaves out things the session recorded."),
}

SEVERITIES: dict[str, Label] = {
    "high": Label("High", "Likely harmful: quarantined until a person decides."),
    "medium": Label("Medium", "Needs a person to look before it is stored."),
    "low": Label("Low", "Worth a look; not harmful on its own."),
}

# What an audit entry is about (its object_type).
OBJECT_TYPES: dict[str, Label] = {
    "fact": Label("Fact", "One memory record."),
    "write": Label("Write", "A proposed memory write as it arrived."),
    "reviewdecision": Label("Review decision", "A reviewer's approval or rejection."),
    "policyversion": Label("Policy version", "An immutable snapshot of an agent's policy."),
    "agentkey": Label("Agent key", "A key an agent signs in with."),
    "accesstoken": Label("Personal token", "A person's token for the governance API."),
    "membership": Label("Membership", "A person's role in a project."),
    "session": Label("Session", "One conversation of an agent with a person."),
    "principal": Label("Person", "Someone memories are about."),
    "project": Label("Project", "A tenant: nothing crosses projects."),
    "agent": Label("Agent", "An agent that writes and retrieves memory."),
    "retrievalevent": Label("Retrieval", "One retrieval of memory by an agent."),
    "job": Label("Background job", "Work done outside the request, such as a replay."),
    "changeapproval": Label("Second approval", "A change waiting for a second person."),
    "tombstone": Label("Tombstone", "What remains of a withdrawn fact."),
    "checkpoint": Label("Checkpoint", "A signed mark of the audit trail's head."),
}

# Fields named in change history and policy forms.
FIELDS: dict[str, Label] = {
    "statement": Label("Statement", "The text of the memory."),
    "status": Label("Status", "Whether agents may receive it."),
    "status_reason": Label("Why the status changed", "The reason given with the last status change."),
    "authority": Label("Authority", "How much the source is trusted, 1 to 5."),
    "confidence": Label("Confidence", "Whether it was confirmed."),
    "valid_from": Label("Valid from", "When it starts to hold."),
    "valid_to": Label("Valid until", "When it stops holding."),
    "last_verified_at": Label("Last verified", "When it was last confirmed."),
    "recorded_at": Label("Recorded", "When it was stored."),
    "source_type": Label("Source", "Where it came from."),
    "source_ref": Label("Source reference", "Which message, ticket or page it came from."),
    "kind": Label("Kind", "What sort of memory it is."),
    "key": Label("Key", "The slot it fills; two facts with the same key conflict."),
    "token_count": Label("Tokens", "Its length in tokens."),
    "supersedes": Label("Replaces", "The facts it replaced."),
    "recent_days": Label("Recent for (days)", "Facts verified within this many days are injected plainly."),
    "confirm_days": Label(
        "Re-confirm up to (days)", "Older facts up to this age are injected for re-confirmation."
    ),
    "token_budget": Label("Token budget", "Most tokens the injected memory block may use."),
    "max_items": Label("Most items", "Most facts injected in one block."),
    "authority_floor": Label("Authority floor", "Facts below this authority are never injected."),
    "auto_approve_min_authority": Label(
        "Auto-approve from authority", "Writes from this authority skip review."
    ),
}

VOCABULARIES: dict[str, dict[str, Label]] = {
    "source": SOURCE_TYPES,
    "kind": KINDS,
    "status": STATUSES,
    "confidence": CONFIDENCE,
    "reason": REASONS,
    "mode": MODES,
    "role": ROLES,
    "field": FIELDS,
    "finding": FINDINGS,
    "severity": SEVERITIES,
    "object": OBJECT_TYPES,
}


def label_for(vocabulary: str, code: str) -> Label:
    """The label of ``code``; an unknown code still reads as words, never as an identifier."""
    known = VOCABULARIES.get(vocabulary, {}).get(code)
    if known is not None:
        return known
    # "agent_key.revoked" reads "Agent key revoked".
    words = " ".join(str(code).replace("_", " ").replace(".", " ").replace(":", " ").split())
    return Label(words[:1].upper() + words[1:], "")
