"""Console URLs for audit (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import audit

app_name = "audit"
urlpatterns: list[URLPattern] = [
    path("", audit.history, name="history"),
    path("export", audit.export, name="export"),
    path("verify", audit.verify, name="verify"),
    path("verify/<uuid:verification_id>", audit.verification, name="verification"),
    path("facts/<int:fact_id>/", audit.fact_timeline, name="fact_timeline"),
]
