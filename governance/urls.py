from django.urls import path

from governance.views import home

urlpatterns = [
    path("", home.home, name="home"),
]
