"""Console pages for policies: the form explains itself, drafts, diff, publish, rollback, replays, roles."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import cast

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from governance.models import AuditEntry, Fact, Job, PolicyDraft, PolicyVersion
from governance.rules.guard import DEFAULT_SOURCE_CAPS
from governance.rules.policy import HELP, PolicySettings
from governance.services import policies as policy_service
from governance.services import replay as replay_service
from tests.governance.policy_helpers import retrieve, write
from tests.governance.review_helpers import assert_inert, hostile
from tests.personas import FactFactory, PrincipalFactory, make_agent, make_retrieval_event, make_user

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
AGENT = "/agents/acme/support-bot/"


def form_data(**changes) -> dict[str, object]:
    """What the browser posts for the policy form: every field, checkboxes only when ticked."""
    values = {**PolicySettings().to_dict(), **changes}
    data: dict[str, object] = {k: v for k, v in values.items() if not isinstance(v, bool | list)}
    data["allowed_kinds"] = values["allowed_kinds"]
    data["per_round_kinds"] = values["per_round_kinds"]
    if values["require_identity_verification"]:
        data["require_identity_verification"] = "on"
    return data


@pytest.fixture
def pat(client, policy_editor):
    client.force_login(policy_editor)
    return client


def test_urls_and_nav(pat, support_bot):
    assert reverse("policies:agents") == "/agents/"
    assert reverse("policies:agent", args=["acme", "support-bot"]) == AGENT
    home = pat.get("/").content.decode()
    assert 'href="/agents/"' in home
    page = pat.get("/agents/").content.decode()
    assert f'href="{AGENT}"' in page
    assert "version 1" in page


def test_form_shows_every_field_with_its_explanation_and_the_active_values(pat, support_bot):
    html = pat.get(AGENT).content.decode()
    for name, text in HELP.items():
        assert f'name="{name}"' in html, name
        assert text in html.replace("&#x27;", "'"), name
    assert 'name="confirm_days" value="30"' in html
    assert 'id="save-draft"' in html
    assert "No draft." in html


def test_invalid_form_renders_its_errors_and_saves_nothing(pat, support_bot):
    response = pat.post(
        reverse("policies:save_draft", args=["acme", "support-bot"]),
        form_data(
            recent_days=10, confirm_days=10, weight_freshness=-1, token_budget="lots", allowed_kinds=[]
        ),
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert "The draft was not saved" in html
    assert "Enter a whole number." in html  # token_budget: the form's own type check
    # The relation rules come from the policy rules only once the types parse; the values stay as typed.
    assert 'name="confirm_days" value="10"' in html
    assert not PolicyDraft.objects.exists()
    assert not AuditEntry.objects.filter(action="policy.draft_saved").exists()


def test_rule_errors_are_shown_next_to_their_fields(pat, support_bot):
    response = pat.post(
        reverse("policies:save_draft", args=["acme", "support-bot"]),
        form_data(recent_days=10, confirm_days=10, weight_freshness=-1, allowed_kinds=[], per_round_kinds=[]),
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_confirm_days_error">Must be greater than “Recent for (days)”' in html
    assert 'id="id_weight_freshness_error">Weights cannot be negative.' in html
    assert 'id="id_allowed_kinds_error">Allow at least one kind.' in html
    assert 'aria-invalid="true"' in html
    assert not PolicyDraft.objects.exists()


def test_saving_a_draft_shows_the_diff_against_the_active_version(pat, support_bot):
    response = pat.post(
        reverse("policies:save_draft", args=["acme", "support-bot"]), form_data(confirm_days=10)
    )
    assert response.status_code == 302
    assert PolicyDraft.objects.get().policy == PolicySettings(confirm_days=10)

    html = pat.get(AGENT).content.decode()
    assert '<tr data-field="confirm_days">' in html
    assert "<del>30</del>" in html and "<ins>10</ins>" in html
    assert 'name="confirm_days" value="10"' in html  # the form now shows the draft
    assert 'id="publish-draft"' in html and 'id="start-replay"' in html


def test_htmx_save_answers_the_workspace_fragment(pat, support_bot):
    url = reverse("policies:save_draft", args=["acme", "support-bot"])
    ok = pat.post(url, form_data(max_items=5), **HTMX)
    assert ok.status_code == 200
    html = ok.content.decode()
    assert html.lstrip().startswith('<div id="workspace"')
    assert "Draft saved." in html and '<tr data-field="max_items">' in html
    assert "<html" not in html

    bad = pat.post(url, form_data(max_items=0), **HTMX)
    assert bad.status_code == 400
    assert 'id="id_max_items_error">Must allow at least one item.' in bad.content.decode()
    assert PolicyDraft.objects.get().policy.max_items == 5  # the earlier draft is untouched


def test_publish_needs_a_reason_then_makes_a_version(pat, support_bot, policy_editor):
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    url = reverse("policies:publish", args=["acme", "support-bot"])

    refused = pat.post(url, {"reason": "  "})
    assert refused.status_code == 400
    assert "Give a reason" in refused.content.decode()
    assert PolicyVersion.objects.count() == 1

    done = pat.post(url, {"reason": "Old memory confused users"}, follow=True)
    html = done.content.decode()
    assert "Published version 2" in html
    assert 'id="active-version">version 2<' in html
    assert '<tr data-version="2" class="active">' in html
    assert "Old memory confused users" in html and ">pat<" in html
    assert "<code>confirm_days</code> 30 &rarr; 10" in html


def test_rollback_from_the_version_list(pat, support_bot, policy_editor):
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    policy_service.publish_draft(support_bot.agent, "Tighter", user=policy_editor)
    url = reverse("policies:rollback", args=["acme", "support-bot", 1])

    assert "not brought back" in pat.post(url, {"reason": ""}, follow=True).content.decode()
    assert PolicyVersion.objects.count() == 2
    html = pat.post(url, {"reason": "Too tight"}, follow=True).content.decode()

    assert "Version 3 published, equal to version 1." in html
    new = PolicyVersion.objects.get(version=3)
    assert new.settings == PolicyVersion.objects.get(version=1).settings
    assert "equal to version 1 (rollback)" in html


@pytest.mark.parametrize("persona", ["reviewer", "auditor"])
def test_readers_see_the_policy_read_only_and_cannot_post(client, support_bot, persona, request, caplog):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    html = client.get(AGENT).content.decode()
    assert 'name="confirm_days" value="30"' in html and "disabled" in html
    assert 'id="save-draft"' not in html and "Roll back to" not in html
    with caplog.at_level(logging.WARNING, logger="governance.access"):
        for name, data in (
            ("save_draft", form_data(confirm_days=10)),
            ("publish", {"reason": "x"}),
            ("start_replay", {"events": 5}),
        ):
            assert (
                client.post(reverse(f"policies:{name}", args=["acme", "support-bot"]), data).status_code
                == 403
            )
        caps = reverse("policies:source_caps", args=["acme"])
        assert client.post(caps, {"acme-reason": "x", "acme-cap_web_page": 3}).status_code == 403
    assert f"denied user={user.username}" in caplog.text
    assert not PolicyDraft.objects.exists() and not Job.objects.exists()


def test_other_projects_agents_are_404(client, support_bot, outsider, other_project):
    client.force_login(make_user("gil", "policy_editor", other_project))
    assert client.get(AGENT).status_code == 404
    assert (
        client.post(reverse("policies:save_draft", args=["acme", "support-bot"]), form_data()).status_code
        == 404
    )
    assert "support-bot" not in client.get("/agents/").content.decode()
    assert not PolicyDraft.objects.exists()


def test_anonymous_is_sent_to_log_in(client, support_bot):
    response = client.get(AGENT)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_replay_runs_and_shows_changed_events_charts_and_inert_memory_text(
    pat, support_bot, project, policy_editor, django_capture_on_commit_callbacks
):
    alice = PrincipalFactory(project=project, external_id="alice")
    planted = hostile("/agents/acme/support-bot/publish")
    twenty_days = timezone.now() - timedelta(days=20)
    fact = cast(
        Fact, FactFactory(project=project, principal=alice, statement=planted, source_observed_at=twenty_days)
    )
    write(support_bot, "Uses a screen reader", days_ago=3)
    event = retrieve(support_bot, session="s-1")
    assert fact.pk in {item["fact_id"] for item in event["items"]}
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)

    with django_capture_on_commit_callbacks(execute=True):
        started = pat.post(reverse("policies:start_replay", args=["acme", "support-bot"]), {"events": 100})

    job = Job.objects.get()
    assert started.status_code == 302
    assert started["Location"] == reverse("policies:replay", args=["acme", "support-bot", job.pk])
    html = pat.get(started["Location"]).content.decode()
    assert 'id="changed-events">1<' in html
    assert 'id="items-dropped">1<' in html
    assert f'<tr data-event="{event["retrieval_id"]}">' in html
    assert f'href="{reverse("retrievals:detail", args=[event["retrieval_id"]])}"' in html
    assert '<tr data-dropped="stale">' in html
    assert html.count('<svg viewBox="0 0 720 240"') == 2
    assert "Re-confirm up to (days) <code" in html  # what the draft changes, in words
    # The planted statement is escaped text inside an hx-disable container, never markup.
    assert_inert(html)
    assert 'hx-post="/agents/acme/support-bot/publish"' not in html
    assert '<section class="card" id="changed" hx-disable hx-ignore>' in html


def test_replay_page_polls_while_running_and_refreshes_when_done(
    pat, support_bot, policy_editor, monkeypatch
):
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)  # stays queued: no worker here
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    job = replay_service.start_replay(support_bot.agent, 100, user=policy_editor)
    Job.objects.filter(pk=job.pk).update(status="running", progress_done=40, progress_total=100)
    url = reverse("policies:replay", args=["acme", "support-bot", job.pk])

    page = pat.get(url).content.decode()
    assert 'hx-trigger="every 1s"' in page and f'hx-get="{url}"' in page
    fragment = pat.get(url, **HTMX)
    html = fragment.content.decode()
    assert html.lstrip().startswith('<section id="replay-progress"')
    assert '<progress id="replay-bar" max="100" value="40">40%</progress>' in html
    assert 'id="cancel-replay"' in html

    cancelled = pat.post(reverse("policies:cancel_replay", args=["acme", "support-bot", job.pk]), **HTMX)
    assert "Cancelling" in cancelled.content.decode()
    assert Job.objects.get(pk=job.pk).cancel_requested is True

    Job.objects.filter(pk=job.pk).update(status="cancelled", result=None)
    done = pat.get(url, **HTMX)
    assert done.status_code == 204 and done["HX-Refresh"] == "true"


def test_another_agents_job_url_is_404(pat, support_bot, project, policy_editor, monkeypatch):
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)
    other = make_agent(project, "other-bot").agent
    policy_service.save_draft(other, {"confirm_days": 10}, user=policy_editor)
    job = replay_service.start_replay(other, 5, user=policy_editor)
    assert pat.get(reverse("policies:replay", args=["acme", "support-bot", job.pk])).status_code == 404
    assert pat.get(reverse("policies:replay", args=["acme", "other-bot", job.pk])).status_code == 200


def test_source_caps_form(pat, project):
    url = reverse("policies:source_caps", args=["acme"])
    bad = pat.post(url, {"acme-reason": "", "acme-cap_web_page": 9})
    assert bad.status_code == 400
    assert "Ensure this value is less than or equal to 5." in bad.content.decode()
    project.refresh_from_db()
    assert project.source_caps == {}

    data: dict[str, object] = {f"acme-cap_{source}": cap for source, cap in DEFAULT_SOURCE_CAPS.items()}
    data.update({"acme-cap_web_page": 2, "acme-reason": "Our wiki is curated"})
    # Raising a cap lets more become memory without review: a policy editor may not.
    refused = pat.post(url, data)
    assert refused.status_code == 400
    assert "Only a project administrator may make this change" in refused.content.decode()
    project.refresh_from_db()
    assert project.source_caps == {}

    admin = Client()
    admin.force_login(make_user("ada", "admin", project))
    assert admin.post(url, data).status_code == 302
    project.refresh_from_db()
    assert project.source_caps == {"web_page": 2}


def test_replay_page_says_session_thresholds_are_not_previewed(pat, support_bot, policy_editor, monkeypatch):
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)
    policy_service.save_draft(support_bot.agent, {"session_resume_days": 3}, user=policy_editor)
    job = replay_service.start_replay(support_bot.agent, 10, user=policy_editor)
    html = pat.get(reverse("policies:replay", args=["acme", "support-bot", job.pk])).content.decode()
    assert 'id="session-note"' in html
    assert '<li data-field="session_resume_days">' in html

    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    other = replay_service.start_replay(support_bot.agent, 10, user=policy_editor)
    assert (
        'id="session-note"'
        not in pat.get(reverse("policies:replay", args=["acme", "support-bot", other.pk])).content.decode()
    )


def test_publish_warns_until_this_draft_was_previewed_and_the_result_offers_publish(
    pat, support_bot, policy_editor, django_capture_on_commit_callbacks
):
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    assert "data-unpreviewed" in pat.get(AGENT).content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        job = replay_service.start_replay(support_bot.agent, 100, user=policy_editor)
    result_page = pat.get(reverse("policies:replay", args=["acme", "support-bot", job.pk])).content.decode()
    assert 'id="publish-from-result"' in result_page
    # Fewer retrievals than asked for is said, not left as "500" against "0".
    assert 'id="events-explained"' in result_page and "the last\n    100 retrievals" in result_page
    assert "data-unpreviewed" not in pat.get(AGENT).content.decode()

    # A changed draft is a new draft: the old preview no longer counts.
    policy_service.save_draft(support_bot.agent, {"confirm_days": 12}, user=policy_editor)
    assert "data-unpreviewed" in pat.get(AGENT).content.decode()
    stale = pat.get(reverse("policies:replay", args=["acme", "support-bot", job.pk])).content.decode()
    assert 'id="publish-from-result"' not in stale and "preview it again" in stale


def test_progress_before_the_count_is_known_never_reads_0_of_0(pat, support_bot, policy_editor, monkeypatch):
    monkeypatch.setattr(replay_service, "_enqueue", lambda job_id: None)
    policy_service.save_draft(support_bot.agent, {"confirm_days": 10}, user=policy_editor)
    job = replay_service.start_replay(support_bot.agent, 100, user=policy_editor)
    html = pat.get(reverse("policies:replay", args=["acme", "support-bot", job.pk]), **HTMX).content.decode()
    assert "0 of 0" not in html and 'id="replay-starting"' in html and "Waiting for a worker" in html


def test_freshness_ruler_counts_the_agents_active_facts_per_tier(pat, support_bot, project, policy_editor):
    now = timezone.now()
    for days in (1, 2, 15, 60):
        FactFactory(project=project, agent=support_bot.agent, last_verified_at=now - timedelta(days=days))
    FactFactory(project=project, last_verified_at=now)  # another writer's fact: not counted
    policy_service.save_draft(support_bot.agent, {"recent_days": 20, "confirm_days": 90}, user=policy_editor)

    html = pat.get(AGENT).content.decode()

    active, draft = html.split('data-ruler="0"')[1].split('data-ruler="1"')
    # Active version: 7 / 30 days; the draft: 20 / 90 days.
    assert (
        '<tspan data-tier="recent">2</tspan>' in active and '<tspan data-tier="confirm">1</tspan>' in active
    )
    assert '<tspan data-tier="stale">1</tspan>' in active
    assert '<tspan data-tier="recent">3</tspan>' in draft and '<tspan data-tier="confirm">1</tspan>' in draft
    assert '<tspan data-tier="stale">0</tspan>' in draft


def test_budget_is_drawn_over_a_histogram_of_recent_token_use(pat, support_bot, policy_editor):
    for tokens in (100, 250, 550):
        make_retrieval_event(support_bot.agent, tokens_used=tokens, token_budget=600)
    policy_service.save_draft(support_bot.agent, {"token_budget": 300}, user=policy_editor)

    html = pat.get(AGENT).content.decode()

    section = html[html.index('id="budget-usage"') :]
    section = section[: section.index("</section>")]
    assert "last 3 retrievals" in section and "budget of 300" in section
    # 100 and 250 fit the draft's 300; 550 would not.
    within = re.findall(r'class="bar s0"[^>]*data-value="(\d+)"', section)
    over = re.findall(r'class="bar s1"[^>]*data-value="(\d+)"', section)
    assert sorted(map(int, within)) == [1, 1] and over == ["1"]


# --- The ranking preview and the rulers that follow the draft (issue 16) ---------------------


def two_facts_and_a_retrieval(support_bot):
    newer = write(support_bot, "Uses a screen reader", days_ago=1)
    older = write(support_bot, "Prefers invoices by email", days_ago=3)
    event = retrieve(support_bot, session="s-1")
    return newer["fact"]["id"], older["fact"]["id"], event["retrieval_id"]


def ranked_row(html: str, fact_id: int) -> str:
    return html.split(f'data-fact="{fact_id}"')[1].split("</tr>")[0]


def test_the_ranking_preview_shows_a_real_retrieval_under_both_policies(pat, support_bot, policy_editor):
    newer, older, _ = two_facts_and_a_retrieval(support_bot)
    policy_service.save_draft(support_bot.agent, {"max_items": 1}, user=policy_editor)

    html = pat.get(AGENT).content.decode()

    assert "Ranking: one recent retrieval under both policies" in html
    first, second = ranked_row(html, newer), ranked_row(html, older)
    assert "#1" in first and "Same place" in first
    assert first.count("injected") == 2
    # One item at most under the draft: the second one is left out, in words.
    assert "Drops out" in second and "left out: over the token budget" in second
    assert "1 fact would go in or out." in html


def test_what_if_follows_typed_values_without_saving_them(pat, support_bot):
    _, older, _ = two_facts_and_a_retrieval(support_bot)

    response = pat.get(f"{AGENT}what-if", form_data(max_items=1, recent_days=2, confirm_days=60), **HTMX)

    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="live"')
    assert "the values typed above (not saved)" in html
    assert "Drops out" in ranked_row(html, older)
    # The rulers follow too, on one scale: 75 days (60 x 1.25) for both.
    assert "Values typed: recent up to 2 days, re-confirm up to 60 days" in html
    assert html.count('data-scale="75"') == 2
    assert not PolicyDraft.objects.filter(agent=support_bot.agent).exists()


def test_what_if_with_refused_values_says_so_and_keeps_the_saved_draft(pat, support_bot):
    two_facts_and_a_retrieval(support_bot)
    html = pat.get(f"{AGENT}what-if", form_data(confirm_days=3), **HTMX).content.decode()
    assert 'id="live-errors"' in html and "Must be greater than" in html
    assert "Values typed" not in html


def test_the_person_picks_which_retrieval_to_re_rank(pat, support_bot):
    two_facts_and_a_retrieval(support_bot)
    earlier = retrieve(support_bot, session="s-2")["retrieval_id"]
    html = pat.get(f"{AGENT}?event={earlier}").content.decode()
    assert f'<option value="{earlier}" selected>' in html


def test_without_a_retrieval_of_two_facts_there_is_nothing_to_re_rank(pat, support_bot):
    write(support_bot, "Uses a screen reader", days_ago=1)
    retrieve(support_bot, session="s-1")
    html = pat.get(AGENT).content.decode()
    assert "nothing to re-rank" in html


def test_another_agents_retrieval_cannot_be_previewed_here(pat, support_bot, project):
    mine = two_facts_and_a_retrieval(support_bot)[2]
    other = make_agent(project, "sales-bot")
    write(other, "Prefers calls", days_ago=1)
    write(other, "Lives in Leeds", days_ago=1)
    theirs = retrieve(other, session="x")["retrieval_id"]
    html = pat.get(f"{AGENT}?event={theirs}").content.decode()
    assert f'<option value="{mine}" selected>' in html and f'value="{theirs}"' not in html


def test_the_published_and_draft_rulers_share_one_scale(pat, support_bot, policy_editor):
    policy_service.save_draft(support_bot.agent, {"recent_days": 20, "confirm_days": 90}, user=policy_editor)
    html = pat.get(AGENT).content.decode()
    # The longer ruler (90 x 1.25 days) sets the scale: version 1's 7 days are 6.2 % of it.
    assert html.count('data-scale="112"') == 2
    active = html.split('data-ruler="0"')[1].split('data-ruler="1"')[0]
    assert 'class="tier recent" x="0" y="0" width="6.2%"' in active
