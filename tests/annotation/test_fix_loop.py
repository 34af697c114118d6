"""The review state machine gates routing, and the fix loop: reviewers' comments per step reach the
annotator, thought edits and resubmission start a new review round, a changed action re-executes
as a branch on a live MiniWoB++ environment."""

from __future__ import annotations

import pytest

from annotation.models import AnnotationSession, Review
from tests.annotation.test_annotation_flow import _wait_idle
from tests.annotation.test_review_workflow import approve_all, submit, submitted, take
from tests.annotation.test_review_workflow import reviewers as reviewers
from webapp.flywheel.services.validation import validate_pending
from webapp.store import services as store
from webapp.store.models import Trajectory

pytestmark = pytest.mark.django_db


def _needs_fix(reviewers, annotator, steps: int = 2) -> Trajectory:
    """Reviewer 1 approves, reviewer 2 asks to fix the last step: the trajectory needs a fix."""
    t = submitted(annotator=annotator, steps=steps)
    Trajectory.objects.filter(pk=t.pk).update(final_reward=1.0)
    r1 = take(reviewers["c1"], t.pk).json()["review_id"]
    r2 = take(reviewers["c2"], t.pk).json()["review_id"]
    assert submit(reviewers["c1"], r1, "approve", approve_all(steps)).status_code == 200
    verdicts = approve_all(steps)
    verdicts[-1] = {"index": steps - 1, "verdict": "fix", "comment": "say why you click there"}
    assert submit(reviewers["c2"], r2, "fix", verdicts, comment="almost").status_code == 200
    t.refresh_from_db()
    assert t.review_state == "needs_fix"
    return t


def test_validate_pending_never_routes_a_needs_fix_trajectory(reviewers, users) -> None:
    """The reported bug: Fix + Reject, then "Validate pending" gave validation=1, route=sft."""
    t = _needs_fix(reviewers, users["annotator"])
    counts = validate_pending()  # the pool validates by verifier reward, and the reward is 1.0
    t.refresh_from_db()
    assert (t.validation, t.route) == (None, "none") and counts["v1"] == 0


