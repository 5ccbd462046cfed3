"""Django admin is the platform operator's tool, not the console.

Only superusers (platform operators) may enter it; ``is_staff`` alone is not
enough. Project roles never grant it, and being a superuser grants no role in
any project. What it may change, and how those changes are audited, is set in
``governance/admin.py``.
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest


class OperatorAdminSite(AdminSite):
    site_header = "Memory governance: platform administration"
    site_title = "Platform administration"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and getattr(user, "is_superuser", False))


class OperatorAdminConfig(AdminConfig):
    default_site = "memoryadmin.admin_site.OperatorAdminSite"
