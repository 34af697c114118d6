"""What the role journeys (tests/e2e/test_e2e_*_journey.py) share: a signed-in page per user, the
session state through the API, waiting for the model's candidates, where a screen pixel is on the
page, the screen-area checks, and the MiniWoB++ annotation and review steps the journeys repeat.

The journeys run against `make up`'s stack (`live_stack`): the real web server, Celery workers, env
host (Xvfb desktop, MiniWoB++), VNC proxy and policy server. The demo model may be untrained (random
candidates): nothing depends on what it proposes, only on what the page does with it. Assertions are
on what the user sees (and what the API stores). Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS (or a
temp dir).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.e2e.live_stack import LiveStack

# A journey is minutes long, and its first test also waits for `make up` (minutes on a loaded machine).
JOURNEY_MARKS = [pytest.mark.e2e, pytest.mark.timeout(900)]

VIEWPORT = {"width": 1440, "height": 960}
# Left clicks and hovers anywhere on the demo desktop only focus or select: safe to accept from a
# random model. Other kinds (keys, typing, finishing) could end or derail the episode.
HARMLESS = {"click", "hover"}


class People:
    """A signed-in page per user, each in its own browser context (own cookies), with the page
    errors it saw; everything is closed at the end."""

    def __init__(self, browser: Browser, stack: LiveStack) -> None:
        self.browser, self.stack = browser, stack
        self.contexts: list[BrowserContext] = []
        self.errors: dict[str, list[str]] = {}

    def page(self, user: str) -> Page:
        ctx = self.browser.new_context(viewport=VIEWPORT)
        self.contexts.append(ctx)
        page = ctx.new_page()
        errors = self.errors.setdefault(user, [])
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        self.stack.login(page, user)
        return page


def policy_ready(stack: LiveStack, timeout: float = 240) -> None:
    """Wait until the stack's policy server answers (it loads its model after `make up` returns);
    a proposal asked before that fails, which the workspace shows, but this journey wants them."""
    base = stack.env.get("POLICY_BASE_URL", "").rstrip("/")
    if not base:
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            # /health is the one route open without the server's key; it answers once the model loaded
            if httpx.get(f"{base.removesuffix('/v1')}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, (
            f"the policy server did not answer in {timeout} s\n{stack.log('policy')}"
        )
        time.sleep(1)


def task_id(stack: LiveStack, external_id: str) -> int:
    """The id of the annotator's assigned demo task `external_id` (its Start button's test id)."""
    with stack.api("annotator") as api:
        rows = api.get("/api/annotation/assignments/").json()
    return next(int(a["task"]) for a in rows if a["task_external_id"] == external_id)


def session_state(stack: LiveStack, user: str, sid: int) -> dict[str, Any]:
    with stack.api(user) as api:
        r = api.get(f"/api/annotation/sessions/{sid}/")
        r.raise_for_status()
        return r.json()


def wait_candidates(stack: LiveStack, user: str, sid: int, page: Page) -> dict[str, Any]:
    """The state once the model's candidates for the current screen are in (shown on the page)."""
    deadline = time.monotonic() + 120
    while True:
        state = session_state(stack, user, sid)
        c = state["candidates"]
        if c["status"] in ("ready", "failed") and c["obs_version"] == state["observation"]["obs_version"]:
            break
        assert time.monotonic() < deadline, f"no candidates in 120 s: {c}\n{stack.log('worker-default')}"
        time.sleep(0.5)
    if c["status"] == "ready":
        expect(page.get_by_test_id("candidates").locator(".ws-cand")).to_have_count(
            len(c["items"]), timeout=30_000
        )
    return state


def harmless_candidate(state: dict[str, Any]) -> int | None:
    """A candidate that is safe to accept on the demo desktop / page, or None."""
    for c in state["candidates"]["items"]:
        actions = c["screen_actions"]
        if c["parse_error"] or c.get("clamped") or c.get("error") or not actions:
            continue
        if all(a["kind"] in HARMLESS for a in actions):
            return int(c["index"])
    return None


def screen_point(page: Page, screen: tuple[int, int], x: float, y: float) -> tuple[float, float]:
    """Where screen pixel (x, y) is on the page: the stage holds the screen exactly in both modes."""
    box = page.get_by_test_id("screen").bounding_box()
    assert box is not None and box["width"] > 0
    return box["x"] + (x + 0.5) * box["width"] / screen[0], box["y"] + (y + 0.5) * box["height"] / screen[1]


