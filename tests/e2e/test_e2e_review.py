"""Two reviewers review one submitted trajectory in Chromium; the stored states and V(s) are checked.

The trajectory is real: its screenshots are taken from a form rendered in Chromium, and its actions
click the form's real field and button positions. Needs the built frontend
(`npm --prefix frontend run build`). Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS or a temp dir.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from annotation.models import AnnotationSession, Review
from tests.annotation.test_review_replay import (
    SEED,
    button_centre,
    probe_observation,
    replay_stack,
    wait_idle,
)
from tests.conftest import PASSWORD
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.accounts.roles import Role
from webapp.store import services as store
from webapp.store.models import Trajectory

pytestmark = pytest.mark.e2e
__all__ = ["replay_stack"]  # a fixture: an env host and a replay worker

FORM = """<html><body style="margin:0;font:16px sans-serif;background:#fafafa">
<div style="background:#ffd;padding:12px 16px;height:26px">Type Ada into the name field and submit.</div>
<div style="padding:24px 16px">
  <label>Name <input id="name" style="font-size:16px;width:200px"></label><br><br>
  <button id="go" style="font-size:16px;padding:6px 18px">Submit</button>
  <p id="out"></p>
</div></body></html>"""


def _centre(page: Page, selector: str) -> list[float]:
    box = page.locator(selector).bounding_box()
    assert box is not None
    return [round(box["x"] + box["width"] / 2), round(box["y"] + box["height"] / 2)]


def _record_episode(browser: Browser) -> list[tuple[bytes, dict]]:
    """Do the task in a real page: a screenshot before each action, the action at the element's
    real position (screen pixels of a 480×300 page)."""
    page = browser.new_page(viewport={"width": 480, "height": 300})
    page.set_content(FORM)
    steps = []
    name, go = _centre(page, "#name"), _centre(page, "#go")
    plan = [
        (
            "I click the name field.",
            {"kind": "click", "point": name},
            f"click(start_box='({name[0]},{name[1]})')",
        ),
        ("I type the name.", {"kind": "type", "text": "Ada"}, "type(content='Ada')"),
        ("I submit the form.", {"kind": "click", "point": go}, f"click(start_box='({go[0]},{go[1]})')"),
    ]
    for thought, action, text in plan:
        png = page.screenshot()
        steps.append((png, {"thought": thought, "action": [action], "action_text": text}))
        if action["kind"] == "click":
            page.mouse.click(*action["point"])
        else:
            page.keyboard.type(action["text"])
    page.close()
    return steps


def _trajectory(task, annotator, episode, *, review_state: str) -> Trajectory:
    t = store.trajectory_create(
        task=task, source="annotation", annotator=annotator, metadata={"track": "expert"}
    )
    for i, (png, fields) in enumerate(episode):
        store.step_append(
            trajectory=t, screenshot=png, image_format="png",
            fields={**fields, "raw_text": f"Thought: {fields['thought']}\nAction: {fields['action_text']}",
                    "coord_convention": "screen", "screen_width": 480, "screen_height": 300,
                    "executed_points": [fields["action"][0]["point"]] if "point" in fields["action"][0] else [],
                    "decision": "overridden", "reward": 1.0 if i == len(episode) - 1 else 0.0,
                    "done": i == len(episode) - 1},
        )  # fmt: skip
    store.trajectory_finish(trajectory=t, status="completed", final_reward=1.0)
    Trajectory.objects.filter(pk=t.pk).update(review_state=review_state)
    AnnotationSession.objects.create(user=annotator, task=task, trajectory=t, status="submitted")
    return t


def _sign_in(browser: Browser, base: str, username: str) -> Page:
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{base}/login/?next=/review/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/review/")
    return page


def _shot(page: Page, path: Path) -> None:
    page.evaluate("window.scrollTo(0, 0)")  # the sticky top bar otherwise lands mid-page in a full-page shot
    page.screenshot(path=str(path), full_page=True)


def _review_all_steps(page: Page, n: int, shots: Path, name: str) -> None:
    for i in range(n):
        page.get_by_test_id(f"frame-{i}").click()
        expect(page.get_by_test_id("step-panel")).to_contain_text(f"Step {i + 1} of {n}")
        page.get_by_test_id("step-approve").click()
        expect(page.get_by_test_id(f"frame-{i}")).to_contain_text("approve")
        if i == 0:
            _shot(page, shots / f"{name}-step.png")


def test_two_reviewers_approve_a_trajectory(browser, live_server, users, make_user, shots) -> None:
    make_user("rev2", Role.REVIEWER)
    task = TaskFactory(
        pool=TaskPoolFactory(name="forms"),
        external_id="enter-name",
        instruction="Type Ada into the name field and submit.",
    )
    episode = _record_episode(browser)
    t = _trajectory(task, users["annotator"], episode, review_state="pending")
    twin = _trajectory(task, users["annotator2"], episode, review_state="approved")  # same actions earlier

    # Reviewer 1: queue → take the next → approve every step → approve overall.
    page = _sign_in(browser, live_server.url, "rev")
    queue = page.get_by_test_id("review-queue")
    expect(queue.locator("tbody tr")).to_have_count(1)
    expect(queue).to_contain_text("enter-name")
    _shot(page, shots / "review-queue.png")
    page.get_by_test_id("take-next").click()
    expect(page).to_have_url(f"{live_server.url}/review/?t={t.pk}")
    expect(page.get_by_test_id("review-head")).to_contain_text("Type Ada into the name field")
    expect(page.get_by_test_id("duplicates")).to_contain_text(f"#{twin.pk}")
    expect(page.get_by_test_id("filmstrip").locator("img")).to_have_count(3)
    expect(page.get_by_test_id("stage").locator("img")).to_have_js_property("complete", True)
    assert page.get_by_test_id("stage").locator("img").evaluate("img => img.naturalWidth") == 480
    expect(page.get_by_test_id("stage").locator(".rv-mark")).to_have_count(1)  # the click is drawn
    submit = page.get_by_test_id("submit-review")
    expect(submit).to_be_disabled()
    # A fix without a comment is not submittable; the page says why.
    page.get_by_test_id("step-fix").click()
    expect(page.get_by_test_id("overall")).to_contain_text("Say why in a comment on step 1")
    # A fix can carry the corrected action: a click on the screenshot gives its screen pixel.
    shot = page.get_by_test_id("stage").locator(".rv-shot")
    box = shot.bounding_box()
    assert box is not None
    shot.click(position={"x": box["width"] * 0.25, "y": box["height"] * 0.5})
    expect(page.get_by_test_id("step-fix-action")).to_have_value("click(start_box='(120,150)')")
    expect(page.get_by_test_id("stage").locator(".rv-fix-overlay")).to_have_count(1)
    _shot(page, shots / "reviewer1-fix.png")
    _review_all_steps(page, 3, shots, "reviewer1")
    page.get_by_role("radio", name="Approve").check()
    page.get_by_test_id("overall-comment").fill("Clean and minimal.")
    expect(submit).to_be_enabled()
    _shot(page, shots / "reviewer1-ready.png")
    submit.click()
    expect(page.get_by_test_id("overall")).to_contain_text("Waiting for 1 more review")
    t.refresh_from_db()
    assert t.review_state == "in_review" and t.validation is None
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()

    # Reviewer 2 does not see reviewer 1's review until submitting their own.
    page = _sign_in(browser, live_server.url, "rev2")
    page.get_by_test_id("take-next").click()
    expect(page).to_have_url(f"{live_server.url}/review/?t={t.pk}")
    expect(page.get_by_test_id("review-head")).to_contain_text("Other reviews are hidden")
    expect(page.locator("main")).not_to_contain_text("Clean and minimal.")
    _review_all_steps(page, 3, shots, "reviewer2")
    page.get_by_role("radio", name="Approve").check()
    page.get_by_test_id("submit-review").click()
    expect(page.get_by_test_id("outcome")).to_contain_text("Decided: approved")
    expect(page.get_by_test_id("other-review").filter(has_text="Clean and minimal.")).to_be_visible()
    expect(page.get_by_test_id("review-head")).to_contain_text("V(s) = 1 (human-review)")
    _shot(page, shots / "reviewer2-decided.png")
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()

    t.refresh_from_db()
    assert (t.review_state, t.validation, t.validator, t.route) == ("approved", 1, "human-review", "sft")
    assert AnnotationSession.objects.get(trajectory=t).status == "approved"
    reviews = Review.objects.filter(trajectory=t).order_by("completed_at")
    assert [r.reviewer.username for r in reviews] == ["rev", "rev2"]
    assert all(r.verdict == "approve" and len(r.step_verdicts) == 3 for r in reviews)
    assert reviews[0].comment == "Clean and minimal."


def test_reviewer_checks_executability_of_a_miniwob_trajectory(
    browser, live_server, users, shots, replay_stack
) -> None:
    """A real MiniWoB++ step (the env's own screenshot, a click on the button's real position, the
    seed recorded) replays in a fresh env from the review page and the verifier says 1."""
    import base64

    task = TaskFactory(external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"},
                       instruction="Click the button.")  # fmt: skip
    wait_idle()
    obs = probe_observation(task)
    x, y = button_centre(obs)
    t = store.trajectory_create(
        task=task, source="annotation", annotator=users["annotator"], metadata={"seed": SEED}
    )
    store.step_append(
        trajectory=t, screenshot=base64.b64decode(obs["screenshot"]), image_format=obs.get("image_format", "jpeg"),
        fields={"thought": "The button is here.", "action": [{"kind": "click", "point": [round(x), round(y)]}],
                "action_text": f"click(start_box='({round(x)},{round(y)})')", "coord_convention": "screen",
                "screen_width": obs["width"], "screen_height": obs["height"], "decision": "overridden"},
    )  # fmt: skip
    store.trajectory_finish(trajectory=t, status="completed", final_reward=1.0)
    Trajectory.objects.filter(pk=t.pk).update(review_state="pending")

    page = _sign_in(browser, live_server.url, "rev")
    page.get_by_test_id("take-next").click()
    expect(page).to_have_url(f"{live_server.url}/review/?t={t.pk}")
    expect(page.get_by_test_id("stage").locator(".rv-mark")).to_have_count(1)
    page.get_by_test_id("run-replay").click()
    result = page.get_by_test_id("exec-result")
    expect(result).to_contain_text("Executable: 1 / 1 steps replayed, verifier reward 1.00", timeout=90_000)
    expect(result).to_contain_text(f"Same seed as recorded ({SEED})")
    _shot(page, shots / "review-executability.png")
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()
    t.refresh_from_db()
    assert t.metadata["executability"]["ok"] is True and t.metadata["executability"]["reward"] == 1.0
