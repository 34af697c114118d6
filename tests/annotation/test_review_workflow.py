"""The review workflow through its API: queue, take, independence, submit, state transitions and
V(s), agreement, duplicates, the executability request, and who may do what."""

from __future__ import annotations

import pytest

from annotation.models import AnnotationSession, Review
from annotation.review import services
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from webapp.accounts.roles import Role
from webapp.store.models import Trajectory

pytestmark = pytest.mark.django_db


def submitted(task=None, annotator=None, steps: int = 2, clicks=None) -> Trajectory:
    """A finished annotation trajectory waiting for review, with its session (status submitted)."""
    task = task or TaskFactory()
    t = TrajectoryFactory(
        task=task, source="annotation", status="completed", review_state="pending", annotator=annotator
    )
    for i in range(steps):
        x, y = (clicks or [(80, 120)] * steps)[i]
        StepFactory(
            trajectory=t, index=i, action=[{"kind": "click", "point": [x, y]}],
            coord_convention="screen", screen_width=160, screen_height=210,
        )  # fmt: skip
    t.num_steps = steps
    t.save(update_fields=["num_steps"])
    if annotator is not None:
        AnnotationSession.objects.create(user=annotator, task=task, trajectory=t, status="submitted")
    return t


@pytest.fixture
def reviewers(users, make_user, api):
    second = make_user("rev2", Role.REVIEWER)
    from rest_framework.test import APIClient

    c2 = APIClient()
    c2.force_authenticate(second)
    return {"r1": users["reviewer"], "r2": second, "c1": api("reviewer"), "c2": c2}


def take(client, trajectory: int | None = None):
    return client.post("/api/review/take/", {"trajectory": trajectory} if trajectory else {}, format="json")


def approve_all(n: int) -> list[dict]:
    return [{"index": i, "verdict": "approve", "comment": ""} for i in range(n)]


def submit(client, review_id: int, verdict: str, step_verdicts: list[dict], comment: str = ""):
    return client.post(
        f"/api/review/reviews/{review_id}/submit/",
        {"verdict": verdict, "step_verdicts": step_verdicts, "comment": comment},
        format="json",
    )


@pytest.mark.parametrize("role", ["annotator", "researcher", "nobody"])
def test_other_roles_are_refused_every_endpoint(api, users, role: str) -> None:
    t = submitted()
    client = api(role)
    for path in ("queue/", f"trajectories/{t.pk}/", f"trajectories/{t.pk}/agreement/",
                 f"trajectories/{t.pk}/duplicates/", f"trajectories/{t.pk}/executability/"):  # fmt: skip
        assert client.get(f"/api/review/{path}").status_code == 403, path
    assert take(client).status_code == 403
    assert client.post(f"/api/review/trajectories/{t.pk}/executability/").status_code == 403
    assert api(None).get("/api/review/queue/").status_code in (401, 403)


def test_queue_and_take_two_independent_reviews(reviewers, users, make_user, api) -> None:
    t = submitted(annotator=users["annotator"])
    mine = submitted(annotator=reviewers["r1"])  # a reviewer never reviews their own trajectory
    queue = reviewers["c1"].get("/api/review/queue/").json()
    assert queue["reviews_required"] == 2
    assert [row["id"] for row in queue["queue"]] == [t.pk]

    got = take(reviewers["c1"])
    assert got.status_code == 201 and got.json()["trajectory_id"] == t.pk
    t.refresh_from_db()
    assert t.review_state == "in_review"
    assert AnnotationSession.objects.get(trajectory=t).status == "in_review"
    # Taking again resumes the open review instead of taking a second trajectory.
    assert take(reviewers["c1"]).json()["review_id"] == got.json()["review_id"]
    assert take(reviewers["c1"], mine.pk).status_code == 409

    assert take(reviewers["c2"]).json()["trajectory_id"] == t.pk
    third = make_user("rev3", Role.REVIEWER)
    from rest_framework.test import APIClient

    c3 = APIClient()
    c3.force_authenticate(third)
    assert [row["id"] for row in c3.get("/api/review/queue/").json()["queue"]] == [mine.pk]  # t is full
    assert take(c3, t.pk).status_code == 409
    assert c3.get(f"/api/review/trajectories/{t.pk}/").status_code == 404  # not theirs to see
    # The admin sees any trajectory's review data.
    assert api("admin").get(f"/api/review/trajectories/{t.pk}/").status_code == 200