def test_a_validation_recorded_before_the_review_is_cleared_when_it_needs_a_fix(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"], steps=1)
    Trajectory.objects.filter(pk=t.pk).update(validation=1, route="sft", validator="verifier")
    for client, verdict in ((reviewers["c1"], "approve"), (reviewers["c2"], "fix")):
        rid = take(client, t.pk).json()["review_id"]
        step = {"index": 0, "verdict": verdict, "comment": "" if verdict == "approve" else "wrong field"}
        submit(client, rid, verdict, [step])
    t.refresh_from_db()
    assert (t.review_state, t.validation, t.route) == ("needs_fix", None, "none")


def test_pending_waits_for_review_and_rejected_is_never_v1(users) -> None:
    t = submitted(annotator=users["annotator"], steps=1)
    Trajectory.objects.filter(pk=t.pk).update(final_reward=1.0)
    validate_pending()
    t.refresh_from_db()
    assert t.validation is None, "the reviewers decide first"
    Trajectory.objects.filter(pk=t.pk).update(review_state="rejected")
    validate_pending()
    t.refresh_from_db()
    assert (t.validation, t.route, t.validator) == (0, "ct", "human-review")
    with pytest.raises(store.StoreError, match="rejected"):
        store.trajectory_validate(trajectory=t, value=1, validator="verifier")


def test_the_annotator_reads_comments_edits_a_thought_and_resubmits(reviewers, users, api) -> None:
    t = _needs_fix(reviewers, users["annotator"], steps=2)
    client = api("annotator")
    listed = client.get("/api/annotation/fixes/").json()
    assert [row["trajectory_id"] for row in listed] == [t.pk] and listed[0]["flagged_steps"] == [1]
    view = client.get(f"/api/annotation/fixes/{t.pk}/").json()
    assert view["steps"][1]["comments"] == [
        {"reviewer": "rev2", "verdict": "fix", "comment": "say why you click there", "action_text": ""}
    ]
    assert view["steps"][0]["comments"] == [] and view["steps"][1]["number"] == 2
    assert {r["comment"] for r in view["reviews"]} == {"", "almost"}
    # others may not see or touch it
    assert api("annotator2").get(f"/api/annotation/fixes/{t.pk}/").status_code == 404
    assert api("reviewer").get(f"/api/annotation/fixes/{t.pk}/").status_code == 403

    url = f"/api/annotation/fixes/{t.pk}/steps/1/"
    assert client.patch(url, {"thought": "   "}, format="json").status_code == 400
    response = client.patch(url, {"thought": "The Submit button sends the name."}, format="json")
    assert response.status_code == 200 and response.json()["step"]["edited"]
    step = t.steps.get(index=1)
    assert step.thought == "The Submit button sends the name."
    assert step.decision_meta["fix_history"][0]["thought"] == "I should click the submit button."

    response = client.post(f"/api/annotation/fixes/{t.pk}/resubmit/")
    assert response.json() == {"trajectory_id": t.pk, "review_state": "pending", "review_round": 2}
    assert client.post(f"/api/annotation/fixes/{t.pk}/resubmit/").status_code == 409
    assert client.patch(url, {"thought": "late"}, format="json").status_code == 409
    assert AnnotationSession.objects.get(trajectory=t).status == "submitted"

    # round 2: the same two reviewers review it again and approve; only now is it SFT data
    for client_r in (reviewers["c1"], reviewers["c2"]):
        rid = take(client_r).json()["review_id"]
        assert submit(client_r, rid, "approve", approve_all(2)).status_code == 200
    t.refresh_from_db()
    assert (t.review_state, t.review_round, t.validation, t.route) == ("approved", 2, 1, "sft")
    assert Review.objects.filter(trajectory=t).count() == 4
    assert t.metadata["review"]["round"] == 2


def test_a_changed_action_must_not_be_off_screen_or_unparseable(reviewers, users, api) -> None:
    t = _needs_fix(reviewers, users["annotator"], steps=2)
    url = f"/api/annotation/fixes/{t.pk}/steps/1/branch/"
    client = api("annotator")
    assert client.post(url, {"action_text": "click(start_box='(1"}, format="json").status_code in (400, 503)
    assert client.post(f"/api/annotation/fixes/{t.pk}/steps/9/branch/", {"action_text": "wait()"},
                       format="json").status_code == 400  # fmt: skip
    assert Trajectory.objects.count() == 1, "nothing kept"


@pytest.mark.django_db(transaction=True)
def test_a_changed_action_re_executes_as_a_branch_on_a_live_environment(
    reviewers, users, api, live_stack
) -> None:
    """A real MiniWoB++ session (click-test), reviewed "fix" on its second step; the annotator
    changes that step's action: a new trajectory replays step 1 on the same seed, executes the new
    action, continues live, and its submission puts it in review and supersedes the original."""
    from tests.factories import TaskFactory

    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", instruction="placeholder"
    )
    task.setup = {"episode_max_time_ms": 600_000}
    task.save()
    client = api("annotator")
    from annotation.models import Assignment

    Assignment.objects.create(user=users["annotator"], task=task)
    _wait_idle("browser")
    started = client.post("/api/annotation/sessions/", {"task": task.pk}, format="json")
    assert started.status_code == 201, started.content
    state = started.json()
    assert state["task"]["instruction"] != "placeholder"  # the episode's own instruction
    trajectory = Trajectory.objects.get(pk=state["trajectory_id"])
    assert trajectory.instruction == state["task"]["instruction"]
    # Two clicks on the instruction banner, where nothing happens: click-test's button has a random size
    # and place in the area below it, and covered the old (150,205) on some seeds (CI, 2026-11-29).
    for _ in range(2):
        state = client.get(f"/api/annotation/sessions/{state['id']}/").json()
        decided = client.post(
            f"/api/annotation/sessions/{state['id']}/decide/",
            {"kind": "override", "obs_version": state["observation"]["obs_version"],
             "thought": "probe", "action_text": "click(start_box='(80,20)')"},
            format="json",
        )  # fmt: skip
        assert decided.status_code == 200, decided.content
    assert client.post(f"/api/annotation/sessions/{state['id']}/submit/").status_code == 200
    state = client.get(f"/api/annotation/sessions/{state['id']}/").json()
    assert state["result"]["final_reward"] == 0.0 and state["result"]["success"] is False
    original = Trajectory.objects.get(pk=state["trajectory_id"])
    for client_r, verdict in ((reviewers["c1"], "reject"), (reviewers["c2"], "fix")):
        rid = take(client_r, original.pk).json()["review_id"]
        steps = [{"index": 0, "verdict": "approve", "comment": ""},
                 {"index": 1, "verdict": "fix", "comment": "click the button"}]  # fmt: skip
        assert submit(client_r, rid, verdict, steps).status_code == 200
    original.refresh_from_db()
    assert original.review_state == "needs_fix"

    response = client.post(
        f"/api/annotation/fixes/{original.pk}/steps/1/branch/",
        {"action_text": "click(start_box='(80,130)')", "thought": "The button is in the middle."},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    branch = Trajectory.objects.get(pk=body["trajectory_id"])
    assert body["branch_of"] == original.pk and branch.metadata["branch_of"] == original.pk
    assert branch.metadata["seed"] == original.metadata["seed"]
    assert branch.instruction == original.instruction  # same seed, same generated instruction
    steps = list(branch.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1]
    assert steps[0].decision_meta["copied_from"] == original.steps.get(index=0).pk
    assert steps[1].thought == "The button is in the middle."
    assert steps[1].decision_meta["fix_of"] == {"trajectory": original.pk, "step": 1}
    session = body["session"]
    assert session["status"] == "active" and session["branch_of"] == original.pk
    original.refresh_from_db()
    assert original.review_state == "needs_fix", "only a submitted branch replaces the original"

    assert client.post(f"/api/annotation/sessions/{session['id']}/submit/").status_code == 200
    branch.refresh_from_db()
    original.refresh_from_db()
    assert (branch.review_state, original.review_state) == ("pending", "superseded")
    assert original.metadata["superseded_by"] == branch.pk and original.route == "none"
