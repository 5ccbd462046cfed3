"""Console URLs: one module per noun, each with its own namespace."""

from django.urls import include, path

from governance.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("reviews/", include("governance.views.urls_reviews")),
    path("facts/", include("governance.views.urls_facts")),
    path("retrievals/", include("governance.views.urls_retrievals")),
    path("agents/", include("governance.views.urls_policies")),
    path("history/", include("governance.views.urls_audit")),
    path("sessions/", include("governance.views.urls_sessions")),
    path("search/", include("governance.views.urls_search")),
    path("people/", include("governance.views.urls_people")),
    path("credentials/", include("governance.views.urls_credentials")),
    path("erasures/", include("governance.views.urls_erasures")),
    path("quality/", include("governance.views.urls_evaluations")),
    path("feed/", include("governance.views.urls_feed")),
]
