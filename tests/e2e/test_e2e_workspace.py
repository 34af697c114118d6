"""The annotator's workspace in Chromium against the real stack: an env-host worker with MiniWoB++,
a Celery worker computing candidates with the embedded policy, and the ASGI app under uvicorn (so
the page's websocket works). Sign in, take the next task, accept a candidate with the keyboard,
reload mid-episode, override with a click on the screen, submit — and check the stored steps.

Needs the built frontend (`npm --prefix frontend run build`). Screenshots go to
$FLYWHEEL_E2E_SCREENSHOTS or a fresh temp dir (printed at the end of the run).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from annotation.models import AnnotationSession, Assignment
from tests.annotation.conftest import live_stack, policy_server, warm_pool  # noqa: F401 (fixtures)
from tests.conftest import PASSWORD
from tests.e2e.conftest import serve_asgi
from tests.factories import TaskFactory
from webapp.store.models import Step, Trajectory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def asgi_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """uvicorn on this test's database, fleet prefix and policy server (websockets included)."""
    stack = request.getfixturevalue("live_stack")
    extra = {
        "FLEET_REDIS_PREFIX": stack["prefix"],
        "POLICY_BASE_URL": settings.POLICY_BASE_URL,
        "POLICY_PROFILE": "embedded",
    }
    with serve_asgi(extra) as url:
        yield url


def _wait_idle(kind: str, timeout: float = 90) -> None:
    from webapp.fleet import services as fleet

    deadline = time.monotonic() + timeout
    while fleet.registry().idle_count(kind) < 1:
        assert time.monotonic() < deadline, f"no {kind} environment booted within {timeout} s"
        time.sleep(0.2)


