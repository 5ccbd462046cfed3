"""Console URLs for retrievals (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import retrievals

app_name = "retrievals"
urlpatterns: list[URLPattern] = [
    path("", retrievals.log, name="log"),
    path("<int:event_id>/", retrievals.detail, name="detail"),
    # The external id comes last and may hold any character, slashes included.
    path("principals/<slug:project>/<path:external_id>/", retrievals.principal, name="principal"),
]
