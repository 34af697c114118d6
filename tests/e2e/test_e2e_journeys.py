"""Each role's journey whole, in Chromium, against `make up`'s stack (`live_stack`): the real web
server, Celery workers, env host (Xvfb desktop, MiniWoB++), VNC proxy and policy server.

- The annotator annotates a desktop task on the live desktop: accept, edit, override, take-over in
  and out with Alt+T, finish — and sees the stored result.
- Two reviewers review a MiniWoB++ trajectory: one asks for a fix on a step, the annotator reads the
  comment in the fix view, fixes the thought and resubmits, both approve the next round. A changed
  action in the fix view re-executes as a branch that continues in the workspace and replaces the
  original.
- The admin imports a folder of task files from the pools page: a preview, the good files
  imported, the bad ones reported per file, why a task is unsupported, a task edited in place.

The demo model may be untrained (random candidates): nothing here depends on what it proposes,
only on what the page does with it. Assertions are on what the user sees (and what the API stores).
Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS (or a temp dir).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.e2e.live_stack import LiveStack

# A journey is minutes long, and its first test also waits for `make up` (minutes on a loaded machine).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

VIEWPORT = {"width": 1440, "height": 960}
# Left clicks and hovers anywhere on the demo desktop only focus or select: safe to accept from a
# random model. Other kinds (keys, typing, finishing) could end or derail the episode.
HARMLESS = {"click", "hover"}


class Users:
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


@pytest.fixture
def users(browser: Browser, live_stack: LiveStack) -> Iterator[Users]:
    made = Users(browser, live_stack)
    yield made
    for ctx in made.contexts:
        ctx.close()


def _policy_ready(stack: LiveStack, timeout: float = 240) -> None:
    """Wait until the stack's policy server answers (it loads its model after `make up` returns);
    a proposal asked before that fails, which the workspace shows, but this journey wants them."""
    base = stack.env.get("POLICY_BASE_URL", "").rstrip("/")
    if not base:
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/models", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, (
            f"the policy server did not answer in {timeout} s\n{stack.log('policy')}"
        )
        time.sleep(1)


def _task_id(stack: LiveStack, external_id: str) -> int:
    """The id of the annotator's assigned demo task `external_id` (its Start button's test id)."""
    with stack.api("annotator") as api:
        rows = api.get("/api/annotation/assignments/").json()
    return next(int(a["task"]) for a in rows if a["task_external_id"] == external_id)


def _state(stack: LiveStack, user: str, sid: int) -> dict[str, Any]:
    with stack.api(user) as api:
        r = api.get(f"/api/annotation/sessions/{sid}/")
        r.raise_for_status()
        return r.json()


def _wait_candidates(stack: LiveStack, user: str, sid: int, page: Page) -> dict[str, Any]:
    """The state once the model's candidates for the current screen are in (shown on the page)."""
    deadline = time.monotonic() + 120
    while True:
        state = _state(stack, user, sid)
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


def _harmless(state: dict[str, Any]) -> int | None:
    """A candidate that is safe to accept on the demo desktop / page, or None."""
    for c in state["candidates"]["items"]:
        actions = c["screen_actions"]
        if c["parse_error"] or c.get("clamped") or c.get("error") or not actions:
            continue
        if all(a["kind"] in HARMLESS for a in actions):
            return int(c["index"])
    return None


def _screen_point(page: Page, screen: tuple[int, int], x: float, y: float) -> tuple[float, float]:
    """Where screen pixel (x, y) is on the page: the stage holds the screen exactly in both modes."""
    box = page.get_by_test_id("screen").bounding_box()
    assert box is not None and box["width"] > 0
    return box["x"] + (x + 0.5) * box["width"] / screen[0], box["y"] + (y + 0.5) * box["height"] / screen[1]


