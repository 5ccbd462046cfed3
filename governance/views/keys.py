"""Keys and tokens in the console: agent API keys and the user's own personal access tokens.

A new secret is shown exactly once, in the response to the POST that made it
(never stored in the session or a message), with ``Cache-Control: no-store``.
Revoking takes effect on the next call: authentication checks ``revoked_at``
every time. Agent keys need the admin role; tokens are the user's own, and
auditors stay read-only (issue 6: auditors change nothing).
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.views.decorators.http import require_POST
from django_htmx.middleware import HtmxDetails

from governance import access
from governance.models import Agent, AgentKey, PersonalAccessToken
from governance.models.projects import Role
from governance.services import credentials
from governance.views.base import console_view, get_scoped, scoped

KEY_ROLES = frozenset({Role.ADMIN})
# Everyone but the read-only auditor manages their own tokens.
TOKEN_ROLES = frozenset({Role.REVIEWER, Role.POLICY_EDITOR, Role.ADMIN})


class HtmxHttpRequest(HttpRequest):
    """What django-htmx's middleware adds, for the type checker."""

    htmx: HtmxDetails


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        # Slugs repeat across projects: name the project too.
        return f"{obj.project.slug} / {obj.slug}"


class AgentKeyForm(forms.Form):
    agent = AgentChoiceField(queryset=Agent.objects.none(), empty_label=None)
    name = forms.CharField(required=False, max_length=200, label="Label")

    def __init__(self, *args: Any, agents: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, AgentChoiceField)
        field.queryset = agents


class TokenForm(forms.Form):
    name = forms.CharField(required=False, max_length=200, label="Label")


class RevokeForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True)


def _user_id(request: HttpRequest) -> int:
    # console_view requires a signed-in user, so there is always a primary key.
    return cast(int, request.user.pk)


def _agents(request: HtmxHttpRequest) -> Any:
    # Retired agents and archived projects cannot authenticate, so no new keys for them.
    return (
        scoped(request, Agent.objects.select_related("project"))
        .filter(retired_at__isnull=True, project__archived_at__isnull=True)
        .order_by("project__slug", "slug")
    )


def _page(
    request: HtmxHttpRequest,
    *,
    key_form: AgentKeyForm | None = None,
    token_form: TokenForm | None = None,
    new_secret: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    roles = access.roles_of(request.user)
    agents = _agents(request)
    keys = (
        scoped(request, AgentKey.objects.select_related("agent__project", "created_by"), "agent__project")
        .order_by("revoked_at", "-created_at")
        .defer("digest")
    )
    tokens = PersonalAccessToken.objects.filter(user_id=_user_id(request)).order_by(
        "revoked_at", "-created_at"
    )
    context = {
        "keys": keys,
        "tokens": tokens.defer("digest"),
        "can_manage_keys": bool(roles & KEY_ROLES),
        "can_manage_tokens": bool(roles & TOKEN_ROLES),
        "key_form": key_form or AgentKeyForm(agents=agents),
        "token_form": token_form or TokenForm(),
        "new_secret": new_secret,
    }
    template = "governance/keys/list.html"
    if request.htmx and not request.htmx.history_restore_request:
        template += "#keys_panel"
    response = render(request, template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    if new_secret:
        # The secret must not survive in any cache or in the browser's history.
        add_never_cache_headers(response)
        response["Cache-Control"] = "no-store"
    return response


@console_view()
def key_list(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request)


@console_view(write_roles=KEY_ROLES)
@require_POST
def key_create(request: HtmxHttpRequest) -> HttpResponse:
    # An agent outside the user's projects (or no such agent) is a 404 either way,
    # so the answer does not reveal which ids exist elsewhere (R1).
    agent_id = request.POST.get("agent", "")
    if not agent_id.isdigit():
        raise Http404("No such agent.")
    agent = get_object_or_404(_agents(request), pk=int(agent_id))
    form = AgentKeyForm(request.POST, agents=_agents(request))
    if not form.is_valid():
        return _page(request, key_form=form, status=400)
    key, secret = credentials.create_agent_key(agent, name=form.cleaned_data["name"], created_by=request.user)
    return _page(
        request,
        new_secret={"kind": "agent key", "owner": str(agent), "prefix": key.prefix, "secret": secret},
        status=201,
    )


@console_view(write_roles=KEY_ROLES)
@require_POST
def key_revoke(request: HtmxHttpRequest, key_id: int) -> HttpResponse:
    key = get_scoped(request, AgentKey.objects.select_related("agent__project"), "agent__project", pk=key_id)
    form = RevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Key {key.prefix}: give a reason to revoke it.")
    elif key.revoked_at is not None:
        messages.info(request, f"Key {key.prefix} was already revoked.")
    else:
        credentials.revoke_agent_key(key, reason=form.cleaned_data["reason"])
        messages.success(request, f"Key {key.prefix} of {key.agent} is revoked; its next call gets 401.")
    return HttpResponseRedirect(reverse("keys:list"))


@console_view(write_roles=TOKEN_ROLES)
@require_POST
def token_create(request: HtmxHttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, token_form=form, status=400)
    token, secret = credentials.create_access_token(request.user, name=form.cleaned_data["name"])
    return _page(
        request,
        new_secret={
            "kind": "personal access token",
            "owner": request.user.get_username(),
            "prefix": token.prefix,
            "secret": secret,
        },
        status=201,
    )


@console_view(write_roles=TOKEN_ROLES)
@require_POST
def token_revoke(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
    # Only the user's own tokens: anyone else's id is a 404, not a 403.
    token = get_object_or_404(PersonalAccessToken, pk=token_id, user_id=_user_id(request))
    form = RevokeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Token {token.prefix}: give a reason to revoke it.")
    elif token.revoked_at is not None:
        messages.info(request, f"Token {token.prefix} was already revoked.")
    else:
        credentials.revoke_access_token(token, reason=form.cleaned_data["reason"])
        messages.success(request, f"Token {token.prefix} is revoked; its next call gets 401.")
    return HttpResponseRedirect(reverse("keys:list"))
