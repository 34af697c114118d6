"""OSWorld tasks through the platform as a person uses them, on `make up`'s stack: the admin imports
our own OSWorld-format task (its files in the stack's OSWorld mirror, where `manage.py
osworld_mirror` would put them) and assigns it; the annotator starts it in the workspace, does it
on the live desktop by take-over and sees the evaluator's score at Finish. The Chrome task (Chromium
in the session's sandbox, tabs opened over DevTools by the set-up) and the LibreOffice Calc task of
issue 22's "done when" (Calc opens the task's .xlsx; the evaluator's postconfig saves it with
Ctrl+S and OSWorld's `compare_table` scores it against the gold file)."""

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
from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.live_stack import LiveStack
from workers.envs.osworld import solutions
from workers.envs.osworld.files import pyautogui_dir

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TASK_ID = "fw-chrome-201-open-tab"
CALC_TASK_ID = "fw-calc-001-total"


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


def _wait_for_change(page: Page, before: Image.Image, timeout: float = 60, min_pixels: int = 1500) -> None:
    """Until the live desktop differs from `before` in more than `min_pixels` (by default more than a
    caret's worth)."""
    deadline = time.monotonic() + timeout
    while True:
        diff = ImageChops.difference(before, _live_screen(page)).point(lambda v: 255 if v > 40 else 0)
        changed = diff.histogram()[255]
        if changed > min_pixels:
            return
        assert time.monotonic() < deadline, f"the desktop did not change ({changed} pixels) in {timeout} s"
        time.sleep(0.3)


def _screen_point(page: Page, screen: tuple[int, int], x: float, y: float) -> tuple[float, float]:
    box = page.get_by_test_id("screen").bounding_box()
    assert box is not None and box["width"] > 0
    return box["x"] + (x + 0.5) * box["width"] / screen[0], box["y"] + (y + 0.5) * box["height"] / screen[1]


def _import_and_assign(live_stack: LiveStack, tmp_path: Path, pool: str, tasks: list[dict]) -> dict[str, int]:
    """The admin imports the task files into `pool` and assigns it to the annotator: each task's id
    (its Start button's) by external id."""
    paths = []
    for task in tasks:
        paths.append(tmp_path / f"{task['id']}.json")
        paths[-1].write_text(json.dumps(task))
    with live_stack.api("admin") as api:
        handles = [path.open("rb") for path in paths]
        try:
            r = api.post(
                "/api/tasks/import/",
                data={"pool": pool, "create_pool": "true", "format": "osworld"},
                files=[
                    ("file", (path.name, fh, "application/json"))
                    for path, fh in zip(paths, handles, strict=True)
                ],
            )
        finally:
            for fh in handles:
                fh.close()
        assert r.status_code == 201, r.text
        assert r.json()["unsupported"] == 0, r.text
        pool_id = next(
            p["id"] for p in api.get("/api/pools/?page_size=200").json()["results"] if p["name"] == pool
        )
        r = api.post("/api/annotation/assignments/", json={"pool": pool_id, "users": ["annotator"]})
        assert r.status_code in (200, 201), r.text
    with live_stack.api("annotator") as api:
        rows = api.get("/api/annotation/assignments/").json()
    wanted = {task["id"] for task in tasks}
    return {a["task_external_id"]: int(a["task"]) for a in rows if a["task_external_id"] in wanted}


def _start(page: Page, live_stack: LiveStack, task_pk: int) -> tuple[int, int]:
    """Start the task from the workspace list; the desktop's size once its session page shows it."""
    page.goto(f"{live_stack.base_url}/workspace/")
    page.get_by_test_id(f"start-{task_pk}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=180_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with live_stack.api("annotator") as api:
        state = api.get(f"/api/annotation/sessions/{sid}/").json()
    # as long as the session's start may take (the set-up waits until its apps are idle): at load
    # ~22 the second Calc session's live screen took over 60 s
    expect(page.locator("[data-testid=live-screen] canvas")).to_be_visible(timeout=180_000)
    return state["observation"]["width"], state["observation"]["height"]


def _finish(page: Page, thought: str) -> Locator:
    """Finish with an answer; the evaluator's result as the page shows it."""
    page.get_by_role("button", name="Finish with answer").click()
    page.locator("#ws-outcome-thought").fill(thought)
    page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    expect(page.get_by_test_id("done")).to_be_visible(timeout=180_000)
    result = page.get_by_test_id("result")
    expect(result).to_be_visible(timeout=180_000)
    expect(result).to_contain_text("final reward")
    return result


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("chromium", "socat", "wmctrl")),
    reason="make osworld-apps DOMAINS=chrome",
)
def test_annotator_does_a_chrome_task_and_sees_its_score(
    live_stack: LiveStack, annotator: Page, shots: Path, tmp_path: Path
) -> None:
    # The task's pages, where `manage.py osworld_mirror` would have put them.
    mirror = Path(live_stack.env["OSWORLD_MIRROR_DIR"]) / "files.flywheel.test" / "chrome"
    mirror.mkdir(parents=True)
    solutions.BUNDLES[TASK_ID](mirror)
    task_pk = _import_and_assign(live_stack, tmp_path, "e2e-chrome", [solutions.load(TASK_ID)])[TASK_ID]

    page = annotator
    screen = _start(page, live_stack, task_pk)
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

    result = _finish(page, "The to-do page is open in a new tab.")
    page.screenshot(path=str(shots / "chrome-result.png"))
    assert float(result.get_attribute("data-reward") or "nan") == 1.0, result.inner_text()


