"""Console URLs for sessions (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import sessions

app_name = "sessions"
urlpatterns: list[URLPattern] = [
    path("", sessions.index, name="index"),
    path("<int:session_id>/", sessions.detail, name="detail"),
]
