"""Console pages for agents' policies: edit a draft, compare, publish, roll back, preview by replay.

Views parse, call one service and render (STYLE.md). The policy form only
parses types; every rule about the values (confirm_days above recent_days,
weights, the budget against the tokenizer's context) is
``rules.policy.merge_and_validate``, reached through ``services.policies``,
so the console and the API explain a bad value the same way.

One template per page; the parts htmx refreshes (the draft workspace, the
replay progress) are partials of the same template, so the fragment and the
full page cannot drift.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from governance import access
from governance.models import Agent, ChangeApproval, Job, Project
from governance.models.facts import SourceType
from governance.rules import replay as replay_rules
from governance.rules.guard import DEFAULT_SOURCE_CAPS
from governance.rules.labels import label_for
from governance.rules.policy import BOUNDS as POLICY_BOUNDS
from governance.rules.policy import ENCODINGS, FACT_KINDS, HELP, PolicySettings, merge_and_validate
from governance.rules.policy_changes import FieldChange, diff_settings
from governance.rules.retrieval import REASONS
from governance.selectors import policies as selectors
from governance.services import policies as policy_service
from governance.services import relevance
from governance.services import replay as replay_service
from governance.views.base import add_service_error, check, console_view, is_htmx, reload_page, scoped
from governance.views.charts import grouped_bars, stacked_bars

AGENT_TEMPLATE = "governance/policies/agent.html"
REPLAY_TEMPLATE = "governance/policies/replay.html"
REASON_HELP = "Why this change? It is kept with the version and in the audit trail."
DEFAULT_REPLAY_EVENTS = 500
SESSION_FIELDS = ("session_resume_days", "session_confirm_days")

LABELS: dict[str, str] = {
    "token_budget": "Token budget",
    "encoding": "Tokenizer encoding",
    "recent_days": "Recent for (days)",
    "confirm_days": "Re-confirm up to (days)",
    "session_resume_days": "Resume a session within (days)",
    "session_confirm_days": "Ask the person to confirm within (days)",
    "min_authority": "Authority floor",
    "allowed_kinds": "Allowed kinds",
    "per_round_kinds": "Per-round kinds",
    "decay_half_life_days": "Freshness half-life (days)",
    "weight_relevance": "Weight: relevance",
    "weight_freshness": "Weight: freshness",
    "weight_confidence": "Weight: confidence",
    "min_relevance": "Relevance floor",
    "max_items": "Most items",
    "require_identity_verification": "Require identity verification",
    "auto_approve_min_authority": "Auto-approve from authority",
}
# Fieldsets of the form, in the order a product manager thinks about them.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Budget", ("token_budget", "encoding", "max_items")),
    # Two unrelated "confirm" settings: one is about a fact's age, the other about how long
    # ago the person was last seen. Their fieldsets say which is which.
    (
        "Freshness of each fact (age since last verified)",
        ("recent_days", "confirm_days", "decay_half_life_days"),
    ),
    (
        "Returning people (time since the person was last seen, not the facts' age)",
        ("session_resume_days", "session_confirm_days", "require_identity_verification"),
    ),
    ("What may be injected", ("min_authority", "allowed_kinds", "per_round_kinds", "min_relevance")),
    ("Ranking", ("weight_relevance", "weight_freshness", "weight_confidence")),
    ("Writes", ("auto_approve_min_authority",)),
)


def _bounds(name: str) -> dict[str, str]:
    # Only a hint for the browser: the bounds are enforced (with the same
    # message as the API) by the policy rules, through the service.
    low, high = POLICY_BOUNDS[name]
    return {"min": f"{low:g}", "max": f"{high:g}"}


def _int(name: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=LABELS[name], help_text=HELP[name], widget=forms.NumberInput(attrs=_bounds(name))
    )


def _float(name: str) -> forms.FloatField:
    # step "any": the browser must not refuse a value the policy rules accept (0.33 is a fine weight).
    return forms.FloatField(
        label=LABELS[name],
        help_text=HELP[name],
        widget=forms.NumberInput(attrs={"step": "any", **_bounds(name)}),
    )


def _kinds(name: str) -> forms.MultipleChoiceField:
    # Not required here: an empty list is refused by the policy rules with their own message.
    return forms.MultipleChoiceField(
        label=LABELS[name],
        help_text=HELP[name],
        required=False,
        choices=[(k, label_for("kind", k).text) for k in FACT_KINDS],
        widget=forms.CheckboxSelectMultiple,
    )


class PolicyForm(forms.Form):
    """Every policy field, typed; the values' rules are checked by the service."""

    token_budget = _int("token_budget")
    encoding = forms.ChoiceField(
        label=LABELS["encoding"], help_text=HELP["encoding"], choices=[(e, e) for e in ENCODINGS]
    )
    max_items = _int("max_items")
    recent_days = _int("recent_days")
    confirm_days = _int("confirm_days")
    decay_half_life_days = _float("decay_half_life_days")
    session_resume_days = _int("session_resume_days")
    session_confirm_days = _int("session_confirm_days")
    require_identity_verification = forms.BooleanField(
        label=LABELS["require_identity_verification"],
        help_text=HELP["require_identity_verification"],
        required=False,
    )
    min_authority = _int("min_authority")
    allowed_kinds = _kinds("allowed_kinds")
    per_round_kinds = _kinds("per_round_kinds")
    min_relevance = _float("min_relevance")
    weight_relevance = _float("weight_relevance")
    weight_freshness = _float("weight_freshness")
    weight_confidence = _float("weight_confidence")
    auto_approve_min_authority = _int("auto_approve_min_authority")

    def __init__(self, *args: Any, read_only: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.disabled = read_only

    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(title, [self[name] for name in names]) for title, names in GROUPS]

    @staticmethod
    def initial_from(policy: PolicySettings) -> dict[str, Any]:
        return policy.to_dict()


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        strip=True,
        help_text=REASON_HELP,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason: it is kept with the version and in the audit trail."},
    )


