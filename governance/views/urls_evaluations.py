"""Console URLs for memory-quality runs (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import evaluations

app_name = "quality"
urlpatterns: list[URLPattern] = [
    path("", evaluations.runs, name="runs"),
    path("runs/<int:run_id>/", evaluations.run, name="run"),
    path("why/", evaluations.why, name="why"),
]
