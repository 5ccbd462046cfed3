"""Console URLs for memory-quality runs (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import evaluations, metrics

app_name = "quality"
urlpatterns: list[URLPattern] = [
    path("", evaluations.runs, name="runs"),
    path("runs/<int:run_id>/", evaluations.run, name="run"),
    path("why/", evaluations.why, name="why"),
    path("live/", metrics.live_index, name="live_index"),
    path("live/<slug:project>/", metrics.live, name="live"),
    path("live/<slug:project>/<slug:agent>/", metrics.live, name="live_agent"),
]
