from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance import access
from governance.selectors import home as home_selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    projects = access.projects_of(request.user)
    return render(request, "governance/home.html", {"overview": home_selectors.overview(projects)})
