"""V(s) from the verifier, a judge (a local deterministic HTTP judge standing in for a judge model)
and two agreeing reviewers, chosen per pool; every decision records validator and time."""

from __future__ import annotations

import pytest

from tests.flywheel.conftest import make_trajectory
from webapp.flywheel.services.validation import (
    ValidationError,
    parse_judge_reply,
    pool_validation_set,
    trajectory_validate_auto,
    validate_pending,
)
from webapp.store.models import ReviewState, Trajectory

pytestmark = pytest.mark.django_db


def test_parse_judge_reply() -> None:
    assert parse_judge_reply("looks right\nV: 1", 4).correct_prefix == 4
    verdict = parse_judge_reply("V=0\nprefix: 9", 3)
    assert (verdict.value, verdict.correct_prefix) == (0, 3)  # clipped to the trajectory
    assert parse_judge_reply("V: 0", 3).correct_prefix == 0
    with pytest.raises(ValidationError):
        parse_judge_reply("I think it worked", 3)


def test_verifier_routes_success_to_sft_and_failures_to_ct(tasks) -> None:
    ok = make_trajectory(tasks[0], reward=1.0)
    bad = make_trajectory(tasks[0], reward=0.0)
    crashed = make_trajectory(tasks[0], reward=0.0, status="crashed")
    assert validate_pending(pool_id=tasks[0].pool_id) == {"validated": 3, "v1": 1, "pending": 0, "errors": 0}
    for traj, value, route in ((ok, 1, "sft"), (bad, 0, "ct"), (crashed, 0, "ct")):
        traj.refresh_from_db()
        assert (traj.validation, traj.route, traj.validator) == (value, route, "verifier")
        assert traj.validated_at is not None


def test_judge_validator_records_prefix(tasks, judge) -> None:
    pool_validation_set(pool_id=tasks[0].pool_id, mode="judge", judge_url=judge.url, judge_model="orm-1")
    good = make_trajectory(tasks[0], reward=1.0, steps=2)
    bad = make_trajectory(tasks[0], reward=0.0, steps=3)
    validate_pending(pool_id=tasks[0].pool_id)
    good.refresh_from_db()
    bad.refresh_from_db()
    assert (good.validation, good.validator) == (1, "judge:orm-1")
    assert (bad.validation, bad.route) == (0, "ct")
    assert bad.metadata["judge"]["correct_prefix"] == 2
    assert len(judge.requests) == 2
    texts = [" ".join(p.get("text", "") for p in r["messages"][-1]["content"]) for r in judge.requests]
    assert sum("Click OK (2)." in t for t in texts) == 1
    # The one judge (workers.policy.judge): every thought and action, screenshots of the last steps.
    assert all("Thought:" in t and "Action:" in t and "Verifier reward:" in t for t in texts)
    assert judge.requests[0]["model"] == "orm-1" and judge.requests[0]["temperature"] == 0.0


def test_judge_needs_url_and_unreachable_judge_is_an_error(tasks) -> None:
    with pytest.raises(ValidationError):
        pool_validation_set(pool_id=tasks[0].pool_id, mode="judge", judge_url="")
    pool_validation_set(pool_id=tasks[0].pool_id, mode="judge", judge_url="http://127.0.0.1:9/v1")
    traj = make_trajectory(tasks[0])
    assert validate_pending(pool_id=tasks[0].pool_id)["errors"] == 1
    traj.refresh_from_db()
    assert traj.validation is None


def test_human_mode_waits_for_two_reviewers(tasks) -> None:
    pool_validation_set(pool_id=tasks[0].pool_id, mode="human")
    traj = make_trajectory(tasks[0], source="annotation", reward=1.0)
    assert trajectory_validate_auto(trajectory=traj) is None
    traj.refresh_from_db()
    assert traj.review_state == ReviewState.PENDING and traj.validation is None  # in the review queue
    Trajectory.objects.filter(pk=traj.pk).update(review_state=ReviewState.REJECTED)
    traj.refresh_from_db()
    done = trajectory_validate_auto(trajectory=traj)
    assert done is not None and (done.validation, done.validator) == (0, "human-review")


@pytest.mark.django_db(transaction=True)
def test_the_judge_is_asked_with_no_transaction_open(tasks) -> None:
    """STYLE 16: while the judge model answers, no connection of the test database is inside a
    transaction, and validating several trajectories in a row still works (no cursor held)."""
    import psycopg
    from django.db import connection

    from tests.chat_server import chat_server
    from webapp.settings.env import database_url

    params = connection.settings_dict
    open_transactions: list[int] = []

    def verdict(body: dict) -> str:
        with psycopg.connect(database_url(params, name="postgres")) as c:
            row = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state LIKE 'idle in transaction%%'",
                [params["NAME"]],
            ).fetchone()
        open_transactions.append(int(row[0]) if row else -1)
        return "V: 1"

    with chat_server(verdict) as judge:
        pool_validation_set(pool_id=tasks[0].pool_id, mode="judge", judge_url=str(judge.url), judge_model="j")
        for reward in (1.0, 0.0, 1.0):
            make_trajectory(tasks[0], reward=reward, steps=2)
        counts = validate_pending(pool_id=tasks[0].pool_id)
    assert counts == {"validated": 3, "v1": 3, "pending": 0, "errors": 0}
    assert open_transactions == [0, 0, 0]
