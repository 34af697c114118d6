"""An OSWorld Chrome task through the platform as a person uses it, on `make up`'s stack: the admin
imports our own Chrome task (its pages in the stack's OSWorld mirror), assigns it; the annotator
starts it in the workspace (Chromium in the session's sandbox, tabs opened over DevTools by the
set-up), does it by take-over and sees the evaluator's score at Finish."""

from __future__ import annotations

import io
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageChops
from playwright.sync_api import Browser, Page, expect

from tests.e2e.live_stack import LiveStack
from workers.envs.osworld import solutions

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in ("chromium", "socat", "wmctrl")),
        reason="make osworld-apps DOMAINS=chrome",
    ),
]

TASK_ID = "fw-chrome-201-open-tab"


@pytest.fixture
def annotator(browser: Browser, live_stack: LiveStack) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1440, "height": 960})
    page = ctx.new_page()
    live_stack.login(page, "annotator")
    yield page
    ctx.close()


def _live_screen(page: Page) -> Image.Image:
    png = page.locator("[data-testid=live-screen] canvas").screenshot()
    return Image.open(io.BytesIO(png)).convert("L")


def _wait_for_change(page: Page, before: Image.Image, timeout: float = 60) -> None:
    """Until the live desktop differs from `before` in more than a caret's worth of pixels."""
    deadline = time.monotonic() + timeout
    while True:
        diff = ImageChops.difference(before, _live_screen(page)).point(lambda v: 255 if v > 40 else 0)
        changed = diff.histogram()[255]
        if changed > 1500:
            return
        assert time.monotonic() < deadline, f"the desktop did not change ({changed} pixels) in {timeout} s"
        time.sleep(0.3)


def _screen_point(page: Page, screen: tuple[int, int], x: float, y: float) -> tuple[float, float]:
    box = page.get_by_test_id("screen").bounding_box()
    assert box is not None and box["width"] > 0
    return box["x"] + (x + 0.5) * box["width"] / screen[0], box["y"] + (y + 0.5) * box["height"] / screen[1]


def test_annotator_does_a_chrome_task_and_sees_its_score(
    live_stack: LiveStack, annotator: Page, shots: Path, tmp_path: Path
) -> None:
    # The task's pages, where `manage.py osworld_mirror` would have put them.
    mirror = Path(live_stack.env["OSWORLD_MIRROR_DIR"]) / "files.flywheel.test" / "chrome"
    mirror.mkdir(parents=True)
    solutions.BUNDLES[TASK_ID](mirror)
    task_file = tmp_path / f"{TASK_ID}.json"
    task_file.write_text(json.dumps(solutions.load(TASK_ID)))

    with live_stack.api("admin") as api:
        with task_file.open("rb") as fh:
            r = api.post(
                "/api/tasks/import/",
                data={"pool": "e2e-chrome", "create_pool": "true", "format": "osworld"},
                files={"file": (task_file.name, fh, "application/json")},
            )
        assert r.status_code == 201, r.text
        assert r.json()["unsupported"] == 0, r.text
        pool = next(
            p for p in api.get("/api/pools/?page_size=200").json()["results"] if p["name"] == "e2e-chrome"
        )
        r = api.post("/api/annotation/assignments/", json={"pool": pool["id"], "users": ["annotator"]})
        assert r.status_code in (200, 201), r.text
    with live_stack.api("annotator") as api:
        rows = api.get("/api/annotation/assignments/").json()
    task_pk = next(int(a["task"]) for a in rows if a["task_external_id"] == TASK_ID)

    page = annotator
    page.goto(f"{live_stack.base_url}/workspace/")
    page.get_by_test_id(f"start-{task_pk}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=180_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with live_stack.api("annotator") as api:
        state = api.get(f"/api/annotation/sessions/{sid}/").json()
    screen = (state["observation"]["width"], state["observation"]["height"])
    expect(page.locator("[data-testid=live-screen] canvas")).to_be_visible(timeout=60_000)
    time.sleep(3)  # Chromium paints its tabs
    page.screenshot(path=str(shots / "chrome-workspace.png"))

    # Take-over: a new tab with the page the instruction names.
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "takeover")
    expect(page.get_by_test_id("overlay").locator(".ov-cand").first).to_be_hidden()  # not over the desktop
    # Each key waits for the desktop to show its effect (a loaded machine answers in seconds, and a
    # key sent before the new tab exists lands in the old one).
    page.mouse.click(*_screen_point(page, screen, screen[0] // 2, screen[1] // 2))
    before = _live_screen(page)
    page.keyboard.press("Control+t")
    _wait_for_change(page, before)  # the new tab
    time.sleep(1)
    before = _live_screen(page)
    page.keyboard.press("Control+l")
    _wait_for_change(page, before)  # the address bar focused, its text selected (a key before is lost)
    page.keyboard.type("file:///home/user/pages/todo.html", delay=20)
    before = _live_screen(page)
    page.keyboard.press("Enter")
    _wait_for_change(page, before)  # the page loaded, the address bar's suggestions gone
    time.sleep(1)
    page.screenshot(path=str(shots / "chrome-takeover.png"))
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "proposal")
    expect(page.get_by_test_id("banner")).to_contain_text("from your take-over", timeout=60_000)

    page.get_by_role("button", name="Finish with answer").click()
    page.locator("#ws-outcome-thought").fill("The to-do page is open in a new tab.")
    page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    expect(page.get_by_test_id("done")).to_be_visible(timeout=180_000)
    result = page.get_by_test_id("result")
    expect(result).to_be_visible(timeout=180_000)
    expect(result).to_contain_text("final reward")
    page.screenshot(path=str(shots / "chrome-result.png"))
    assert float(result.get_attribute("data-reward") or "nan") == 1.0, result.inner_text()