def _box(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not displayed"
    return box


def _assert_live_canvas_fills_the_screen_area(page: Page, shots: Path, name: str) -> None:
    """The screenshot-size check: the live noVNC canvas is what the screen area shows, the overlay
    lies exactly on it, and it fills the area (no static image above it, nothing pushed down)."""
    canvas = _box(page, "[data-testid=live-screen] canvas")
    stage = _box(page, "[data-testid=screen]")
    overlay = _box(page, "[data-testid=overlay]")
    area = _box(page, ".ws-screen")
    for key in ("x", "y", "width", "height"):
        assert abs(canvas[key] - stage[key]) <= 2, (key, canvas, stage)
        assert abs(overlay[key] - stage[key]) <= 2, (key, overlay, stage)
    assert canvas["x"] >= area["x"] and canvas["y"] >= area["y"]
    assert canvas["x"] + canvas["width"] <= area["x"] + area["width"] + 1
    assert canvas["y"] + canvas["height"] <= area["y"] + area["height"] + 1
    assert canvas["width"] >= 0.9 * area["width"] or canvas["height"] >= 0.9 * area["height"], (canvas, area)
    expect(page.get_by_test_id("screenshot")).to_be_hidden()  # the static image is not drawn over it
    expect(page.get_by_test_id("record-pause")).to_be_hidden()  # nothing records: no Pause button
    # What the screen area shows has the canvas's size (the screenshot a user would take of it).
    png = page.screenshot(path=str(shots / f"{name}.png"))
    assert len(png) > 10_000


def _steps(stack: LiveStack, user: str, sid: int) -> list[dict[str, Any]]:
    return _state(stack, user, sid)["steps"]


# ------------------------------------------------------------------------------------------------
# Annotator: a desktop task on the live desktop


def test_annotator_annotates_a_desktop_task_live_and_sees_the_result(
    live_stack: LiveStack, users: Users, shots: Path
) -> None:
    _policy_ready(live_stack)
    page = users.page("annotator")
    page.goto(f"{live_stack.base_url}/workspace/")
    # fw-os-001-make-dirs: "Create a directory named 'projects' in my home directory, with a
    # subdirectory named 'flywheel' inside it." (demo pool, checked by the desktop's verifier)
    page.get_by_test_id(f"start-{_task_id(live_stack, 'fw-os-001-make-dirs')}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = _state(live_stack, "annotator", sid)
    assert state["task"]["env_kind"] == "desktop"
    screen = (state["observation"]["width"], state["observation"]["height"])
    expect(page.get_by_test_id("connection")).to_have_attribute("data-status", "open", timeout=30_000)

    # The live desktop is the screen area, with the candidates drawn on it.
    expect(page.locator("[data-testid=live-screen] canvas")).to_be_visible(timeout=60_000)
    state = _wait_candidates(live_stack, "annotator", sid, page)
    expect(page.get_by_test_id("overlay").locator(".ov-cand")).to_have_count(
        len(state["candidates"]["items"])
    )
    _assert_live_canvas_fills_the_screen_area(page, shots, "desktop-live-candidates")

    # Override: a click on the live screen becomes the action at that screen pixel; send it.
    page.mouse.click(*_screen_point(page, screen, 400, 300))
    action = page.locator("#ws-action")
    expect(action).to_have_value("click(start_box='(400,300)')")
    page.locator("#ws-thought").fill("Focus the terminal first.")
    action.press("Enter")
    expect(page.get_by_test_id("step-0")).to_contain_text("overridden", timeout=60_000)

    # Accept: the first screen (of a few) that offers a harmless candidate; each refusal is an
    # override that moves on to a new screen.
    accepted: int | None = None
    for attempt in range(4):
        state = _wait_candidates(live_stack, "annotator", sid, page)
        accepted = _harmless(state)
        n = len(state["steps"])
        if accepted is not None:
            page.keyboard.press(str(accepted + 1))
        else:
            page.mouse.click(*_screen_point(page, screen, 420 + 10 * attempt, 300))
            page.locator("#ws-thought").fill("Keep the terminal focused.")
            action.press("Enter")
        expect(page.get_by_test_id(f"step-{n}")).to_be_visible(timeout=60_000)
        if accepted is not None:
            expect(page.get_by_test_id(f"step-{n}")).to_contain_text(f"accepted {accepted + 1}")
            break
    assert accepted is not None, "no harmless candidate in 4 screens"

    # Edit: candidate 1's thought and action changed before it runs.
    state = _wait_candidates(live_stack, "annotator", sid, page)
    n = len(state["steps"])
    if state["candidates"]["status"] == "ready":
        page.get_by_test_id("candidate-0").get_by_role("button", name="Edit").click()
        expect(page.locator("#ws-action")).to_be_visible()
        page.locator("#ws-thought").fill("The terminal is where the command goes.")
        convention = state["candidates"]["items"][0]["convention"]
        point = "(400,300)" if convention == "screen" else "(312,375)"
        action.fill(f"click(start_box='{point}')")
        action.press("Enter")
        expect(page.get_by_test_id(f"step-{n}")).to_contain_text("edited 1", timeout=60_000)
        n += 1

    # Take-over in with Alt+T: the desktop takes the input, the overlay lets it through.
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "takeover")
    _assert_live_canvas_fills_the_screen_area(page, shots, "desktop-takeover")
    page.mouse.click(*_screen_point(page, screen, 400, 300))
    typed = "mkdir -p projects/flywheel"
    page.keyboard.type(typed, delay=30)
    page.keyboard.press("Enter")
    time.sleep(1.5)
    # ... and out with the same Alt+T: it types nothing into the desktop and records no step.
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "proposal")
    expect(page.get_by_test_id("banner")).to_contain_text("from your take-over", timeout=60_000)
    steps = _steps(live_stack, "annotator", sid)
    takeover = [s for s in steps[n:] if s["decision"] == "takeover"]
    assert takeover, steps
    texts = " ".join(s["action_text"] for s in takeover)
    assert typed in texts, texts
    assert typed + "t" not in texts and "content='t'" not in texts, texts  # the toggle typed nothing
    assert re.search(r"click\(start_box='\((39\d|40\d),(29\d|30\d)\)'\)", texts), texts  # the pixel clicked
    page.screenshot(path=str(shots / "desktop-after-takeover.png"))

    # Finish: the session submits and the page shows the stored result.
    page.get_by_role("button", name="Finish with answer").click()
    page.locator("#ws-outcome-thought").fill("The directories exist now.")
    page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    done = page.get_by_test_id("done")
    expect(done).to_be_visible(timeout=120_000)
    result = page.get_by_test_id("result")
    expect(result).to_be_visible(timeout=60_000)
    state = _state(live_stack, "annotator", sid)
    with live_stack.api("admin") as api:
        stored = api.get(f"/api/trajectories/{state['trajectory_id']}/").json()["final_reward"]
    assert stored is not None
    shown = float(result.get_attribute("data-reward") or "nan")
    assert shown == pytest.approx(stored), (shown, stored)
    expect(result).to_contain_text("final reward")
    assert stored == 1.0, f"the take-over made the directories; the checker says {stored}"
    expect(page.get_by_test_id("connection")).to_have_text("Session closed")
    page.screenshot(path=str(shots / "desktop-result.png"))
    assert not users.errors["annotator"], users.errors


