"""services.reviews.decide: approve, reject, edit-and-approve, and exactly one winner in a race."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from governance.models import AuditEntry, Fact, ReviewDecision, Supersession, Write
from governance.rules import contradictions
from governance.selectors.audit import verify_chain
from governance.services import audit, retrievals, reviews
from governance.services.reviews import AlreadyDecided, Decision, InvalidDecision
from tests.governance.review_helpers import PENDING, QUARANTINED, propose
from tests.personas import make_agent, make_user


@pytest.mark.django_db
def test_approve_makes_the_write_and_its_fact_active_and_audits_the_reason(support_bot, reviewer):
    write = propose(support_bot, PENDING)
    assert write.status == "pending_review"

    reviews.decide(write.pk, Decision("approve", "User said so in the ticket"), reviewer=reviewer)

    write.refresh_from_db()
    assert write.status == "active"
    assert write.decided_at is not None
    assert Fact.objects.get(pk=write.fact_id).status == "active"
    decision = ReviewDecision.objects.get(write=write)
    assert (decision.action, decision.reviewer, decision.reason) == (
        "approve",
        reviewer,
        "User said so in the ticket",
    )
    entry = AuditEntry.objects.get(object_type="write", object_id=str(write.pk), action="write.approve")
    assert entry.reason == "User said so in the ticket"
    assert entry.actor_user == reviewer


@pytest.mark.django_db
def test_approving_a_conflicting_write_supersedes_the_current_fact(support_bot, reviewer):
    old = propose(
        support_bot, "Deploys to us-east-1", source_type="user_statement", kind="profile", key="region"
    )
    new = propose(
        support_bot, "Deploys to eu-west-2", source_type="model_inference", kind="profile", key="region"
    )
    # R6: an inference never replaces direct evidence on its own.
    assert new.status == "pending_review"
    assert new.conflicts_with_id == old.fact_id

    reviews.decide(new.pk, Decision("approve", "Confirmed with the customer"), reviewer=reviewer)

    assert Fact.objects.get(pk=old.fact_id).status == "superseded"
    assert Fact.objects.get(pk=new.fact_id).status == "active"
    link = Supersession.objects.get(old_fact_id=old.fact_id, new_fact_id=new.fact_id)
    assert link.decided_by == "user:riley"


@pytest.mark.django_db
def test_reject_marks_the_write_and_its_fact_rejected(support_bot, reviewer):
    write = propose(support_bot, QUARANTINED, source_type="web_page")
    assert write.status == "quarantined"

    reviews.decide(write.pk, Decision("reject", "Planted by a web page"), reviewer=reviewer)

    write.refresh_from_db()
    assert write.status == "rejected"
    fact = Fact.objects.get(pk=write.fact_id)
    assert fact.status == "rejected"
    assert "Planted by a web page" in fact.status_reason


@pytest.mark.django_db
def test_edit_and_approve_activates_the_edited_statement_and_keeps_what_the_agent_sent(support_bot, reviewer):
    write = propose(support_bot, PENDING)

    reviews.decide(
        write.pk,
        Decision("approve", "Trimmed to what they said", statement="Enjoys hiking on weekends"),
        reviewer=reviewer,
    )

    write.refresh_from_db()
    fact = Fact.objects.get(pk=write.fact_id)
    assert (fact.status, fact.statement) == ("active", "Enjoys hiking on weekends")
    assert write.statement == PENDING
    # Retrieval compares the fact by what the approved words claim, stored with them.
    assert contradictions.holds_claims_of(fact.claims, fact.statement, fact.key)
    decision = ReviewDecision.objects.get(write=write)
    assert (decision.action, decision.edited_statement) == ("edit_approve", "Enjoys hiking on weekends")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("decision", "field"),
    [
        (Decision("approve", "   "), "reason"),
        (Decision("delete", "because"), "action"),
        (Decision("reject", "because", statement="Something else"), "statement"),
        (Decision("approve", "because", statement="  "), "statement"),
    ],
)
def test_invalid_decisions_change_nothing(support_bot, reviewer, decision, field):
    write = propose(support_bot, PENDING)

    with pytest.raises(InvalidDecision) as raised:
        reviews.decide(write.pk, decision, reviewer=reviewer)

    assert raised.value.field == field
    write.refresh_from_db()
    assert write.status == "pending_review"
    assert not ReviewDecision.objects.filter(write=write).exists()


@pytest.mark.django_db
def test_a_second_decision_is_refused_and_changes_nothing(support_bot, reviewer, second_reviewer):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, Decision("approve", "Looks right"), reviewer=reviewer)

    with pytest.raises(AlreadyDecided):
        reviews.decide(write.pk, Decision("reject", "Looks wrong"), reviewer=second_reviewer)

    write.refresh_from_db()
    assert write.status == "active"
    assert ReviewDecision.objects.get(write=write).reviewer == reviewer


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_decisions_produce_exactly_one(project, support_bot, monkeypatch):
    riley = make_user("riley", "reviewer", project)
    sam = make_user("sam", "reviewer", project)
    write = propose(support_bot, PENDING)
    # Hold the winner inside its transaction for a moment, so the other
    # reviewer's decision certainly arrives while the row is locked.
    real_record = audit.record

    def slow_record(*args, **kwargs):
        time.sleep(0.3)
        return real_record(*args, **kwargs)

    monkeypatch.setattr(audit, "record", slow_record)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}
    losers: list[AlreadyDecided] = []

    def decide(user, action: str) -> None:
        barrier.wait()
        try:
            reviews.decide(write.pk, Decision(action, f"{user.username} decides"), reviewer=user)
            outcomes[user.username] = "won"
        except AlreadyDecided as exc:
            outcomes[user.username] = "already decided"
            losers.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=decide, args=(riley, "approve")),
        threading.Thread(target=decide, args=(sam, "reject")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes.values()) == ["already decided", "won"]
    decision = ReviewDecision.objects.get(write_id=write.pk)
    winner = next(name for name, result in outcomes.items() if result == "won")
    assert decision.reviewer.username == winner
    # The loser saw the winner's committed state, not the pending one.
    write.refresh_from_db()
    assert losers[0].write.status == write.status
    expected = "active" if decision.action == "approve" else "rejected"
    assert write.status == expected
    assert Fact.objects.get(pk=write.fact_id).status == expected
    assert (
        AuditEntry.objects.filter(object_type="write", object_id=str(write.pk), action__startswith="write.")
        .exclude(action="write.submitted")
        .count()
        == 1
    )


# --- undo: a short window in which a decision goes back to waiting (docs/console.md) ---


def _undo_decision_rows(write: Write) -> list[tuple[int, str]]:
    return list(
        ReviewDecision.objects.filter(write=write).order_by("sequence").values_list("sequence", "action")
    )


@pytest.mark.django_db
def test_undo_of_an_approval_puts_write_and_fact_back_in_the_queue_and_keeps_the_trail(support_bot, reviewer):
    write = propose(support_bot, QUARANTINED, source_type="web_page")
    assert write.status == "quarantined"
    reviews.decide(write.pk, Decision("approve", "Checked"), reviewer=reviewer)

    reviews.undo(write.pk, reviewer=reviewer)

    write.refresh_from_db()
    assert (write.status, write.decided_at) == ("quarantined", None)
    assert Fact.objects.get(pk=write.fact_id).status == "quarantined"
    # Append-only: the approval stays, the undo is a row of its own, and both are audited.
    assert _undo_decision_rows(write) == [(1, "approve"), (2, "undo")]
    actions = list(
        AuditEntry.objects.filter(object_type="write", object_id=str(write.pk))
        .order_by("sequence")
        .values_list("action", flat=True)
    )
    assert actions[-2:] == ["write.approve", "write.undo"]
    undo_entry = AuditEntry.objects.get(object_id=str(write.pk), action="write.undo")
    assert undo_entry.data["from"] == "active" and undo_entry.data["to"] == "quarantined"
    assert undo_entry.actor_user == reviewer
    assert verify_chain(write.project_id) is None

    # Back in the queue, it can be decided afresh; the new decision is number 3.
    reviews.decide(write.pk, Decision("reject", "On second thought: an injection"), reviewer=reviewer)
    write.refresh_from_db()
    assert write.status == "rejected"
    assert _undo_decision_rows(write) == [(1, "approve"), (2, "undo"), (3, "reject")]
    assert write.decision is not None and write.decision.action == "reject"


@pytest.mark.django_db
def test_undo_of_an_edited_approval_restores_what_the_agent_sent(support_bot, reviewer):
    write = propose(support_bot, PENDING)
    reviews.decide(
        write.pk, Decision("approve", "Fixed the place", statement="Enjoys hiking"), reviewer=reviewer
    )
    assert Fact.objects.get(pk=write.fact_id).statement == "Enjoys hiking"

    reviews.undo(write.pk, reviewer=reviewer)

    fact = Fact.objects.get(pk=write.fact_id)
    assert (fact.status, fact.statement) == ("pending_review", PENDING)
    assert contradictions.holds_claims_of(fact.claims, fact.statement, fact.key)


@pytest.mark.django_db
def test_undo_of_a_rejection_brings_the_write_back(support_bot, reviewer):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, Decision("reject", "Not about the product"), reviewer=reviewer)

    reviews.undo(write.pk, reviewer=reviewer)

    write.refresh_from_db()
    assert write.status == "pending_review"
    assert Fact.objects.get(pk=write.fact_id).status == "pending_review"


@pytest.mark.django_db
def test_undo_is_refused_after_the_window_and_to_anyone_but_the_decider(
    support_bot, reviewer, second_reviewer
):
    write = propose(support_bot, PENDING)
    reviews.decide(write.pk, Decision("approve", "Fine"), reviewer=reviewer)

    with pytest.raises(reviews.UndoRefused, match="Only the reviewer who decided"):
        reviews.undo(write.pk, reviewer=second_reviewer)
    late = timezone.now() + reviews.undo_window() + timedelta(seconds=1)
    with pytest.raises(reviews.UndoRefused, match="no longer be undone"):
        reviews.undo(write.pk, reviewer=reviewer, now=late)

    write.refresh_from_db()
    assert write.status == "active"
    assert _undo_decision_rows(write) == [(1, "approve")]
    # A second undo of an undone decision has nothing to undo.
    reviews.undo(write.pk, reviewer=reviewer)
    with pytest.raises(reviews.UndoRefused, match="no decision"):
        reviews.undo(write.pk, reviewer=reviewer)


@pytest.mark.django_db
def test_undo_is_refused_once_an_agent_was_given_the_fact(project, reviewer):
    bot = make_agent(project, "lenient-bot", min_authority=1)
    write = propose(bot, PENDING)
    reviews.decide(write.pk, Decision("approve", "Fine"), reviewer=reviewer)
    event, _ = retrievals.retrieve(
        bot.agent,
        retrievals.RetrieveRequest(
            principal="alice", session="s-1", query="", round=1, identity_verified=True
        ),
    )
    assert any(c.fact_id == write.fact_id and c.decision == "selected" for c in event.candidates)

    with pytest.raises(reviews.UndoRefused, match="already been given"):
        reviews.undo(write.pk, reviewer=reviewer)
    assert Fact.objects.get(pk=write.fact_id).status == "active"


@pytest.mark.django_db
def test_undo_is_refused_when_the_approval_replaced_a_fact(support_bot, reviewer):
    old = propose(
        support_bot, "Deploys to us-east-1", source_type="user_statement", kind="profile", key="region"
    )
    new = propose(
        support_bot, "Deploys to eu-west-2", source_type="model_inference", kind="profile", key="region"
    )
    reviews.decide(new.pk, Decision("approve", "Confirmed"), reviewer=reviewer)

    with pytest.raises(reviews.UndoRefused, match="replaced an older one"):
        reviews.undo(new.pk, reviewer=reviewer)
    assert Fact.objects.get(pk=old.fact_id).status == "superseded"
