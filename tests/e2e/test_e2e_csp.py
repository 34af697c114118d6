"""Issue 30, finding 10 (CSP): no Content-Security-Policy was sent, so an injected inline script ran.
Now every response carries one that allows scripts from our origin only — and every page, the API
docs and the admin still work under it in Chromium (no violation reported, no script error)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.security]

PAGES = ["/", "/workspace/", "/review/", "/runs/", "/runs/new/", "/pools/", "/flywheel/", "/fleet/",
         "/api/docs/", "/api/redoc/", "/admin/"]  # fmt: skip


def test_pages_work_under_a_policy_that_refuses_inline_script(
    browser: Browser, asgi_server: str, users
) -> None:
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    try:
        page.goto(f"{asgi_server}/login/")
        page.get_by_label("Username").fill("adm")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        for path in PAGES:
            response = page.goto(f"{asgi_server}{path}")
            assert response is not None and response.status == 200, path
            assert "script-src 'self'" in response.headers["content-security-policy"], path
            page.wait_for_load_state("networkidle")
        # ReDoc asks Google Fonts for its typeface and cdn.redoc.ly for its "API docs by Redocly" logo:
        # blocked on purpose (nothing from a CDN; system fonts, no logo). Anything else blocked would
        # be a page broken by the policy.
        third_party = ("fonts.googleapis.com", "cdn.redoc.ly")
        assert [p for p in problems if not any(host in p for host in third_party)] == [], problems
        page.goto(f"{asgi_server}/api/docs/")
        page.wait_for_selector(".swagger-ui .info", timeout=15_000)  # Swagger UI ran (its script is a file)
        # An injected inline script does not run.
        page.goto(f"{asgi_server}/")
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
            " document.body.append(s); }"
        )
        assert page.evaluate("() => window.injected") is None
    finally:
        context.close()
