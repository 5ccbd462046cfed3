"""Console URLs for the change feed (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import feed

app_name = "feed"
urlpatterns: list[URLPattern] = [
    path("", feed.feed_page, name="page"),
    path("webhooks/new", feed.webhook_create, name="webhook_create"),
    path("webhooks/<int:endpoint_id>/disable", feed.webhook_disable, name="webhook_disable"),
]
