"""Console URLs for reviews (included by governance/urls.py)."""

from django.urls import URLPattern, path

from governance.views import reviews

app_name = "reviews"
urlpatterns: list[URLPattern] = [
    path("", reviews.queue, name="queue"),
    path("bulk", reviews.bulk, name="bulk"),
    path("<int:write_id>/decide", reviews.decide, name="decide"),
    path("<int:write_id>/undo", reviews.undo, name="undo"),
]
