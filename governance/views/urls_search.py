"""Console URL of the global search (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import search

app_name = "search"
urlpatterns: list[URLPattern] = [path("", search.results, name="results")]
