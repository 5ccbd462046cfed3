"""Console URLs for forgetting a person (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import erasures

app_name = "erasures"
urlpatterns: list[URLPattern] = [
    path("people/<int:principal_id>/", erasures.confirm, name="confirm"),
    path("people/<int:principal_id>/forget/", erasures.forget, name="forget"),
    path("<uuid:erasure_id>/", erasures.job, name="job"),
    path("<uuid:erasure_id>/receipt.json", erasures.receipt_json, name="receipt-json"),
]