def box_of(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not displayed"
    return box


EDGE_ROOM_PX = 22  # screen.ts: room around the screen for markers at its edges
BOTTOM_GAP_PX = 12  # screen.ts: gap between the screen area and the window's bottom


def assert_screen_as_large_as_the_window_allows(page: Page, screen: tuple[int, int]) -> dict[str, float]:
    """The stage (live canvas or screenshot) keeps the screen's aspect ratio, lies inside the screen
    area and the window, and is as large as they allow: it reaches either the area's sides or the
    window's bottom (less the edge room for markers). Returns the stage's box."""
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(300)  # a resize is laid out on the next frame
    stage = box_of(page, "[data-testid=screen]")
    area = box_of(page, ".ws-screen")
    viewport = page.viewport_size
    assert viewport is not None
    assert abs(stage["width"] / stage["height"] - screen[0] / screen[1]) < 0.01, (stage, screen)
    assert stage["x"] >= area["x"] and stage["y"] >= area["y"], (stage, area)
    assert stage["x"] + stage["width"] <= area["x"] + area["width"] + 1, (stage, area)
    assert stage["y"] + stage["height"] <= area["y"] + area["height"] + 1, (stage, area)
    bottom = stage["y"] + stage["height"]
    assert bottom <= viewport["height"], ("the screen runs past the window's bottom", stage, viewport)
    wide = stage["width"] >= area["width"] - 2 * EDGE_ROOM_PX - 4
    tall = bottom >= viewport["height"] - BOTTOM_GAP_PX - EDGE_ROOM_PX - 4
    assert wide or tall, ("room left on both axes", stage, area, viewport)
    # no empty band: the area is no taller than the stage and its edge room need
    assert area["height"] <= stage["height"] + 2 * EDGE_ROOM_PX + 4 or tall, (stage, area)
    return stage


def assert_live_canvas_fills_the_screen_area(
    page: Page, shots: Path, name: str, screen: tuple[int, int]
) -> None:
    """The screenshot-size check: the live noVNC canvas is what the screen area shows, the overlay
    lies exactly on it, and it is as large as the window allows (no static image above it, nothing
    pushed down)."""
    stage = assert_screen_as_large_as_the_window_allows(page, screen)
    canvas = box_of(page, "[data-testid=live-screen] canvas")
    overlay = box_of(page, "[data-testid=overlay]")
    for key in ("x", "y", "width", "height"):
        assert abs(canvas[key] - stage[key]) <= 2, (key, canvas, stage)
        assert abs(overlay[key] - stage[key]) <= 2, (key, overlay, stage)
    expect(page.get_by_test_id("screenshot")).to_be_hidden()  # the static image is not drawn over it
    expect(page.get_by_test_id("record-pause")).to_be_hidden()  # nothing records: no Pause button
    # What the screen area shows has the canvas's size (the screenshot a user would take of it).
    png = page.screenshot(path=str(shots / f"{name}.png"))
    assert len(png) > 10_000


def session_steps(stack: LiveStack, user: str, sid: int) -> list[dict[str, Any]]:
    return session_state(stack, user, sid)["steps"]


def annotate_miniwob(stack: LiveStack, page: Page, task: str, shots: Path) -> tuple[int, int, str]:
    """The annotator works a MiniWoB++ episode in the browser: candidate 1 (the model's greedy answer
    when it can run here; only executable candidates are shown, so there may be just one) edited
    into a click in the middle of the page, then Finish. Returns (session, trajectory, the edited
    step's label)."""
    page.goto(f"{stack.base_url}/workspace/")
    page.get_by_test_id(f"start-{task_id(stack, task)}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = wait_candidates(stack, "annotator", sid, page)
    assert state["candidates"]["status"] == "ready" and len(state["candidates"]["items"]) >= 1, state[
        "candidates"
    ]
    page.get_by_test_id("candidate-0").get_by_role("button", name="Edit").click()
    page.locator("#ws-thought").fill("The page has one thing to click; aim at its middle.")
    convention = state["candidates"]["items"][0]["convention"]
    w, h = state["observation"]["width"], state["observation"]["height"]
    point = f"({w // 2},{h // 2})" if convention == "screen" else "(500,500)"
    page.locator("#ws-action").fill(f"click(start_box='{point}')")
    page.locator("#ws-action").press("Enter")
    label = "edited 1"
    expect(page.get_by_test_id("step-0")).to_contain_text(label, timeout=60_000)
    page.screenshot(path=str(shots / "review-workspace-edited.png"))
    if not session_state(stack, "annotator", sid)["observation"]["env_done"]:
        page.get_by_role("button", name="Finish with answer").click()
        page.locator("#ws-outcome-thought").fill("Done as far as I can tell.")
        page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    else:
        page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("done")).to_be_visible(timeout=120_000)
    expect(page.get_by_test_id("result")).to_contain_text("final reward")
    return sid, int(session_state(stack, "annotator", sid)["trajectory_id"]), label


def review(
    page: Page, stack: LiveStack, tid: int, verdicts: dict[int, tuple[str, str]], overall: str
) -> None:
    """Open /review/?t=<tid> as the page's own link, claim it, give each step its verdict, submit."""
    page.goto(f"{stack.base_url}/review/?t={tid}")
    expect(page.get_by_test_id("claim")).to_be_visible(timeout=30_000)
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
    # The verdict form exists only once the claim has come back and the page has loaded the open
    # review: for round 2 the step panel is already on the page before the claim, and verdicts given
    # before that reload were dropped with the old draft (submit stayed disabled; a CI run, 2026-11-29).
    expect(page.get_by_test_id("submit-review")).to_be_visible(timeout=30_000)
    frames = page.get_by_test_id("filmstrip").locator(".rv-frame")
    for i in range(frames.count()):
        frames.nth(i).click()
        verdict, comment = verdicts.get(i, ("approve", ""))
        page.get_by_test_id(f"step-{verdict}").click()
        if comment:
            page.get_by_test_id("step-comment").fill(comment)
    page.locator(f"input[name=overall][value={overall}]").check()
    page.get_by_test_id("submit-review").click()
    expect(page.get_by_test_id("other-review").first).to_be_visible(timeout=30_000)


def needs_fix_via_api(stack: LiveStack, task: str) -> tuple[int, int]:
    """A MiniWoB++ trajectory sent back for a fix on step 1, set up through the API: an override and a
    finish by the annotator, a fix (with a suggested action) and an approve by the two reviewers."""
    with stack.api("annotator") as api:
        state = api.post("/api/annotation/sessions/", json={"task": task_id(stack, task)}).json()
        sid = state["id"]
        deadline = time.monotonic() + 120
        while state["candidates"]["status"] == "pending":
            assert time.monotonic() < deadline, state["candidates"]
            time.sleep(0.5)
            state = api.get(f"/api/annotation/sessions/{sid}/").json()
        w, h = state["observation"]["width"], state["observation"]["height"]
        body = {"kind": "override", "obs_version": state["observation"]["obs_version"], "convention": "screen",
                "thought": "Somewhere on the page.", "action_text": f"click(start_box='(5,{h - 5})')"}  # fmt: skip
        state = api.post(f"/api/annotation/sessions/{sid}/decide/", json=body).json()["state"]
        if not state["observation"]["env_done"]:
            body = {
                "kind": "finish",
                "obs_version": state["observation"]["obs_version"],
                "answer": "",
                "thought": "Done.",
            }
            api.post(f"/api/annotation/sessions/{sid}/decide/", json=body).raise_for_status()
        else:
            api.post(f"/api/annotation/sessions/{sid}/submit/").raise_for_status()
        tid = int(api.get(f"/api/annotation/sessions/{sid}/").json()["trajectory_id"])
        steps = len(api.get(f"/api/annotation/sessions/{sid}/").json()["steps"])
    for reviewer, verdict in (("reviewer", "fix"), ("reviewer2", "approve")):
        with stack.api(reviewer) as api:
            review = api.post("/api/review/take/", json={"trajectory": tid}).json()["review_id"]
            step_verdicts = [{"index": i, "verdict": "approve", "comment": ""} for i in range(steps)]
            if verdict == "fix":
                step_verdicts[0] = {"index": 0, "verdict": "fix", "comment": "Click the middle of the page instead.",
                                    "action_text": f"click(start_box='({w // 2},{h // 2})')"}  # fmt: skip
            r = api.post(f"/api/review/reviews/{review}/submit/",
                         json={"verdict": verdict, "comment": "", "step_verdicts": step_verdicts})  # fmt: skip
            assert r.status_code == 200, r.text
    return sid, tid


# The launch form and the run page (tests/e2e/test_e2e_launch.py, test_e2e_preset_defaults.py) ----
def chart_points(page: Page, metric: str) -> int:
    """Points drawn on the metric's chart (0 while the chart is not there yet: charts appear with
    their first series)."""
    chart = page.get_by_test_id(f"chart-{metric}")
    return int(chart.get_attribute("data-points") or 0) if chart.count() else 0


def wait_chart_points(page: Page, metric: str, more_than: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        n = chart_points(page, metric)
        if n > more_than:
            return n
        page.wait_for_timeout(1000)
    raise AssertionError(f"chart {metric} stayed at {more_than} points for {timeout_s:.0f} s")


def submit_launch(page: Page, away_from: int | None = None) -> float:
    """Press Create run; while the env host is still booting its browsers right after `make up` (or a
    stopped run's environments are still being handed back), or the train and rollout workers, which
    start at background priority, have not announced their queues yet, the preflight refuses and the
    form says so: press again, as a person would. Returns when it went."""
    deadline = time.monotonic() + 240
    went = re.compile(r"/runs/\d+/$")
    while True:
        started = time.monotonic()
        page.get_by_test_id("launch-submit").click()
        try:
            page.wait_for_url(
                lambda u: went.search(u) is not None and f"/runs/{away_from}/" not in u, timeout=20_000
            )
            return started
        except Exception:
            said = page.get_by_test_id("launch-form").inner_text()
            starting = "can be leased" in said or "no trainer worker consumes" in said
            if time.monotonic() > deadline or not starting:
                page.screenshot(path="/tmp/launch-refused.png", full_page=True)
                raise AssertionError(f"the launch was refused: {said[-2000:]}") from None
            page.wait_for_timeout(5000)


def wait_run(
    api: httpx.Client, run_id: int, ok: Callable[[dict[str, Any]], bool], timeout_s: float, what: str
) -> dict[str, Any]:
    """The run (its API detail) once `ok(run)` holds; AssertionError after `timeout_s` or once it
    stopped running."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = api.get(f"/api/rl/runs/{run_id}/").json()
        if ok(run):
            return run
        if time.monotonic() > deadline or run["status"] not in ("running", "created", "paused"):
            raise AssertionError(f"no {what} in {timeout_s:.0f} s: {run}")
        time.sleep(2)