class ReplayForm(forms.Form):
    events = forms.IntegerField(
        label="Recent retrievals to replay",
        min_value=1,
        max_value=replay_service.MAX_EVENTS,
        initial=DEFAULT_REPLAY_EVENTS,
        help_text=f"The agent's most recent retrievals, up to {replay_service.MAX_EVENTS:,}.",
    )


class SourceCapsForm(forms.Form):
    """A project's maximum authority per source type (R4)."""

    reason = forms.CharField(
        max_length=2000, strip=True, help_text="Why this change? It is kept in the audit trail."
    )

    def __init__(self, *args: Any, caps: dict[str, int], read_only: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for source in SourceType.values:
            self.fields[f"cap_{source}"] = forms.IntegerField(
                label=label_for("source", source).text,
                min_value=1,
                max_value=5,
                initial=caps.get(source, DEFAULT_SOURCE_CAPS[source]),
                help_text=f"Default {DEFAULT_SOURCE_CAPS[source]}.",
                disabled=read_only,
            )
        self.fields["reason"].disabled = read_only

    def caps(self) -> dict[str, int]:
        return {source: self.cleaned_data[f"cap_{source}"] for source in SourceType.values}

    def cap_fields(self) -> list[forms.BoundField]:
        return [self[f"cap_{source}"] for source in SourceType.values]


# --- helpers ------------------------------------------------------------------


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(value) or "(none)"
    return str(value)


def change_rows(changes: list[FieldChange]) -> list[dict[str, str]]:
    """Changes as the templates show them: label, field name, before and after in words."""
    return [
        {"name": c.name, "label": LABELS[c.name], "before": _shown(c.before), "after": _shown(c.after)}
        for c in changes
    ]


def _can_edit(request: HttpRequest, project: Project | int) -> bool:
    return access.has_role(request.user, project, access.POLICY_EDIT_ROLES)


def _agent(request: HttpRequest, project: str, agent: str) -> Agent:
    # R1 for people: an agent outside the user's projects is a 404, never a 403;
    # then the role in the agent's project decides (editing needs the policy editor's).
    obj = get_object_or_404(selectors.agent(access.projects_of(request.user), project, agent))
    check(request, obj.project_id)
    return obj


def _agent_url(agent: Agent) -> str:
    return reverse("policies:agent", args=[agent.project.slug, agent.slug])


def _active_policy(agent: Agent) -> PolicySettings:
    assert agent.active_policy is not None, "every agent has an active policy version"
    return agent.active_policy.policy


def _workspace(
    request: HttpRequest,
    agent: Agent,
    *,
    form: PolicyForm | None = None,
    publish_form: ReasonForm | None = None,
    replay_form: ReplayForm | None = None,
    saved: bool = False,
) -> dict[str, Any]:
    """The draft workspace: the form (draft values, else active), the diff, publish, replay."""
    draft = selectors.draft_of(agent)
    active = _active_policy(agent)
    editable = _can_edit(request, agent.project_id)
    if form is None:
        shown = draft.policy if draft else active
        form = PolicyForm(initial=PolicyForm.initial_from(shown), read_only=not editable)
    assert agent.active_policy is not None
    return {
        "agent": agent,
        "active": agent.active_policy,
        "draft": draft,
        "draft_stale": draft is not None and draft.based_on_id != agent.active_policy_id,
        "changes": change_rows(diff_settings(active, draft.policy)) if draft else [],
        "form": form,
        "publish_form": publish_form or ReasonForm(),
        "replay_form": replay_form or ReplayForm(),
        "can_edit": editable,
        "saved": saved,
        "relevance": relevance.relevance_tradeoff(),
        "relevance_floor": (draft.policy if draft else active).min_relevance,
        # Publishing without a finished preview of this very draft gets a warning.
        "previewed": draft is not None and _previewed(agent, draft.settings),
        **_live(request, agent, active, draft.policy if draft else None, typed=False),
        **_budget_chart(agent, active, draft.policy if draft else None),
    }


def _live(
    request: HttpRequest,
    agent: Agent,
    active: PolicySettings,
    draft: PolicySettings | None,
    *,
    typed: bool,
    errors: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """What follows the draft as it is typed: the freshness rulers and one retrieval re-ranked.

    ``typed``: the draft is the form's unsaved values (the htmx refresh), not the saved draft.
    """
    choices = replay_service.preview_events(agent)
    wanted = request.GET.get("event", "")
    chosen = next((e for e in choices if str(e.pk) == wanted), choices[0] if choices else None)
    ranking = None
    if chosen is not None:
        ranking = replay_service.preview_ranking(agent, chosen.pk, active, draft or active)
    return {
        "freshness": _freshness_rulers(agent, active, draft),
        "ranking": ranking,
        "ranking_events": choices,
        "ranking_draft": draft is not None and draft != active,
        "ranking_typed": typed,
        "live_errors": errors or {},
    }


def _budget_chart(agent: Agent, active: PolicySettings, draft: PolicySettings | None) -> dict[str, Any]:
    """The token budget over a histogram of the agent's recent token use."""
    budget = draft.token_budget if draft is not None else active.token_budget
    usage = selectors.token_usage(agent, active.token_budget, budget)
    last = len(usage.edges) - 2
    bins = [
        f"{usage.edges[i]}-{usage.edges[i + 1] - (0 if i == last else 1)}"
        for i in range(len(usage.edges) - 1)
    ]
    which = "the draft's" if draft is not None and draft.token_budget != active.token_budget else "the"
    return {
        "usage": usage,
        "usage_budget": budget,
        "usage_chart": stacked_bars(
            f"Tokens used by the last {usage.events} retrievals, against {which} budget of {budget}",
            bins,
            {f"within {which} budget": usage.within, f"over {which} budget": usage.over},
        ),
    }


def _previewed(agent: Agent, draft_settings: dict[str, Any]) -> bool:
    return any(
        job.status == "succeeded"
        and job.params.get("draft") == draft_settings
        and not (job.result or {}).get("cancelled")
        for job in selectors.replay_jobs(agent)
    )


def _freshness_rulers(
    agent: Agent, active: PolicySettings, draft: PolicySettings | None
) -> list[selectors.FreshnessRuler]:
    """The tiers as rulers with this agent's active facts counted in each, for the version and the draft.

    Both on one scale (the longer of the two), so a tier that grows is drawn longer.
    """
    rulers = [selectors.freshness_ruler(agent, "Active version", active.recent_days, active.confirm_days)]
    if draft is not None and (draft.recent_days, draft.confirm_days) != (
        active.recent_days,
        active.confirm_days,
    ):
        rulers.append(selectors.freshness_ruler(agent, "Draft", draft.recent_days, draft.confirm_days))
    span = max(ruler.span_days for ruler in rulers)
    return [replace(ruler, scale_days=span) for ruler in rulers]


def _agent_page(request: HttpRequest, agent: Agent, status: int = 200, **workspace: Any) -> HttpResponse:
    context = {
        **_workspace(request, agent, **workspace),
        "versions": [
            {
                "row": row,
                "version": row.version,
                "is_active": row.is_active,
                "changes": change_rows(row.changes),
            }
            for row in selectors.version_history(agent)
        ],
        "jobs": selectors.replay_jobs(agent),
    }
    return render(request, AGENT_TEMPLATE, context, status=status)


def _partial(
    request: HttpRequest, template: str, name: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    return HttpResponse(render_to_string(f"{template}#{name}", context, request=request), status=status)


# --- pages and actions -----------------------------------------------------------


@console_view()
def agents(request: HttpRequest) -> HttpResponse:
    """Every agent of the user's projects with its policy state, and each project's source caps."""
    projects = access.projects_of(request.user).order_by("slug")
    editable = set(access.project_ids_with_role(request.user, access.POLICY_EDIT_ROLES))
    return render(
        request,
        "governance/policies/agents.html",
        {
            "agents": selectors.agents(projects),
            "caps_forms": [
                (
                    project,
                    SourceCapsForm(
                        caps=project.source_caps or {},
                        read_only=project.pk not in editable,
                        prefix=project.slug,
                    ),
                )
                for project in projects
            ],
            "editable_projects": editable,
            "can_edit": bool(editable),
            **_approvals_context(request, projects),
        },
    )


WAITING_FOR_SECOND = (
    "This change lets more become memory without a reviewer, and this project asks a second "
    "administrator to approve such changes. It is waiting for them now."
)


def _approvals_context(request: HttpRequest, projects: Any) -> dict[str, Any]:
    admin_of = set(access.project_ids_with_role(request.user, access.ADMIN_ROLES))
    return {
        "approvals": selectors.pending_approvals([p.pk for p in projects]),
        "admin_projects": admin_of,
    }


@require_POST
@console_view(write_roles=access.ADMIN_ROLES)
def decide_approval(request: HttpRequest, approval_id: int) -> HttpResponse:
    approval = get_object_or_404(selectors.approvals(access.projects_of(request.user)), pk=approval_id)
    check(request, approval.project_id)
    reason = (request.POST.get("reason") or "").strip()
    try:
        decided = policy_service.decide_approval(
            approval.pk, approve=request.POST.get("action") == "approve", reason=reason, user=request.user
        )
    except policy_service.PolicyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, APPROVAL_OUTCOMES[decided.status])
    return HttpResponseRedirect(reverse("policies:agents") + "#approvals")


APPROVAL_OUTCOMES = {
    "approved": "Approved: the change is in force.",
    "rejected": "Rejected: nothing changed.",
    "stale": "Not applied: the policy changed since this was asked for. The editor can publish it again.",
}


@require_POST
@console_view(write_roles=access.ADMIN_ROLES)
def second_approval(request: HttpRequest, project: str) -> HttpResponse:
    obj = get_object_or_404(scoped(request, Project.objects.all(), "pk"), slug=project)
    check(request, obj)
    try:
        policy_service.set_second_approval(
            obj, request.POST.get("enabled") == "on", request.POST.get("reason") or "", user=request.user
        )
    except policy_service.PolicyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Saved.")
    return HttpResponseRedirect(reverse("policies:agents") + f"#caps-{obj.slug}")


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def source_caps(request: HttpRequest, project: str) -> HttpResponse:
    obj = get_object_or_404(scoped(request, Project.objects.all(), "pk"), slug=project)
    check(request, obj)
    form = SourceCapsForm(request.POST, caps=obj.source_caps or {}, prefix=obj.slug)
    if form.is_valid():
        try:
            result = policy_service.set_source_caps(
                obj, form.caps(), form.cleaned_data["reason"], user=request.user
            )
        except policy_service.InvalidPolicy as exc:
            for name, errors in exc.errors.items():
                for error in errors:
                    add_service_error(form, f"cap_{name}", error)
        except policy_service.PolicyError as exc:
            add_service_error(form, exc.field, str(exc))
        else:
            if isinstance(result, ChangeApproval):
                messages.info(request, WAITING_FOR_SECOND)
            else:
                messages.success(request, f"Source authority caps of {obj.slug} saved.")
            return HttpResponseRedirect(reverse("policies:agents"))
    projects = access.projects_of(request.user).order_by("slug")
    editable = set(access.project_ids_with_role(request.user, access.POLICY_EDIT_ROLES))
    caps_forms = [
        (
            p,
            form
            if p.pk == obj.pk
            else SourceCapsForm(caps=p.source_caps or {}, read_only=p.pk not in editable, prefix=p.slug),
        )
        for p in projects
    ]
    return render(
        request,
        "governance/policies/agents.html",
        {
            "agents": selectors.agents(projects),
            "caps_forms": caps_forms,
            "editable_projects": editable,
            "can_edit": True,
            **_approvals_context(request, projects),
        },
        status=400,
    )


@console_view()
def agent(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    return _agent_page(request, _agent(request, project, agent))


@console_view()
def what_if(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    """The rulers and the ranking preview for the values in the form, saved or not (htmx, GET).

    Changes nothing. Values the policy rules refuse leave the preview on the saved draft and
    say which field to fix.
    """
    obj = _agent(request, project, agent)
    active = _active_policy(obj)
    saved = selectors.draft_of(obj)
    form = PolicyForm(request.GET)
    draft: PolicySettings | None = saved.policy if saved else None
    errors: dict[str, list[str]] = {}
    if not form.is_valid():
        errors = {name: [str(m) for m in messages_] for name, messages_ in form.errors.items()}
    if not errors:
        typed, errors = merge_and_validate(active, form.cleaned_data)
        draft = typed or draft
    context = {
        "agent": obj,
        "active": obj.active_policy,
        **_live(request, obj, active, draft, typed=not errors, errors=errors),
    }
    if not is_htmx(request):
        return HttpResponseRedirect(_agent_url(obj))
    return _partial(request, AGENT_TEMPLATE, "live", context)


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def save_draft(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    obj = _agent(request, project, agent)
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            policy_service.save_draft(obj, form.cleaned_data, user=request.user)
        except policy_service.InvalidPolicy as exc:
            for name, errors in exc.errors.items():
                for error in errors:
                    add_service_error(form, name, error)
        else:
            if is_htmx(request):
                obj.refresh_from_db()
                return _partial(request, AGENT_TEMPLATE, "workspace", _workspace(request, obj, saved=True))
            messages.success(
                request, "Draft saved. Compare it below, preview it with a replay, then publish."
            )
            return HttpResponseRedirect(_agent_url(obj))
    # Nothing was saved: the form comes back with the person's values and the reasons.
    if is_htmx(request):
        return _partial(request, AGENT_TEMPLATE, "workspace", _workspace(request, obj, form=form), status=400)
    return _agent_page(request, obj, status=400, form=form)


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def discard_draft(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    obj = _agent(request, project, agent)
    if policy_service.discard_draft(obj, user=request.user):
        messages.success(request, "Draft discarded.")
    return HttpResponseRedirect(_agent_url(obj))


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def publish(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    obj = _agent(request, project, agent)
    form = ReasonForm(request.POST)
    if form.is_valid():
        try:
            version = policy_service.publish_draft(obj, form.cleaned_data["reason"], user=request.user)
        except policy_service.PolicyError as exc:
            add_service_error(form, exc.field, str(exc))
        else:
            if isinstance(version, ChangeApproval):
                messages.info(request, WAITING_FOR_SECOND)
            else:
                messages.success(request, f"Published version {version.version}: the next retrieval uses it.")
            return HttpResponseRedirect(_agent_url(obj))
    return _agent_page(request, obj, status=400, publish_form=form)


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def rollback(request: HttpRequest, project: str, agent: str, version: int) -> HttpResponse:
    obj = _agent(request, project, agent)
    form = ReasonForm(request.POST)
    if form.is_valid():
        try:
            new = policy_service.rollback(obj, version, form.cleaned_data["reason"], user=request.user)
        except policy_service.PolicyError as exc:
            messages.error(request, f"Version {version} was not brought back: {exc}")
        else:
            messages.success(request, f"Version {new.version} published, equal to version {version}.")
            return HttpResponseRedirect(_agent_url(obj))
    else:
        messages.error(request, f"Version {version} was not brought back: {form.errors['reason'][0]}")
    return HttpResponseRedirect(f"{_agent_url(obj)}#versions")


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def start_replay(request: HttpRequest, project: str, agent: str) -> HttpResponse:
    obj = _agent(request, project, agent)
    form = ReplayForm(request.POST)
    if form.is_valid():
        try:
            job = replay_service.start_replay(obj, form.cleaned_data["events"], user=request.user)
        except replay_service.TooManyReplays as exc:
            form.add_error(None, str(exc))
            return _agent_page(request, obj, status=429, replay_form=form)
        except replay_service.ReplayError as exc:
            add_service_error(form, exc.field, str(exc))
        else:
            return HttpResponseRedirect(reverse("policies:replay", args=[obj.project.slug, obj.slug, job.pk]))
    return _agent_page(request, obj, status=400, replay_form=form)


def _job(request: HttpRequest, agent: Agent, job_id: UUID) -> Job:
    return get_object_or_404(selectors.replay_job(access.projects_of(request.user), agent, job_id))


@console_view()
def replay(request: HttpRequest, project: str, agent: str, job_id: UUID) -> HttpResponse:
    """One replay: its live progress while it runs, its result once done (same URL)."""
    obj = _agent(request, project, agent)
    job = _job(request, obj, job_id)
    if is_htmx(request):
        if job.is_finished:
            # The poll ends by loading the full result page in place of the progress bar.
            return reload_page()
        return _partial(request, REPLAY_TEMPLATE, "progress", _replay_context(request, obj, job))
    return render(request, REPLAY_TEMPLATE, _replay_context(request, obj, job))


@require_POST
@console_view(write_roles=access.POLICY_EDIT_ROLES)
def cancel_replay(request: HttpRequest, project: str, agent: str, job_id: UUID) -> HttpResponse:
    obj = _agent(request, project, agent)
    job = replay_service.request_cancel(_job(request, obj, job_id), user=request.user)
    url = reverse("policies:replay", args=[obj.project.slug, obj.slug, job.pk])
    if is_htmx(request):
        job = _job(request, obj, job_id)
        if job.is_finished:
            return reload_page()
        return _partial(request, REPLAY_TEMPLATE, "progress", _replay_context(request, obj, job))
    messages.info(request, "Cancel requested: the replay stops at its next progress update.")
    return HttpResponseRedirect(url)


def _replay_context(request: HttpRequest, agent: Agent, job: Job) -> dict[str, Any]:
    total = job.progress_total
    context: dict[str, Any] = {
        "agent": agent,
        "job": job,
        "percent": round(100 * job.progress_done / total) if total else 0,
        "can_edit": _can_edit(request, agent.project_id),
    }
    draft = job.params.get("draft")
    if draft:
        active = job.params.get("active_version")
        base = selectors.version(agent, active)
        changes = diff_settings(base.policy if base else PolicySettings(), PolicySettings.from_dict(draft))
        context["changes"] = change_rows(changes)
        # Replays keep each retrieval's recorded session mode (services.replay), so say so.
        context["session_changes"] = [c for c in changes if c.name in SESSION_FIELDS]
    result = job.result
    if job.is_finished and result:
        context["result"] = result
        current = selectors.draft_of(agent)
        # Publish is offered where the effect was just seen, while the draft is still what was replayed.
        context["publish_offered"] = (
            job.status == "succeeded"
            and not result.get("cancelled")
            and current is not None
            and current.settings == draft
        )
        context["publish_form"] = ReasonForm()
        context.update(_charts(result))
        context["rows"] = _changed_rows(result)
    return context


def _charts(result: dict[str, Any]) -> dict[str, Any]:
    histogram = result["tokens"]["histogram"]
    edges = histogram["edges"]
    # Each bin excludes its upper edge except the last, which holds the maximum.
    last = len(edges) - 2
    bins = [f"{edges[i]}-{edges[i + 1] - (0 if i == last else 1)}" for i in range(len(edges) - 1)]
    before, after = result["exclusions"]["before"], result["exclusions"]["after"]
    reasons = [r for r in (*REASONS, *replay_rules.REPLAY_REASONS) if before.get(r) or after.get(r)]
    return {
        "tokens_chart": grouped_bars(
            "Tokens used per retrieval", bins, {"before": histogram["before"], "after": histogram["after"]}
        ),
        "reasons_chart": grouped_bars(
            "Exclusions by reason",
            reasons,
            {"before": [before.get(r, 0) for r in reasons], "after": [after.get(r, 0) for r in reasons]},
        ),
    }


def _changed_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The changed events with today's fact statements (looked up now, never stored in the job)."""
    rows = result.get("changed", [])
    ids = {item["fact_id"] for row in rows for item in (*row["added"], *row["dropped"])}
    facts = selectors.facts_for_rows(ids)
    return [
        {
            **row,
            "added": [{**item, "fact": facts.get(item["fact_id"])} for item in row["added"]],
            "dropped": [{**item, "fact": facts.get(item["fact_id"])} for item in row["dropped"]],
        }
        for row in rows
    ]
