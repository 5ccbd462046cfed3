"""Console URLs for facts (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import facts

app_name = "facts"
urlpatterns: list[URLPattern] = [
    path("", facts.index, name="index"),
    path("<int:fact_id>/", facts.detail, name="detail"),
    path("<int:fact_id>/withdraw", facts.withdraw, name="withdraw"),
    path("<int:fact_id>/verify", facts.verify, name="verify"),
    path("<int:fact_id>/authority", facts.authority, name="authority"),
]