def _screen_point(page: Page, session: AnnotationSession, x: float, y: float) -> tuple[float, float]:
    """Where screen pixel (x, y) is on the page: the overlay covers the displayed screen exactly."""
    box = page.get_by_test_id("overlay").bounding_box()
    assert box is not None and box["width"] > 0
    return (box["x"] + (x + 0.5) * box["width"] / session.current_width,
            box["y"] + (y + 0.5) * box["height"] / session.current_height)  # fmt: skip


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _wait_for(predicate: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _proposed_after(pk: int, version: int) -> bool:
    now = AnnotationSession.objects.get(pk=pk)
    return now.candidates_status == "ready" and now.candidates_version > version


def _usable_candidates(session: AnnotationSession, button: dict) -> list[int]:
    """Candidates that run on the screen without ending the episode: parsed, on the screen, of a
    kind the page runs, and not touching the task's button."""
    session.refresh_from_db()
    runnable = {"click", "left_double", "right_single", "hover", "drag", "scroll", "wait"}
    return [
        c["index"] for c in session.candidates
        if not c["parse_error"] and not c.get("error") and not c.get("clamped")
        and all(a["kind"] in runnable and not _inside(a.get("point"), button) and not _inside(a.get("end_point"), button)
                for a in c["screen_actions"])
    ]  # fmt: skip


def _inside(point: list[float] | None, el: dict) -> bool:
    if point is None:
        return False
    return el["x"] <= point[0] <= el["x"] + el["width"] and el["y"] <= point[1] <= el["y"] + el["height"]


@pytest.fixture
def page(browser: Browser, shots: Path, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page that leaves a full-page screenshot behind when the test fails."""
    page = browser.new_page(viewport={"width": 1440, "height": 960})
    failed_before = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed_before:
        page.screenshot(path=str(shots / f"{request.node.name}-failed.png"), full_page=True)
    page.close()


def test_annotator_works_an_episode_in_the_workspace(browser, page: Page, users, asgi_server, shots) -> None:
    base = asgi_server
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    Assignment.objects.create(user=users["annotator"], task=task)
    _wait_idle("browser")

    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # Sign in through the form and open the workspace.
    page.goto(f"{base}/workspace/")
    expect(page).to_have_url(f"{base}/login/?next=/workspace/")
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/workspace/")
    expect(page.get_by_test_id("my-sessions")).to_contain_text("No sessions yet")
    page.screenshot(path=str(shots / "workspace-start.png"), full_page=True)

    # Take the next task: a session starts and the page opens it.
    page.get_by_test_id("take-next").click()
    expect(page).to_have_url(re.compile(rf"{base}/workspace/\d+/$"), timeout=60_000)
    page.screenshot(path=str(shots / "workspace-opened.png"))  # usually still "proposing…"
    session = AnnotationSession.objects.get(user=users["annotator"])
    expect(page.get_by_test_id("instruction")).to_have_text(session.current_instruction or task.instruction)
    expect(page.get_by_test_id("connection")).to_have_attribute("data-status", "open", timeout=15_000)

    # Candidates arrive over the websocket and are drawn on the screen.
    cards = page.get_by_test_id("candidates").locator(".ws-cand")
    expect(cards).to_have_count(3, timeout=90_000)
    expect(page.get_by_test_id("overlay").locator(".ov-cand")).to_have_count(3)
    page.screenshot(path=str(shots / "workspace-candidates.png"))
    cards.nth(1).hover()
    expect(page.get_by_test_id("overlay").locator(".ov-hl")).to_have_attribute("data-index", "1")
    page.screenshot(path=str(shots / "workspace-hover.png"))
    page.mouse.move(5, 5)

    # Accept with the keyboard a candidate the environment can run without ending the episode (the
    # model is untrained: its points are random, some off the screen, and its hotkeys may name keys
    # that do not exist). While the model offers none, the annotator writes a wait of their own and
    # the model proposes again for the next step.
    button = next(
        e for e in AnnotationSession.objects.get(pk=session.pk).current_elements if e["tag"] == "button"
    )
    waits = 0
    while not (usable := _usable_candidates(session, button)):
        assert waits < 6, f"no candidate to accept without ending the episode: {session.candidates}"
        version = session.candidates_version
        page.keyboard.press("o")
        page.locator("#ws-action").fill("wait()")
        page.locator("#ws-action").press("Enter")
        expect(page.get_by_test_id(f"step-{waits}")).to_contain_text("overridden", timeout=30_000)
        page.keyboard.press("Escape")  # out of the editor: digits accept candidates again
        waits += 1
        _wait_for(lambda v=version: _proposed_after(session.pk, v))
        expect(cards).to_have_count(3, timeout=90_000)
    choice = usable[0]
    first = waits  # the index of the accepted step
    page.keyboard.press(str(choice + 1))
    expect(page.get_by_test_id(f"step-{first}")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id(f"step-{first}")).to_contain_text(f"accepted {choice + 1}")
    step0 = Step.objects.get(trajectory=session.trajectory, index=first)
    assert step0.decision == "accepted" and step0.decision_index == choice
    assert step0.decision_meta["time_taken_ms"] > 0
    assert sorted(step0.decision_meta["rejected"]) == sorted({0, 1, 2} - {choice})

    # Reload mid-episode: the timeline and the current screen come back from the state.
    page.reload()
    expect(page.get_by_test_id(f"step-{first}")).to_contain_text(f"accepted {choice + 1}")
    expect(page.get_by_test_id("step-count")).to_have_text(_steps(first + 1))
    expect(page.get_by_test_id("connection")).to_have_attribute("data-status", "open", timeout=15_000)
    page.screenshot(path=str(shots / "workspace-reloaded.png"))
    page.keyboard.press("?")
    expect(page.get_by_test_id("help")).to_contain_text("accept that candidate")
    page.screenshot(path=str(shots / "workspace-keys.png"))
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("help")).to_be_hidden()

    # A second tab whose websocket never reaches the server: it will decide on a stale screen.
    stale_context = browser.new_context(storage_state=page.context.storage_state())
    stale = stale_context.new_page()
    stale.route_web_socket(re.compile(r".*/ws/annotation/.*"), lambda ws: None)
    stale.goto(page.url)
    expect(stale.get_by_test_id("step-count")).to_have_text(_steps(first + 1))

    # A bad action: the server's message is shown and the text is kept.
    session.refresh_from_db()
    page.keyboard.press("o")
    action = page.locator("#ws-action")
    expect(action).to_be_focused()
    action.fill("click(start_box='abc')")
    action.press("Enter")
    expect(page.get_by_test_id("editor-error")).to_contain_text("does not parse")
    expect(action).to_have_value("click(start_box='abc')")
    page.screenshot(path=str(shots / "workspace-bad-action.png"))

    # A drag and a right click on the screen become actions in screen pixels.
    page.mouse.move(*_screen_point(page, session, 10, 60))
    page.mouse.down()
    page.mouse.move(*_screen_point(page, session, 60, 60), steps=5)
    page.mouse.move(*_screen_point(page, session, 100, 60), steps=5)
    page.mouse.up()
    expect(action).to_have_value("drag(start_box='(10,60)', end_box='(100,60)')")
    page.screenshot(path=str(shots / "workspace-drag.png"))
    page.mouse.click(*_screen_point(page, session, 30, 40), button="right")
    expect(action).to_have_value("right_single(start_box='(30,40)')")

    # Override: click the button on the screen; the editor gets its screen pixels.
    button = next(e for e in session.current_elements if e["tag"] == "button")
    bx, by = round(button["x"] + button["width"] / 2), round(button["y"] + button["height"] / 2)
    page.mouse.click(*_screen_point(page, session, bx, by))
    expect(action).to_have_value(f"click(start_box='({bx},{by})')")
    # The editor completes action names with the coordinates of the last click.
    action.fill("cl")
    expect(page.locator("#ws-suggest li").first).to_contain_text("click")
    page.screenshot(path=str(shots / "workspace-suggestions.png"))
    action.press("Enter")
    expect(action).to_have_value(f"click(start_box='({bx},{by})')")
    page.locator("#ws-thought").fill("The button is in the middle of the page.")
    page.screenshot(path=str(shots / "workspace-override.png"))
    action.press("Enter")
    expect(page.get_by_test_id(f"step-{first + 1}")).to_contain_text("overridden", timeout=30_000)
    expect(page.get_by_test_id("env-done")).to_be_visible()
    page.screenshot(path=str(shots / "workspace-env-done.png"))

    # The stale tab's decision is refused (409): the message shows, the state is fetched again and
    # what was typed stays in the editor.
    stale.keyboard.press("o")
    stale.locator("#ws-action").fill("click(start_box='(5,5)')")
    stale.locator("#ws-action").press("Enter")
    expect(stale.get_by_test_id("banner")).to_contain_text("the screen changed")
    expect(stale.get_by_test_id(f"step-{first + 1}")).to_contain_text("overridden")
    expect(stale.locator("#ws-action")).to_have_value("click(start_box='(5,5)')")
    stale.screenshot(path=str(shots / "workspace-stale-409.png"))
    stale_context.close()
    assert Step.objects.filter(trajectory=session.trajectory).count() == first + 2

    # Submit.
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("done")).to_contain_text("Submitted", timeout=30_000)
    page.screenshot(path=str(shots / "workspace-submitted.png"), full_page=True)

    steps = list(Step.objects.filter(trajectory=session.trajectory).order_by("index"))
    assert [s.decision for s in steps] == ["overridden"] * first + ["accepted", "overridden"]
    assert steps[-1].executed_points == [[bx, by]]
    assert steps[-1].thought == "The button is in the middle of the page."
    assert steps[-1].reward > 0 and steps[-1].decision_meta["time_taken_ms"] > 0
    session.refresh_from_db()
    assert session.status == "submitted"
    traj = Trajectory.objects.get(pk=session.trajectory_id)
    assert traj.status == "completed" and traj.review_state == "pending" and traj.num_steps == first + 2

    # Back on the start page the session is listed.
    page.goto(f"{base}/workspace/")
    expect(page.get_by_test_id("my-sessions")).to_contain_text("click-test")
    assert errors == [], errors

    # The session page is the annotator's (and admins'): another annotator gets a 404, a researcher a 403.
    for role, code in (("annotator2", 404), ("researcher", 403), ("admin", 200)):
        client = Client()
        client.force_login(users[role])
        assert client.get(f"/workspace/{session.pk}/").status_code == code, role
