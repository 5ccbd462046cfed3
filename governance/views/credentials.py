"""Credentials in the console: agent API keys, personal access tokens, and who holds which role.

A new secret is shown exactly once, in the response to the POST that made it
(never stored in the session or a message), with ``Cache-Control: no-store``.
Revoking takes effect on the next call: authentication checks ``revoked_at``
and ``expires_at`` every time.

Who may do what, always by the role in the project of the object at hand:
agent keys and memberships need the admin role in the agent's or membership's
project; everyone revokes their own tokens (auditors included), and a project
admin may revoke any token of a member of their project. Creating a token
needs a role that changes something somewhere (auditors get theirs from an
operator with ``create_user_token``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST

from governance import access
from governance.models import Agent, AgentKey, Membership, PersonalAccessToken, Project
from governance.models.credentials import KeyScope
from governance.models.projects import Role
from governance.rules.supersession import PERSON_ONLY_SOURCES, SOURCE_TYPES, source_label
from governance.selectors import credentials as credential_selectors
from governance.services import agents as agent_service
from governance.services import credentials, memberships
from governance.services.writes import claimable_sources
from governance.views.base import (
    check,
    checked,
    console_view,
    get_checked,
    get_scoped,
    page_or_fragment,
    scoped,
)

KEY_ROLES = access.ADMIN_ROLES
MEMBER_ROLES = access.ADMIN_ROLES
# Creating a token needs a role that changes something in some project.
TOKEN_CREATE_ROLES = frozenset({Role.REVIEWER, Role.POLICY_EDITOR, Role.ADMIN})
# Revoking is checked against the token's owner (access.require_token_revoker).
TOKEN_REVOKE_ROLES = access.READ_ROLES


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        # Slugs repeat across projects: name the project too.
        return f"{obj.project.slug} / {obj.slug}"


class AgentKeyForm(forms.Form):
    agent = AgentChoiceField(queryset=Agent.objects.none(), empty_label=None)
    name = forms.CharField(required=False, max_length=200, label="Label")
    scopes = forms.MultipleChoiceField(
        choices=KeyScope.choices,
        initial=KeyScope.values,
        widget=forms.CheckboxSelectMultiple,
        label="What the key may do",
        error_messages={"required": "Choose at least one thing the key may do."},
    )

    def __init__(self, *args: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, AgentChoiceField)
        field.queryset = agents


class TokenForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, label="Label")
    days = forms.IntegerField(
        required=False,
        min_value=1,
        label="Valid for (days)",
        help_text="Leave empty for the default; longer than the maximum is shortened to it.",
    )


class GrantForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.AUDITOR)
    reason = forms.CharField(required=False, max_length=2000, label="Reason")

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"].strip()
        user = get_user_model()._default_manager.filter(username=username).first()
        if user is None:
            raise forms.ValidationError(
                "No user with this username: ask the platform operator to create one."
            )
        return user


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
    reason = forms.CharField(required=False, max_length=2000, label="Reason")


class RemoveForm(forms.Form):
    reason = forms.CharField(required=False, max_length=2000, label="Reason")


class RevokeForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True)


def _agents(request: HttpRequest, roles: frozenset[str] = access.READ_ROLES) -> Any:
    # Retired agents and archived projects cannot authenticate, so no new keys for them.
    return (
        Agent.objects.select_related("project")
        .filter(project_id__in=access.project_ids_with_role(request.user, roles))
        .filter(retired_at__isnull=True, project__archived_at__isnull=True)
        .order_by("project__slug", "slug")
    )


def _back_to_list(section: str = "") -> HttpResponseRedirect:
    """After a change, back to the credentials page (at ``section``), where its message shows."""
    return HttpResponseRedirect(reverse("credentials:list") + (f"#{section}" if section else ""))


def _page(
    request: HttpRequest,
    *,
    key_form: AgentKeyForm | None = None,
    token_form: TokenForm | None = None,
    grant_form: tuple[int, GrantForm] | None = None,
    new_secret: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    user = request.user
    admin_of = access.project_ids_with_role(user, access.ADMIN_ROLES)
    keys = (
        scoped(request, AgentKey.objects.select_related("agent__project", "created_by"), "agent__project")
        .order_by("revoked_at", "-created_at")
        .defer("digest")
    )
    tokens = list(credential_selectors.manageable_tokens(user))
    admin_projects = list(Project.objects.filter(pk__in=admin_of).order_by("slug"))
    grant_forms = {project.pk: GrantForm(prefix=f"grant-{project.pk}") for project in admin_projects}
    if grant_form is not None:
        grant_forms[grant_form[0]] = grant_form[1]
    context = {
        "keys": keys,
        "key_admin_projects": set(admin_of),
        "tokens": tokens,
        "others_tokens": any(token.user_id != user.pk for token in tokens),
        "can_manage_keys": bool(admin_of),
        "can_manage_tokens": access.can_anywhere(user, TOKEN_CREATE_ROLES),
        "key_form": key_form or AgentKeyForm(agents=_agents(request, KEY_ROLES)),
        "token_form": token_form or TokenForm(),
        "token_default_days": settings.ACCESS_TOKEN_DEFAULT_DAYS,
        "token_max_days": settings.ACCESS_TOKEN_MAX_DAYS,
        "member_projects": [(project, grant_forms[project.pk]) for project in admin_projects],
        "source_agents": [
            (agent, claimable_sources(agent)) for agent in _agents(request, access.ADMIN_ROLES)
        ],
        "agent_source_choices": [(s, source_label(s)) for s in SOURCE_TYPES if s not in PERSON_ONLY_SOURCES],
        "members": credential_selectors.members(admin_of),
        "role_choices": Role.choices,
        "new_secret": new_secret,
    }
    response = page_or_fragment(
        request, "governance/credentials/list.html", "keys_panel", context, status=status
    )
    if new_secret:
        # The secret must not survive in any cache or in the browser's history.
        add_never_cache_headers(response)
        response["Cache-Control"] = "no-store"
    return response


@console_view()
def key_list(request: HttpRequest) -> HttpResponse:
    return _page(request)


@console_view(write_roles=KEY_ROLES)
@require_POST
def key_create(request: HttpRequest) -> HttpResponse:
    # An agent outside the user's projects (or no such agent) is a 404 either way,
    # so the answer does not reveal which ids exist elsewhere (R1); a role in the
    # agent's project other than admin is a 403.
    access.require_anywhere(request.user, KEY_ROLES, action="create agent key")
    agent_id = request.POST.get("agent", "")
    if not agent_id.isdigit():
        raise Http404("No such agent.")
    agent = get_object_or_404(_agents(request), pk=int(agent_id))
    check(request, agent.project_id)
    form = AgentKeyForm(request.POST, agents=_agents(request, KEY_ROLES))
    if not form.is_valid():
        return _page(request, key_form=form, status=400)
    key, secret = credentials.create_agent_key(
        agent, name=form.cleaned_data["name"], created_by=request.user, scopes=form.cleaned_data["scopes"]
    )
    return _page(
        request,
        new_secret={
            "kind": "agent key",
            "owner": str(agent),
            "prefix": key.prefix,
            "secret": secret,
            "scopes": ", ".join(key.scopes),
        },
        status=201,
    )


@console_view(write_roles=KEY_ROLES)
@require_POST
def key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    key = get_checked(request, AgentKey.objects.select_related("agent__project"), "agent__project", pk=key_id)
    form = RevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Key {key.prefix}: give a reason to revoke it.")
    elif key.revoked_at is not None:
        messages.info(request, f"Key {key.prefix} was already revoked.")
    else:
        credentials.revoke_agent_key(key, reason=form.cleaned_data["reason"])
        messages.success(request, f"Key {key.prefix} of {key.agent} is revoked; its next call gets 401.")
    return _back_to_list()


@console_view(write_roles=TOKEN_CREATE_ROLES)
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    # A token is the user's own and carries only the roles they hold, project by project.
    access.require_anywhere(request.user, TOKEN_CREATE_ROLES, action="create token")
    checked(request)
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, token_form=form, status=400)
    token, secret = credentials.create_access_token(
        request.user, name=form.cleaned_data["name"], days=form.cleaned_data["days"]
    )
    return _page(
        request,
        new_secret={
            "kind": "personal access token",
            "owner": request.user.get_username(),
            "prefix": token.prefix,
            "secret": secret,
            "expires": token.expires_at.strftime("%Y-%m-%d %H:%M UTC"),
        },
        status=201,
    )


@console_view(write_roles=TOKEN_REVOKE_ROLES)
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(PersonalAccessToken.objects.select_related("user"), pk=token_id)
    access.require_token_revoker(request.user, token)
    checked(request)
    form = RevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Token {token.prefix}: give a reason to revoke it.")
    elif token.revoked_at is not None:
        messages.info(request, f"Token {token.prefix} was already revoked.")
    else:
        credentials.revoke_access_token(token, reason=form.cleaned_data["reason"])
        owner = "" if token.user_id == request.user.pk else f" of {token.user.get_username()}"
        messages.success(request, f"Token {token.prefix}{owner} is revoked; its next call gets 401.")
    return _back_to_list()


def _membership(request: HttpRequest, membership_id: int) -> Membership:
    return get_checked(
        request, Membership.objects.select_related("project", "user"), roles=MEMBER_ROLES, pk=membership_id
    )


@console_view(write_roles=MEMBER_ROLES)
@require_POST
def member_grant(request: HttpRequest, project: str) -> HttpResponse:
    obj = get_scoped(request, Project.objects.all(), "pk", slug=project)
    check(request, obj)
    form = GrantForm(request.POST, prefix=f"grant-{obj.pk}")
    if not form.is_valid():
        return _page(request, grant_form=(obj.pk, form), status=400)
    person, role = form.cleaned_data["username"], form.cleaned_data["role"]
    try:
        change = memberships.grant_role(obj, person, role, reason=form.cleaned_data["reason"])
    except memberships.MembershipError as exc:
        form.add_error(None, str(exc))
        return _page(request, grant_form=(obj.pk, form), status=409)
    label = Role(role).label.lower()
    if change.previous_role is None:
        messages.success(request, f"{person.get_username()} is now a member of {obj.slug}: {label}.")
    elif change.changed:
        messages.success(request, f"{person.get_username()} is now {label} in {obj.slug}.")
    else:
        messages.info(request, f"{person.get_username()} already was {label} in {obj.slug}.")
    return _back_to_list("members")


@console_view(write_roles=MEMBER_ROLES)
@require_POST
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    membership = _membership(request, membership_id)
    form = RoleForm(request.POST)
    who, where = membership.user.get_username(), membership.project.slug
    if not form.is_valid():
        messages.error(request, f"{who} in {where}: choose one of the roles.")
        return _back_to_list("members")
    role = form.cleaned_data["role"]
    try:
        change = memberships.grant_role(
            membership.project, membership.user, role, reason=form.cleaned_data["reason"]
        )
    except memberships.MembershipError as exc:
        messages.error(request, str(exc))
    else:
        if change.changed:
            messages.success(request, f"{who} is now {Role(role).label.lower()} in {where}.")
    return _back_to_list("members")


@console_view(write_roles=MEMBER_ROLES)
@require_POST
def member_remove(request: HttpRequest, membership_id: int) -> HttpResponse:
    membership = _membership(request, membership_id)
    form = RemoveForm(request.POST)
    form.is_valid()
    who, where = membership.user.get_username(), membership.project.slug
    try:
        memberships.revoke_membership(membership, reason=form.cleaned_data.get("reason", ""))
    except memberships.MembershipError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{who} is no longer a member of {where}.")
    return _back_to_list("members")


@console_view(write_roles=access.ADMIN_ROLES)
@require_POST
def agent_sources(request: HttpRequest, agent_id: int) -> HttpResponse:
    """Which source types an agent's keys may claim, and whether it syncs configuration (admins)."""
    agent = get_object_or_404(
        scoped(request, Agent.objects.select_related("project"), "project"), pk=agent_id
    )
    check(request, agent.project_id)
    chosen = [s for s in request.POST.getlist("sources") if s in SOURCE_TYPES]
    try:
        agent_service.set_source_claims(
            agent,
            allowed=chosen or [s for s in SOURCE_TYPES if s not in PERSON_ONLY_SOURCES],
            is_config_source=request.POST.get("config_source") == "on",
            reason=(request.POST.get("reason") or "").strip() or "Changed in the console",
            user=request.user,
        )
    except agent_service.SourceClaimError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Saved which sources {agent.slug} may claim.")
    return _back_to_list("agent-sources")
