"""Console URLs for keys (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import keys

app_name = "keys"
urlpatterns: list[URLPattern] = [
    path("", keys.key_list, name="list"),
    path("agent-keys/new", keys.key_create, name="key_create"),
    path("agent-keys/<int:key_id>/revoke", keys.key_revoke, name="key_revoke"),
    path("agents/<int:agent_id>/sources", keys.agent_sources, name="agent_sources"),
    path("tokens/new", keys.token_create, name="token_create"),
    path("tokens/<int:token_id>/revoke", keys.token_revoke, name="token_revoke"),
    path("members/<slug:project>/grant", keys.member_grant, name="member_grant"),
    path("members/<int:membership_id>/role", keys.member_role, name="member_role"),
    path("members/<int:membership_id>/remove", keys.member_remove, name="member_remove"),
]
