"""Issue 30's web doors walked in Chromium as each role on `make up`'s stack (`live_stack`: the real
web server with DEBUG off, its own SECRET_KEY, PostgreSQL, Redis and policy server): anonymous gets the
login page; an annotator, a reviewer and a researcher get the 403 page (never a 500) on pages and APIs
that are not theirs; a researcher cannot name a platform-owned server as a run's endpoint (the launch
form shows why); a missing page or API is the project's 404 with no debug information. The 500 page:
a failing view under uvicorn with DEBUG off (no view of the stack fails on purpose).
Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS (or a temp dir, printed at the end)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from demo.setup import DEMO_MINIWOB_POOL
from tests.e2e.journeys import JOURNEY_MARKS, VIEWPORT, People
from tests.e2e.live_stack import LiveStack

pytestmark = [*JOURNEY_MARKS, pytest.mark.security]

# Who may open each page (the navigation each role sees, tests/e2e/test_e2e_roles.py).
PAGES = {
    "/workspace/": {"annotator", "admin"},
    "/review/": {"reviewer", "admin"},
    "/runs/": {"researcher", "admin"},
    "/runs/new/": {"researcher", "admin"},
    "/pools/": {"researcher", "admin"},
    "/flywheel/": {"researcher", "admin"},
    "/fleet/": {"researcher", "admin"},
}
# API doors of other roles: (method, path) → the roles it answers; everyone else gets 403.
APIS = {
    ("GET", "/api/rl/runs/"): {"researcher", "admin"},
    ("POST", "/api/flywheel/promote/"): {"admin"},  # promotion stays admin-only (finding 2)
    ("POST", "/api/checkpoints/1/promote/"): {"admin"},
    ("DELETE", "/api/auth/tokens/1/"): {"admin"},  # revoking someone else's tokens
}
ROLES = ("annotator", "reviewer", "researcher", "admin")
# What Django's debug pages show and the project's pages never do.
LEAKS = ("Traceback", "URLconf", "SECRET_KEY", "DATABASES", "settings.py", "DEBUG = True", "Request Method")


def _api(page: Page, base: str, method: str, path: str, data: str | None = None) -> tuple[int, str]:
    """`method path` from the page's own session (its cookies and CSRF token), as the page's scripts
    would send it."""
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    headers = {"X-CSRFToken": cookies.get("csrftoken", ""), "Content-Type": "application/json"}
    body = (data or "{}").encode()  # bytes: sent as they are (Playwright parses a str body as JSON)
    response = page.request.fetch(f"{base}{path}", method=method, headers=headers, data=body)
    return response.status, response.text()


def _no_leaks(page: Page) -> None:
    html = page.content()
    assert not [leak for leak in LEAKS if leak in html], [leak for leak in LEAKS if leak in html]


def test_each_role_meets_only_its_own_doors(browser: Browser, live_stack: LiveStack, people: People,
                                            shots: Path) -> None:  # fmt: skip
    base = live_stack.base_url

    # anonymous: every page is the login form, every API a 401/403 in JSON, never a 500
    anonymous: BrowserContext = browser.new_context(viewport=VIEWPORT)
    page = anonymous.new_page()
    for path in ["/", *PAGES]:
        response = page.goto(f"{base}{path}")
        assert response is not None and response.status == 200, path
        expect(page).to_have_url(f"{base}/login/?next={path}")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    page.screenshot(path=str(shots / "doors-anonymous-login.png"), full_page=True)
    page.goto(f"{base}/admin/")
    expect(page).to_have_url(f"{base}/admin/login/?next=/admin/")
    for (method, path), _roles in APIS.items():
        status, body = _api(page, base, method, path)
        assert status in (401, 403) and "detail" in json.loads(body), (method, path, status, body[:300])
    # deeply nested JSON to the sign-in endpoint: 400 with the reason (finding 7), not a RecursionError
    status, body = _api(page, base, "POST", "/api/auth/token/", data="[" * 1000 + "]" * 1000)
    assert status == 400 and "nested deeper than" in body, (status, body[:300])
    anonymous.close()

    for role in ROLES:
        page = people.page(role)
        for path, allowed in PAGES.items():
            response = page.goto(f"{base}{path}")
            assert response is not None, path
            if role in allowed:
                assert response.status == 200, (role, path, response.status)
                continue
            assert response.status == 403, (role, path, response.status)
            expect(page.get_by_role("heading", name="You don't have access to this page")).to_be_visible()
            _no_leaks(page)
            if path == "/runs/":
                page.screenshot(path=str(shots / f"doors-{role}-forbidden-runs.png"), full_page=True)
            if path == "/workspace/":
                page.screenshot(path=str(shots / f"doors-{role}-forbidden-workspace.png"), full_page=True)
        for (method, path), allowed in APIS.items():
            if role in allowed:
                continue  # not exercised: promoting or revoking for real is not this test's business
            status, body = _api(page, base, method, path)
            assert status == 403 and "detail" in json.loads(body), (role, method, path, status, body[:300])
        if role != "admin":  # Django's admin: its own sign-in page for a user who is not staff
            response = page.goto(f"{base}/admin/")
            assert response is not None and response.status == 200
            expect(page).to_have_url(f"{base}/admin/login/?next=/admin/")
            expect(page.locator("body")).to_contain_text("not authorized to access this page")
        else:
            response = page.goto(f"{base}/admin/")
            assert response is not None and response.status == 200
            expect(page.locator("#site-name")).to_be_visible()
        # a page or API that does not exist: the project's 404, JSON under /api/, nothing of Django's
        response = page.goto(f"{base}/no-such-page/")
        assert response is not None and response.status == 404
        expect(page.locator("body")).to_contain_text("There is no page here")
        _no_leaks(page)
        if role == "annotator":
            page.screenshot(path=str(shots / "doors-404.png"), full_page=True)
        status, body = _api(page, base, "GET", "/api/no-such-endpoint/")
        assert (status, json.loads(body)) == (404, {"detail": "Not found."})
    assert all(not errors for errors in people.errors.values()), people.errors


def test_a_researcher_cannot_name_a_platform_server_as_a_run_endpoint(
    live_stack: LiveStack, people: People, shots: Path
) -> None:
    """Finding 2: a run's endpoints get every trained version pushed with the run's key; naming the
    annotation model's server (or the web server itself) is refused at create, and the form says why."""
    base = live_stack.base_url
    page = people.page("researcher")
    with live_stack.api("researcher") as api:
        before = api.get("/api/rl/runs/").json()
    owned = [
        ("annotation-model", live_stack.env["POLICY_BASE_URL"], "the annotation model's policy server"),
        ("web-server", f"{base}/v1", "this platform's web server"),
    ]
    for slug, url, reason in owned:
        page.goto(f"{base}/runs/new/")
        expect(page.locator("html")).to_have_attribute("data-bundle", "ready")
        page.get_by_label("Preset", exact=True).select_option("grpo-dart")
        pool = page.get_by_label("Task pool", exact=True)
        pool.select_option(
            pool.locator("option", has_text=f"{DEMO_MINIWOB_POOL} (").first.get_attribute("value")
        )
        page.get_by_label("Name", exact=True).fill("points at a platform server")
        page.get_by_label("Policy endpoints (external servers)", exact=True).fill(url)
        page.get_by_test_id("field-launch").uncheck()
        page.get_by_test_id("launch-submit").click()
        error = page.get_by_test_id("error-serving.endpoints")
        expect(error).to_contain_text(f"{url} is {reason}", timeout=30_000)
        expect(page).to_have_url(f"{base}/runs/new/")
        page.evaluate("() => window.scrollTo(0, 0)")  # a full-page shot of a scrolled page repeats the header
        page.screenshot(path=str(shots / f"doors-researcher-endpoint-{slug}.png"), full_page=True)
    with live_stack.api("researcher") as api:
        after = api.get("/api/rl/runs/").json()
    assert after == before  # nothing was created
    assert not people.errors["researcher"], people.errors


def test_a_failing_view_shows_the_projects_500_page(browser: Browser, transactional_db, shots: Path) -> None:
    """The 500 page in Chromium: a view that raises, under uvicorn with DEBUG off (the test settings),
    shows the project's page and nothing of the error (its message holds a fake key)."""
    from tests.asgi_server import serve_asgi

    with serve_asgi({"DJANGO_SETTINGS_MODULE": "tests.security.settings_failing"}) as url:
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        response = page.goto(f"{url}/boom/")
        assert response is not None and response.status == 500
        expect(page.locator("body")).to_contain_text("Something went wrong on our side")
        _no_leaks(page)
        assert "sk-test-123" not in page.content()
        page.screenshot(path=str(shots / "doors-500.png"), full_page=True)
        api = page.request.get(f"{url}/api/boom/")
        assert (api.status, api.json()) == (500, {"detail": "Server error."})
        context.close()