# Back in the default suite (issue 33 finding 4): with the set-up's event-based readiness (the
# session's threads asleep) and each take-over key waited for, 2 of 2 runs passed at load 20-38.
@pytest.mark.skipif(
    shutil.which("soffice") is None,
    reason="LibreOffice is not installed (no soffice): make osworld-apps DOMAINS=libreoffice",
)
@pytest.mark.skipif(
    shutil.which("wmctrl") is None or pyautogui_dir() is None,
    reason="make osworld-apps DOMAINS=libreoffice installs wmctrl and the sessions' pyautogui",
)
def test_annotator_does_a_calc_task_and_sees_its_score(
    live_stack: LiveStack, annotator: Page, shots: Path, tmp_path: Path
) -> None:
    """Issue 22's "done when": a LibreOffice Calc task end to end in the workspace, its evaluator's
    score shown at Finish — 0 when nothing was done, 1 once the annotator entered the total."""
    mirror = Path(live_stack.env["OSWORLD_MIRROR_DIR"]) / "files.flywheel.test" / "calc"
    mirror.mkdir(parents=True)
    solutions.BUNDLES[CALC_TASK_ID](mirror)  # prices.xlsx and the gold file
    task = solutions.load(CALC_TASK_ID)
    untouched = {**task, "id": f"{CALC_TASK_ID}-untouched"}  # the same task, finished with no action
    ids = _import_and_assign(live_stack, tmp_path, "e2e-calc", [task, untouched])
    page = annotator

    # No action: Calc shows the file, the annotator finishes at once; the evaluator says not solved.
    _start(page, live_stack, ids[untouched["id"]])
    result = _finish(page, "Nothing done.")
    page.screenshot(path=str(shots / "calc-result-no-action.png"))
    assert float(result.get_attribute("data-reward") or "nan") == 0.0, result.inner_text()
    expect(result).to_contain_text("not solved")

    # Done by take-over: the total in B5 (the keys go to Calc, which the set-up focused).
    screen = _start(page, live_stack, ids[CALC_TASK_ID])
    page.screenshot(path=str(shots / "calc-workspace.png"))
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "takeover")
    # A cell of the sheet, away from A1 (where the file opens): the cell cursor moves, so the first
    # key below (Ctrl+Home) always changes the screen too (from A1 it would change nothing).
    clicked_from = _live_screen(page)
    page.mouse.click(*_screen_point(page, screen, screen[0] // 2, screen[1] // 2))
    _wait_for_change(page, clicked_from, min_pixels=150)
    # Each move is waited for on the live desktop before the next key (as the Chrome journey does): a
    # burst (six keys and the formula within 50 ms) reached the desktop whole and in order (the
    # take-over recorder saw each), yet Calc once ended with #NAME? in A2, the arrows taken after the
    # formula's '=' (as cell references) while it was still moving the cursor.
    time.sleep(1)
    for key in ("Control+Home", "ArrowDown", "ArrowDown", "ArrowDown", "ArrowDown", "ArrowRight"):  # A1 … B5
        moved_from = _live_screen(page)
        page.keyboard.press(key)
        _wait_for_change(page, moved_from, min_pixels=150)  # the cell cursor moved (no caret in Calc's grid)
    before = _live_screen(page)
    page.keyboard.type("=SUM(B2:B4)", delay=150)
    page.keyboard.press("Enter")
    _wait_for_change(page, before, min_pixels=150)  # B5 shows the total, the cursor on B6 (1,479 pixels once)
    time.sleep(1)
    page.screenshot(path=str(shots / "calc-takeover.png"))
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "proposal")
    expect(page.get_by_test_id("banner")).to_contain_text("from your take-over", timeout=60_000)
    result = _finish(page, "B5 holds the total of B2:B4.")
    page.screenshot(path=str(shots / "calc-result.png"))
    assert float(result.get_attribute("data-reward") or "nan") == 1.0, result.inner_text()
    expect(result).to_contain_text("success")


# Issue 33: an OSWorld task that cannot be done scores 1 only when the agent gives up (OSWorld's FAIL).
# The task is written here in OSWorld's own shape (the public suite's os tasks of this kind have no
# set-up and the evaluator "infeasible").
INFEASIBLE_TASK = {
    "id": "fw-os-infeasible-bluetooth",
    "snapshot": "os",
    "instruction": "Switch off the Bluetooth adapter of this computer.",
    "source": "flywheel e2e",
    "trajectory": "trajectories/",
    "config": [],
    "related_apps": ["os"],
    "evaluator": {"func": "infeasible"},
}


def test_annotator_marks_an_infeasible_task_and_it_scores_one(
    live_stack: LiveStack, annotator: Page, shots: Path, tmp_path: Path
) -> None:
    task_pk = _import_and_assign(live_stack, tmp_path, "e2e-infeasible", [INFEASIBLE_TASK])[
        INFEASIBLE_TASK["id"]
    ]
    page = annotator
    _start(page, live_stack, task_pk)
    page.get_by_role("button", name="Infeasible").click()
    page.locator("#ws-outcome-thought").fill("This machine has no Bluetooth adapter to switch off.")
    page.get_by_test_id("outcome-infeasible").get_by_role("button", name="Mark infeasible").click()
    expect(page.get_by_test_id("done")).to_be_visible(timeout=180_000)
    result = page.get_by_test_id("result")
    expect(result).to_contain_text("final reward", timeout=180_000)
    page.screenshot(path=str(shots / "osworld-infeasible-result.png"))
    assert float(result.get_attribute("data-reward") or "nan") == 1.0, result.inner_text()
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with live_stack.api("annotator") as api:
        steps = api.get(f"/api/annotation/sessions/{sid}/").json()["steps"]
    # stored as OSWorld's FAIL, the annotator's words kept as the step's thought
    assert [s["action_text"] for s in steps] == ["call_user()"], steps