# ------------------------------------------------------------------------------------------------
# Reviewers and the fix loop


def _annotate_miniwob(stack: LiveStack, page: Page, task: str, shots: Path) -> tuple[int, int, str]:
    """The annotator works a MiniWoB++ episode in the browser: candidate 2 edited into a click in the
    middle of the page (whatever the model proposed: an untrained model's points are mostly off this
    160×210 screen), then Finish. Returns (session, trajectory, the edited step's label)."""
    page.goto(f"{stack.base_url}/workspace/")
    page.get_by_test_id(f"start-{_task_id(stack, task)}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = _wait_candidates(stack, "annotator", sid, page)
    assert state["candidates"]["status"] == "ready" and len(state["candidates"]["items"]) >= 2, state[
        "candidates"
    ]
    page.get_by_test_id("candidate-1").get_by_role("button", name="Edit").click()
    page.locator("#ws-thought").fill("The page has one thing to click; aim at its middle.")
    convention = state["candidates"]["items"][1]["convention"]
    w, h = state["observation"]["width"], state["observation"]["height"]
    point = f"({w // 2},{h // 2})" if convention == "screen" else "(500,500)"
    page.locator("#ws-action").fill(f"click(start_box='{point}')")
    page.locator("#ws-action").press("Enter")
    label = "edited 2"
    expect(page.get_by_test_id("step-0")).to_contain_text(label, timeout=60_000)
    page.screenshot(path=str(shots / "review-workspace-edited.png"))
    if not _state(stack, "annotator", sid)["observation"]["env_done"]:
        page.get_by_role("button", name="Finish with answer").click()
        page.locator("#ws-outcome-thought").fill("Done as far as I can tell.")
        page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    else:
        page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("done")).to_be_visible(timeout=120_000)
    expect(page.get_by_test_id("result")).to_contain_text("final reward")
    return sid, int(_state(stack, "annotator", sid)["trajectory_id"]), label


