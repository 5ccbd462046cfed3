"""Console URLs for credentials: agent keys, access tokens, members (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import credentials

app_name = "credentials"
urlpatterns: list[URLPattern] = [
    path("", credentials.key_list, name="list"),
    path("agent-keys/new", credentials.key_create, name="key_create"),
    path("agent-keys/<int:key_id>/revoke", credentials.key_revoke, name="key_revoke"),
    path("agents/<int:agent_id>/sources", credentials.agent_sources, name="agent_sources"),
    path("tokens/new", credentials.token_create, name="token_create"),
    path("tokens/<int:token_id>/revoke", credentials.token_revoke, name="token_revoke"),
    path("members/<slug:project>/grant", credentials.member_grant, name="member_grant"),
    path("members/<int:membership_id>/role", credentials.member_role, name="member_role"),
    path("members/<int:membership_id>/remove", credentials.member_remove, name="member_remove"),
]
