"""The `live_stack` fixture itself: `make up`'s stack answers every demo role's login in Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.live_stack import LiveStack

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("username", ["annotator", "reviewer", "researcher", "admin"])
def test_every_demo_login_reaches_its_home(live_stack: LiveStack, browser: Browser, username: str) -> None:
    page = browser.new_page()
    live_stack.login(page, username)
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    assert live_stack.api(username).get("/api/me/").json()["username"] == username
    page.close()
