"""Fixtures shared by the browser end-to-end tests: Debian's Chromium through Playwright, and a folder
for the screenshots they take ($FLYWHEEL_E2E_SCREENSHOTS or a fresh temp dir, printed at the end)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Browser, sync_playwright

from tests.asgi_server import serve_asgi

MANIFEST = Path(settings.BASE_DIR) / "frontend" / "dist" / ".vite" / "manifest.json"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    wanted = os.environ.get("FLYWHEEL_E2E_SCREENSHOTS")
    path = Path(wanted) if wanted else tmp_path_factory.mktemp("e2e-screens")
    path.mkdir(parents=True, exist_ok=True)
    yield path
    print(f"\ne2e screenshots in {path}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not MANIFEST.exists():
        pytest.fail(
            f"The frontend is not built ({MANIFEST} is missing): run `npm --prefix frontend run build`."
        )
    # The sync API keeps an event loop in this thread; the ORM calls of the fixtures are still sync.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def asgi_server(transactional_db) -> Iterator[str]:
    """The ASGI app under uvicorn on the test database, for page tests that set their data up
    through the services (the flywheel page)."""
    with serve_asgi() as url:
        yield url


from tests.e2e.journeys import People  # noqa: E402
from tests.e2e.live_stack import LiveStack, live_stack  # noqa: E402, F401  (the `make up` stack fixture)


@pytest.fixture
def people(browser: Browser, live_stack: LiveStack) -> Iterator[People]:  # noqa: F811
    """A signed-in page per demo user for the role journeys (tests/e2e/journeys.py)."""
    made = People(browser, live_stack)
    yield made
    for ctx in made.contexts:
        ctx.close()
