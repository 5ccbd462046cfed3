"""The resume hint seen through the write guard (R5, R9).

A resume hint is injected word for word into the next session's block
("Last session: ..."), so it is memory text like any statement and can carry
the same planted instructions, markup or links. It is not a fact and never
goes through ``submit_write``, so the guard's content checks run on it here:
at session end (the findings join the summary's write, for a reviewer) and at
retrieval (a hint with findings is withheld). Pure: no ORM.
"""

from __future__ import annotations

from collections.abc import Mapping

from governance.rules import guard

HINT_PREFIX = "In the resume hint: "
# The hint comes from the agent's summarizer, like the summary itself (R4).
HINT_SOURCE = "summarizer"


def resume_hint_findings(
    hint: str, source_caps: Mapping[str, int] = guard.DEFAULT_SOURCE_CAPS
) -> tuple[guard.Finding, ...]:
    """The guard's injection findings on ``hint``, each detail saying it is about the hint.

    Only injection checks count: trust-level findings (a summarizer's low
    authority) say nothing about whether the text steers the model, and the
    context-dependent checks (tombstones, bursts) concern facts, not hints.
    """
    if not hint.strip():
        return ()
    proposal = guard.WriteProposal(
        statement=hint,
        kind="summary",
        key=None,
        has_principal=True,
        source_type=HINT_SOURCE,
        source_ref="resume_hint",
        requested_authority=None,
    )
    # No fingerprints to compare: the key is never used.
    context = guard.GuardContext(source_caps=source_caps, fingerprint_key=b"")
    result = guard.check_write(proposal, context, auto_approve_min_authority=1)
    return tuple(
        guard.Finding(f.check, f.severity, HINT_PREFIX + f.detail)
        for f in result.findings
        if f.check in guard.INJECTION_CHECKS
    )
