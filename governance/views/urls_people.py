"""Console URL of the people directory (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import people

app_name = "people"
urlpatterns: list[URLPattern] = [path("", people.directory, name="directory")]
