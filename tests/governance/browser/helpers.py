"""What the browser flows share: signing in through the real login form."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from tests.personas import PASSWORD


def log_in(page: Page, live_server: Any, username: str, next_url: str = "/") -> None:
    page.goto(f"{live_server.url}/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
