"""The Content-Security-Policy breaks nothing: htmx, the console's scripts and the API docs
work in a real browser, and the browser reports no violation (issue 12 item 4)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from governance.models import AgentKey
from tests.personas import PASSWORD, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records securitypolicyviolation events before any page script runs.
WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def watch(page: Page) -> list[str]:
    messages: list[str] = []
    page.on(
        "console",
        lambda m: messages.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.add_init_script(WATCH)
    return messages


def violations(page: Page) -> Any:
    return page.evaluate("() => window.__cspViolations")


def test_the_api_docs_render_under_the_policy(page: Page, live_server) -> None:
    console = watch(page)
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Memory governance API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    assert violations(page) == [] and console == []


def test_htmx_key_creation_works_under_the_policy(page: Page, live_server, project, support_bot) -> None:
    make_user("ada", "admin", project)
    console = watch(page)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/credentials/")
    page.get_by_label("Write: propose memory writes and end sessions").uncheck()
    page.get_by_label("Forget: withdraw facts on the person's request").uncheck()
    with page.expect_response(lambda r: r.url.endswith("/credentials/agent-keys/new")) as created:
        page.get_by_role("button", name="Create agent key").click()
    # Swapped in by htmx (a fragment, not a full page), so htmx ran under the policy.
    assert created.value.request.headers.get("hx-request") == "true"
    expect(page.locator("[data-secret]")).to_be_visible()
    expect(page.get_by_text("Scopes: read.")).to_be_visible()
    assert AgentKey.objects.filter(agent=support_bot.agent, scopes=["read"]).count() == 1
    assert violations(page) == [] and console == []