def _review(
    page: Page, stack: LiveStack, tid: int, verdicts: dict[int, tuple[str, str]], overall: str
) -> None:
    """Open /review/?t=<tid> as the page's own link, claim it, give each step its verdict, submit."""
    page.goto(f"{stack.base_url}/review/?t={tid}")
    expect(page.get_by_test_id("claim")).to_be_visible(timeout=30_000)
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
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


def test_two_reviewers_send_a_step_back_the_annotator_fixes_it_and_both_approve(
    live_stack: LiveStack, users: Users, shots: Path
) -> None:
    _policy_ready(live_stack)
    annotator = users.page("annotator")
    _sid, tid, label = _annotate_miniwob(live_stack, annotator, "click-button", shots)
    accepted_at = 0  # the edited step

    # Reviewer 1 opens the page's own URL form: offered a claim, not "no such trajectory".
    reviewer = users.page("reviewer")
    reviewer.goto(f"{live_stack.base_url}/review/?t={tid}")
    expect(reviewer.get_by_test_id("claim-offer")).to_be_visible(timeout=30_000)
    reviewer.screenshot(path=str(shots / "review-claim-offer.png"))
    reviewer.get_by_test_id("claim").click()
    expect(reviewer.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
    # The edited candidate has the same number here as in the workspace.
    reviewer.get_by_test_id(f"frame-{accepted_at}").click()
    expect(reviewer.get_by_test_id("step-decision")).to_have_text(label)
    comment = "Say in the thought which button you are aiming for."
    frames = reviewer.get_by_test_id("filmstrip").locator(".rv-frame")
    for i in range(frames.count()):
        frames.nth(i).click()
        if i == accepted_at:
            reviewer.get_by_test_id("step-fix").click()
            reviewer.get_by_test_id("step-comment").fill(comment)
        else:
            reviewer.get_by_test_id("step-approve").click()
    reviewer.locator("input[name=overall][value=fix]").check()
    reviewer.screenshot(path=str(shots / "review-fix-verdict.png"))
    reviewer.get_by_test_id("submit-review").click()
    expect(reviewer.get_by_test_id("other-review").first).to_be_visible(timeout=30_000)

    # Reviewer 2 approves: one fix + one approve sends the trajectory back.
    reviewer2 = users.page("reviewer2")
    _review(reviewer2, live_stack, tid, {}, "approve")
    expect(reviewer2.get_by_test_id("outcome")).to_contain_text("needs fix", timeout=30_000)

    # The annotator sees the comment: the session page says so in its own tone and leads to the fix view.
    annotator.goto(f"{live_stack.base_url}/workspace/{_sid}/")
    done = annotator.get_by_test_id("done")
    expect(done).to_have_attribute("data-status", "needs_fix", timeout=30_000)
    assert "ws-done-warn" in (done.get_attribute("class") or "")
    expect(annotator.get_by_test_id("connection")).not_to_have_text("Connecting…")
    annotator.goto(f"{live_stack.base_url}/workspace/")
    annotator.get_by_test_id(f"fix-{tid}").click()
    expect(annotator).to_have_url(re.compile(rf"/workspace/fix/{tid}/\?step={accepted_at + 1}$"))
    comments = annotator.get_by_test_id("fix-comments")
    expect(comments).to_contain_text(comment)
    expect(comments).to_contain_text("reviewer")
    expect(annotator.get_by_test_id("step-decision")).to_have_text(label)  # same number again
    annotator.get_by_test_id("fix-thought").fill(
        "I click the button the task names; it is the one at the marker."
    )
    annotator.get_by_test_id("fix-save-thought").click()
    expect(annotator.get_by_test_id("fix-status")).to_contain_text("saved")
    annotator.screenshot(path=str(shots / "fix-loop.png"), full_page=True)
    annotator.get_by_test_id("fix-resubmit-button").click()
    expect(annotator.get_by_test_id("fix-status")).to_contain_text("pending")
    with live_stack.api("annotator") as api:
        fixed = api.get(f"/api/annotation/fixes/{tid}/").json()
    assert fixed["trajectory"]["review_state"] == "pending" and fixed["trajectory"]["review_round"] == 2
    assert fixed["steps"][accepted_at]["thought"].startswith("I click the button")

    # Round 2: both reviewers approve, from the same URL form (a claim for the new round).
    _review(reviewer, live_stack, tid, {}, "approve")
    _review(reviewer2, live_stack, tid, {}, "approve")
    expect(reviewer2.get_by_test_id("outcome")).to_contain_text("approved", timeout=30_000)
    reviewer2.screenshot(path=str(shots / "review-approved.png"), full_page=True)
    with live_stack.api("admin") as api:
        assert api.get(f"/api/trajectories/{tid}/").json()["review_state"] == "approved"


# ------------------------------------------------------------------------------------------------
# Admin: task import from the pools page


def _osworld(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id, "snapshot": "os", "instruction": f"Create the file /tmp/{task_id}.txt", "config": [],
        "related_apps": ["os"],
        "evaluator": {"func": "check_include_exclude",
                      "result": {"type": "vm_command_line", "command": f"test -f /tmp/{task_id}.txt && echo ok", "shell": True},
                      "expected": {"type": "rule", "rules": {"include": ["ok"], "exclude": []}}},
        **extra,
    }  # fmt: skip


def test_admin_imports_a_folder_of_task_files_from_the_pools_page(
    live_stack: LiveStack, users: Users, shots: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(_osworld("e2e-good")))
    bad = _osworld("e2e-bad")
    bad["evaluator"].pop("func")
    (folder / "bad.json").write_text(json.dumps(bad))
    pdf = _osworld("e2e-pdf")
    pdf["evaluator"]["func"] = "compare_image_text"
    (folder / "pdf.json").write_text(json.dumps(pdf))
    (folder / "list.jsonl").write_text(
        json.dumps({"id": "e2e-j1", "instruction": "Open the settings", "env_kind": "browser"}) + "\n"
        + json.dumps({"id": "e2e-j2", "env_kind": "browser"}) + "\n"
    )  # fmt: skip
    (folder / "list.csv").write_text("id,instruction,env_kind,importance\ne2e-c1,Say hello,browser,2.5\n")
    (folder / "README.md").write_text("not a task file")

    page = users.page("admin")
    page.goto(f"{live_stack.base_url}/pools/")
    page.get_by_test_id("import-pool").fill("e2e-imported")
    page.get_by_test_id("import-folder").set_input_files(str(folder))
    summary = page.get_by_test_id("import-summary")
    expect(summary).to_contain_text("3 tasks can be imported", timeout=30_000)
    expect(summary).to_contain_text("2 files are refused")
    expect(page.get_by_test_id("import-file-bad.json")).to_contain_text("evaluator.func: missing")
    expect(page.get_by_test_id("import-file-list.jsonl")).to_contain_text("line 2")
    expect(page.get_by_test_id("import-file-list.jsonl")).to_contain_text("instruction")
    expect(page.get_by_test_id("import-file-pdf.json")).to_contain_text("unsupported")
    expect(page.get_by_test_id("import-file-pdf.json")).to_contain_text("compare_image_text")
    expect(page.get_by_test_id("import-preview")).to_contain_text("1 file in the folder skipped")
    page.screenshot(path=str(shots / "pools-import-preview.png"), full_page=True)
    with live_stack.api("admin") as api:
        assert not any(
            p["name"] == "e2e-imported" for p in api.get("/api/pools/?page_size=200").json()["results"]
        )

    page.get_by_test_id("import-go").click()
    expect(page.get_by_test_id("import-result")).to_contain_text("3 created", timeout=30_000)
    expect(page.get_by_test_id("import-result")).to_contain_text("2 files refused")
    # The pool browser shows the new pool with its tasks, and says why a task is unsupported.
    browser_box = page.get_by_test_id("pool-browser")
    expect(browser_box.locator(".pool-tabs a.active")).to_contain_text("e2e-imported", timeout=30_000)
    expect(page.get_by_test_id("unsupported-e2e-pdf")).to_contain_text("compare_image_text")
    expect(page.get_by_test_id("enabled-e2e-pdf")).to_be_disabled()
    # Edit importance and enabled in place.
    importance = page.get_by_test_id("importance-e2e-c1")
    expect(importance).to_have_value("2.5")
    importance.fill("4")
    importance.press("Tab")
    page.get_by_test_id("enabled-e2e-good").uncheck()
    expect(browser_box).to_contain_text("saved")
    expect(page.get_by_test_id("enabled-e2e-good").locator("xpath=ancestor::tr")).to_contain_text("disabled")
    page.screenshot(path=str(shots / "pools-import-done.png"), full_page=True)
    with live_stack.api("admin") as api:
        tasks = {t["external_id"]: t for t in api.get("/api/tasks/?page_size=200").json()["results"]}
    assert tasks["e2e-c1"]["importance"] == 4.0
    assert tasks["e2e-good"]["enabled"] is False
    assert tasks["e2e-pdf"]["supported"] is False and not tasks["e2e-pdf"]["enabled"]
    assert "e2e-bad" not in tasks and "e2e-j1" not in tasks
    assert not users.errors["admin"], users.errors


def _needs_fix_via_api(stack: LiveStack, task: str) -> tuple[int, int]:
    """A MiniWoB++ trajectory sent back for a fix on step 1, set up through the API: an override and a
    finish by the annotator, a fix (with a suggested action) and an approve by the two reviewers."""
    with stack.api("annotator") as api:
        state = api.post("/api/annotation/sessions/", json={"task": _task_id(stack, task)}).json()
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


def test_annotator_reexecutes_a_changed_action_as_a_branch(
    live_stack: LiveStack, users: Users, shots: Path
) -> None:
    _sid, tid = _needs_fix_via_api(live_stack, "click-test")
    page = users.page("annotator")
    page.goto(f"{live_stack.base_url}/workspace/fix/{tid}/")
    expect(page.get_by_test_id("fix-comments")).to_contain_text("Click the middle of the page instead.")
    branch = page.get_by_test_id("fix-branch")
    expect(branch).to_be_disabled()  # nothing changed yet
    page.get_by_role("button", name="Use this action").click()  # the reviewer's suggested action
    expect(branch).to_be_enabled()
    suggested = page.get_by_test_id("fix-action").input_value()
    page.get_by_test_id("fix-thought").fill("The reviewer is right: the middle of the page.")
    page.screenshot(path=str(shots / "fix-branch-before.png"), full_page=True)
    branch.click()
    # The branch re-executes on a fresh environment and continues in the workspace.
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    expect(page.get_by_test_id("step-0")).to_contain_text("overridden", timeout=30_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = _state(live_stack, "annotator", sid)
    assert state["steps"][0]["action_text"] == suggested
    assert state["trajectory_id"] != tid
    page.screenshot(path=str(shots / "fix-branch-workspace.png"))
    if not state["observation"]["env_done"]:
        page.get_by_role("button", name="Finish with answer").click()
        page.locator("#ws-outcome-thought").fill("Fixed as the reviewer asked.")
        page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    else:
        page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("result")).to_contain_text("final reward", timeout=120_000)
    with live_stack.api("annotator") as api:
        original = api.get(f"/api/annotation/fixes/{tid}/").json()["trajectory"]
        fixed = api.get(f"/api/annotation/fixes/{state['trajectory_id']}/").json()["trajectory"]
    assert original["review_state"] == "superseded" and original["superseded_by"] == state["trajectory_id"]
    assert fixed["branch_of"] == tid and fixed["review_state"] == "pending"
    # The fix view of the original says it was replaced and offers nothing to change.
    page.goto(f"{live_stack.base_url}/workspace/fix/{tid}/")
    expect(page.get_by_test_id("fix-head")).to_contain_text(
        f"replaced by its branch #{state['trajectory_id']}"
    )
    expect(page.get_by_test_id("fix-resubmit-button")).to_be_disabled()
    assert not users.errors["annotator"], users.errors