def test_both_approve_records_v1_and_reviews_are_independent(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"])
    r1 = take(reviewers["c1"]).json()["review_id"]
    r2 = take(reviewers["c2"]).json()["review_id"]
    assert submit(reviewers["c1"], r1, "approve", approve_all(2), "clean").status_code == 200

    # Reviewer 2 has not submitted: reviewer 1's review and the agreement stay hidden.
    data = reviewers["c2"].get(f"/api/review/trajectories/{t.pk}/").json()
    assert data["others_hidden"] is True and data["other_reviews"] == [] and data["outcome"] is None
    assert data["my_review"]["id"] == r2 and data["reviews_done"] == 1
    assert len(data["steps"]) == 2 and data["steps"][0]["screen_actions"] == [
        {"kind": "click", "point": [80.0, 120.0]}
    ]
    assert reviewers["c2"].get(f"/api/review/trajectories/{t.pk}/agreement/").status_code == 409
    t.refresh_from_db()
    assert t.review_state == "in_review" and t.validation is None

    done = submit(reviewers["c2"], r2, "approve", approve_all(2))
    assert done.status_code == 200
    assert done.json()["other_reviews"][0]["comment"] == "clean"  # visible once their own is in
    t.refresh_from_db()
    assert t.review_state == "approved"
    assert (t.validation, t.validator, t.route) == (1, "human-review", "sft")
    assert t.metadata["review"]["outcome"] == "approved" and t.metadata["review"]["disagreeing_steps"] == []
    assert AnnotationSession.objects.get(trajectory=t).status == "approved"
    agreement = reviewers["c1"].get(f"/api/review/trajectories/{t.pk}/agreement/").json()
    assert agreement == {"reviews": 2, "verdicts": ["approve", "approve"], "outcome": "approved",
                         "step_agreement": 1.0, "agreeing_steps": [0, 1], "disagreeing_steps": [],
                         "flagged_steps": [], "fix_agreement": []}  # fmt: skip
    # Submitting twice is refused.
    assert submit(reviewers["c2"], r2, "reject", [{"index": 0, "verdict": "reject", "comment": "x"},
                                                  {"index": 1, "verdict": "reject", "comment": "x"}]).status_code == 409  # fmt: skip


def test_both_reject_records_v0(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"], steps=1)
    for client in (reviewers["c1"], reviewers["c2"]):
        rid = take(client).json()["review_id"]
        assert (
            submit(
                client, rid, "reject", [{"index": 0, "verdict": "reject", "comment": "wrong button"}]
            ).status_code
            == 200
        )
    t.refresh_from_db()
    assert (t.review_state, t.validation, t.validator, t.route) == ("rejected", 0, "human-review", "ct")
    assert AnnotationSession.objects.get(trajectory=t).status == "rejected"


def test_disagreement_needs_fix_and_lists_the_steps(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"], steps=3)
    r1 = take(reviewers["c1"]).json()["review_id"]
    r2 = take(reviewers["c2"]).json()["review_id"]
    submit(reviewers["c1"], r1, "approve", approve_all(3))
    verdicts = approve_all(3)
    verdicts[2] = {"index": 2, "verdict": "fix", "comment": "should type Enter after the name"}
    assert submit(reviewers["c2"], r2, "fix", verdicts).status_code == 200
    t.refresh_from_db()
    assert t.review_state == "needs_fix" and t.validation is None
    assert t.metadata["review"]["disagreeing_steps"] == [2]
    assert t.metadata["review"]["verdicts"] == ["approve", "fix"]
    assert AnnotationSession.objects.get(trajectory=t).status == "needs_fix"


def test_malformed_reviews_are_refused(reviewers, users) -> None:
    submitted(annotator=users["annotator"], steps=2)
    rid = take(reviewers["c1"]).json()["review_id"]
    c1 = reviewers["c1"]
    missing = submit(c1, rid, "approve", approve_all(1))
    assert missing.status_code == 400 and "missing: [1]" in missing.json()["detail"]
    fix_step = [{"index": 0, "verdict": "approve"}, {"index": 1, "verdict": "fix", "comment": "off"}]
    assert "cannot be approved" in submit(c1, rid, "approve", fix_step).json()["detail"]
    no_comment = [{"index": 0, "verdict": "approve"}, {"index": 1, "verdict": "reject"}]
    assert "say why" in submit(c1, rid, "reject", no_comment).json()["detail"]
    assert (
        submit(c1, rid, "approve", [*approve_all(2), {"index": 7, "verdict": "approve"}]).status_code == 400
    )
    assert submit(c1, rid, "maybe", approve_all(2)).status_code == 400
    assert submit(reviewers["c2"], rid, "approve", approve_all(2)).status_code == 404  # not their review
    assert Review.objects.get(pk=rid).completed_at is None


def test_needs_more_reviews_when_configured(reviewers, users, settings) -> None:
    settings.REVIEWS_PER_TRAJECTORY = 1
    t = submitted(annotator=users["annotator"], steps=1)
    rid = take(reviewers["c1"]).json()["review_id"]
    assert take(reviewers["c2"]).status_code == 404
    submit(reviewers["c1"], rid, "approve", approve_all(1))
    t.refresh_from_db()
    assert t.review_state == "approved" and t.validation == 1


def test_duplicates_of_the_same_task_are_flagged(reviewers, users) -> None:
    task = TaskFactory()
    t = submitted(task=task, annotator=users["annotator"], clicks=[(20, 60), (100, 150)])
    twin = submitted(task=task, annotator=users["annotator2"], clicks=[(22, 61), (101, 149)])
    submitted(task=task, clicks=[(20, 60), (10, 200)])  # second click elsewhere: not a duplicate
    submitted(clicks=[(20, 60), (100, 150)])  # same actions, another task: not compared
    take(reviewers["c1"], t.pk)
    dup = reviewers["c1"].get(f"/api/review/trajectories/{t.pk}/duplicates/").json()
    assert [d["trajectory_id"] for d in dup["duplicates"]] == [twin.pk]
    assert dup["duplicates"][0]["score"] == 1.0
    data = reviewers["c1"].get(f"/api/review/trajectories/{t.pk}/").json()
    assert [d["trajectory_id"] for d in data["duplicates"]] == [twin.pk]


def test_executability_request_queues_one_replay(
    reviewers, users, django_capture_on_commit_callbacks
) -> None:
    t = submitted(annotator=users["annotator"], steps=1)
    take(reviewers["c1"], t.pk)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        got = reviewers["c1"].post(f"/api/review/trajectories/{t.pk}/executability/")
    assert got.status_code == 202 and got.json()["executability"]["status"] == "queued"
    assert len(callbacks) == 1
    again = reviewers["c1"].post(f"/api/review/trajectories/{t.pk}/executability/")
    assert again.status_code == 409
    state = reviewers["c1"].get(f"/api/review/trajectories/{t.pk}/executability/").json()
    assert state["executability"]["status"] == "queued"


def test_service_refuses_someone_elses_review(reviewers, users) -> None:
    submitted(annotator=users["annotator"], steps=1)
    review = services.review_assign(reviewer=reviewers["r1"])
    assert review is not None
    with pytest.raises(services.ReviewConflict):
        services.review_submit(
            review=review, reviewer=reviewers["r2"], verdict="approve", step_verdicts=approve_all(1)
        )


def test_steps_are_shown_in_screen_pixels_whatever_the_model_convention(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"], steps=0)
    StepFactory(
        trajectory=t, index=0, action=[{"kind": "drag", "point": [500, 500], "end_point": [1000, 0]}],
        coord_convention="relative_1000", screen_width=160, screen_height=210,
    )  # fmt: skip
    Trajectory.objects.filter(pk=t.pk).update(num_steps=1)
    take(reviewers["c1"], t.pk)
    step = reviewers["c1"].get(f"/api/review/trajectories/{t.pk}/").json()["steps"][0]
    assert step["action"] == [{"kind": "drag", "point": [500, 500], "end_point": [1000, 0]}]  # as stored
    assert step["screen_actions"] == [{"kind": "drag", "point": [80.0, 105.0], "end_point": [159.0, 0.0]}]


@pytest.mark.django_db(transaction=True)
def test_concurrent_takes_never_exceed_the_required_reviews(make_user) -> None:
    import threading

    from django.db import connection

    t = submitted(steps=1)
    people = [make_user(f"crowd{i}", Role.REVIEWER) for i in range(6)]
    barrier = threading.Barrier(len(people))
    got: list[int | None] = []

    def work(user) -> None:
        try:
            barrier.wait()
            review = services.review_assign(reviewer=user)
            got.append(review.trajectory_id if review else None)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(u,)) for u in people]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert Review.objects.filter(trajectory=t).count() == 2
    assert sorted(got, key=lambda v: v or 0) == [None] * 4 + [t.pk] * 2


def test_both_fix_the_same_step_with_agreeing_corrections(reviewers, users) -> None:
    t = submitted(annotator=users["annotator"], steps=2)
    r1 = take(reviewers["c1"]).json()["review_id"]
    r2 = take(reviewers["c2"]).json()["review_id"]
    fix1 = [{"index": 0, "verdict": "approve"},
            {"index": 1, "verdict": "fix", "comment": "wrong button", "action_text": "click(start_box='(40,180)')"}]  # fmt: skip
    fix2 = [{"index": 0, "verdict": "approve"},
            {"index": 1, "verdict": "fix", "comment": "submit is lower left", "action_text": "click(point='<point>44 176</point>')"}]  # fmt: skip
    bad = [fix1[0], {**fix1[1], "action_text": "click(start_box='(40,"}]
    assert "does not parse" in submit(reviewers["c1"], r1, "fix", bad).json()["detail"]
    # a corrected point off the step's 160x210 screen is refused as a decision's is, naming the field
    far = [fix1[0], {**fix1[1], "action_text": "click(start_box='(40,900)')"}]
    refused = submit(reviewers["c1"], r1, "fix", far)
    assert refused.status_code == 400
    body = refused.json()
    assert "outside the 160x210 screen" in body["detail"]
    assert body["step_verdicts"][0] == {} and "off screen" in body["step_verdicts"][1]["action_text"][0]
    approve_with_action = [fix1[0], {**fix1[1], "verdict": "reject"}]
    assert (
        "goes with the verdict fix"
        in submit(reviewers["c1"], r1, "reject", approve_with_action).json()["detail"]
    )
    assert submit(reviewers["c1"], r1, "fix", fix1).status_code == 200
    assert submit(reviewers["c2"], r2, "fix", fix2).status_code == 200
    t.refresh_from_db()
    assert t.review_state == "needs_fix"
    stored = Review.objects.get(pk=r2).step_verdicts[1]
    assert stored["action"] == [{"kind": "click", "point": [44.0, 176.0]}]
    assert t.metadata["review"]["disagreeing_steps"] == []  # both said fix on step 1
    assert t.metadata["review"]["flagged_steps"] == [1]
    assert t.metadata["review"]["fix_agreement"] == [
        {"index": 1, "score": 1.0, "agree": True, "reviewers": 2}
    ]
    got = reviewers["c2"].get(f"/api/review/trajectories/{t.pk}/agreement/").json()
    assert got["fix_agreement"] == [{"index": 1, "score": 1.0, "agree": True, "reviewers": 2}]
