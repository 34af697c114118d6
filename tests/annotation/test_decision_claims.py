"""No transaction, row lock or connection is held across an environment call (STYLE 16): a decision
claims the session, commits, calls the environment, then stores behind a fence. On a real env host
(MiniWoB++ in Chromium): during the call the session row can be locked by anyone else and the
request's thread holds no connection; two concurrent decisions on one screen store one step, the
other is refused; a decision whose claim was taken over meanwhile is refused (409) and stores nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from annotation.models import AnnotationSession, Assignment
from annotation.services.common import session_lease
from tests.factories import TaskFactory
from webapp.fleet import services as fleet
from webapp.remote_calls import TransactionHeld
from webapp.settings.env import database_url
from webapp.store.models import Step

pytestmark = pytest.mark.django_db(transaction=True)


def _started(api, users) -> dict[str, Any]:
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    Assignment.objects.create(user=users["annotator"], task=task)
    deadline = time.monotonic() + 60
    while fleet.registry().idle_count("browser") < 1:
        assert time.monotonic() < deadline, "no browser environment booted"
        time.sleep(0.1)
    started = api("annotator").post("/api/annotation/sessions/", {}, format="json")
    assert started.status_code == 201, started.content
    return started.json()


def _click(obs_version: int) -> dict[str, Any]:
    """A click on the page's blank top-left corner: the episode goes on."""
    return {"kind": "override", "obs_version": obs_version, "thought": "t",
            "action_text": "click(start_box='(3,3)')", "convention": "screen"}  # fmt: skip


@pytest.fixture
def around_env_calls(monkeypatch) -> Iterator[Callable[..., None]]:
    """`around(hook, after=None)`: every real env call first runs `hook(op)` in the calling thread,
    and `after(op)` once the environment answered."""
    real = fleet.env_call

    def install(hook: Callable[[str], None], after: Callable[[str], None] | None = None) -> None:
        def observed(**kwargs: Any) -> dict[str, Any]:
            hook(kwargs["op"])
            out = real(**kwargs)
            if after is not None:
                after(kwargs["op"])
            return out

        monkeypatch.setattr(fleet, "env_call", observed)

    yield install


def _terminate_own_connection(op: str) -> None:
    """After the environment stepped: PostgreSQL terminates the request's database connection (as
    pg_terminate_backend, a restart or a failover does), before the decision is stored."""
    if op != "step":
        return
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as c:
        assert c.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)


def _row_lockable_elsewhere(session_id: int) -> bool:
    """Another connection can lock the session row at once (NOWAIT): nobody holds it."""
    with psycopg.connect(database_url(connection.settings_dict)) as c:
        try:
            c.execute(
                "SELECT id FROM annotation_annotationsession WHERE id = %s FOR UPDATE NOWAIT", [session_id]
            )
            return True
        except psycopg.errors.LockNotAvailable:
            return False


def test_the_environment_step_runs_with_no_transaction_lock_or_connection_held(
    api, users, live_stack, around_env_calls
):
    state = _started(api, users)
    seen: list[dict[str, Any]] = []

    def check(op: str) -> None:
        seen.append(
            {
                "op": op,
                "in_atomic": connection.in_atomic_block,
                "claimed": AnnotationSession.objects.get(pk=state["id"]).decision_claim != "",
            }
        )
        connection.close()  # the query above took a connection; what matters is what the service held
        seen[-1]["lockable"] = _row_lockable_elsewhere(state["id"])

    around_env_calls(check)
    decided = api("annotator").post(
        f"/api/annotation/sessions/{state['id']}/decide/", _click(1), format="json"
    )
    assert decided.status_code == 200, decided.content
    assert seen == [{"op": "step", "in_atomic": False, "claimed": True, "lockable": True}]
    session = AnnotationSession.objects.get(pk=state["id"])
    assert session.decision_claim == "" and session.obs_version == 2
    assert Step.objects.filter(trajectory_id=session.trajectory_id).count() == 1
    # The guard itself: an environment call inside a transaction is refused before it is sent.
    with pytest.raises(TransactionHeld), transaction.atomic():
        fleet.env_call(lease=session_lease(session), op="observe")


def _decide_in_thread(
    api, session_id: int, body: dict[str, Any], out: list, start: threading.Barrier | None = None
) -> threading.Thread:
    def run() -> None:
        try:
            if start is not None:
                start.wait()
            out.append(
                api("annotator").post(f"/api/annotation/sessions/{session_id}/decide/", body, format="json")
            )
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_two_concurrent_decisions_on_one_screen_store_one_step_and_refuse_the_other(
    api, users, live_stack, around_env_calls
):
    state = _started(api, users)
    around_env_calls(lambda op: time.sleep(0.5))  # a slow environment: the two requests overlap
    answers: list = []
    start = threading.Barrier(2)
    threads = [_decide_in_thread(api, state["id"], _click(1), answers, start) for _ in range(2)]
    for t in threads:
        t.join(timeout=120)
    assert sorted(a.status_code for a in answers) == [200, 409], [a.content for a in answers]
    session = AnnotationSession.objects.get(pk=state["id"])
    assert list(Step.objects.filter(trajectory_id=session.trajectory_id).values_list("index", flat=True)) == [
        0
    ]
    # The next screen takes the next decision: exactly one more step.
    again = api("annotator").post(
        f"/api/annotation/sessions/{state['id']}/decide/", _click(session.obs_version), format="json"
    )
    assert again.status_code == 200, again.content
    assert list(
        Step.objects.filter(trajectory_id=session.trajectory_id)
        .order_by("index")
        .values_list("index", flat=True)
    ) == [0, 1]


@override_settings(ANNOTATION_CLAIM_TTL_S=0)
def test_a_decision_whose_claim_was_taken_over_is_refused_and_stores_nothing(
    api, users, live_stack, around_env_calls
):
    """The first decision's claim lapses (TTL 0) and a second decision takes it while the first waits
    on the environment. The second cannot know whether the first ran: it reads the screen again and
    is refused (409, decide on the new screen); the first ran but lost its claim: refused with 409,
    nothing stored, and the screen read again after its action. A decision on that screen is stored."""
    state = _started(api, users)
    calls = []
    second: list = []

    def hook(op: str) -> None:
        calls.append(op)
        if len(calls) == 1:  # the first decision, between its claim and its environment call
            _decide_in_thread(api, state["id"], {**_click(1), "thought": "second"}, second).join(timeout=120)

    around_env_calls(hook)
    first = api("annotator").post(
        f"/api/annotation/sessions/{state['id']}/decide/", {**_click(1), "thought": "first"}, format="json"
    )
    assert second[0].status_code == 409 and "read again" in second[0].json()["detail"], second[0].content
    assert first.status_code == 409, first.content
    assert "discarded" in first.json()["detail"]
    assert calls == ["step", "observe", "observe"]  # the second's re-read, the first's step, its re-read
    session = AnnotationSession.objects.get(pk=state["id"])
    assert not Step.objects.filter(trajectory_id=session.trajectory_id).exists()
    assert session.obs_version == 3 and session.decision_claim == ""
    again = api("annotator").post(
        f"/api/annotation/sessions/{state['id']}/decide/", {**_click(3), "thought": "third"}, format="json"
    )
    assert again.status_code == 200, again.content
    steps = list(Step.objects.filter(trajectory_id=session.trajectory_id).values_list("thought", flat=True))
    assert steps == ["third"]


def test_a_decision_whose_database_connection_is_terminated_before_its_store_is_stored_once(
    api, users, live_stack, around_env_calls
):
    """PostgreSQL terminates the request's connection after the environment stepped: the store is
    tried again on a new connection; the decision is answered 200 and its step stored exactly once."""
    state = _started(api, users)
    around_env_calls(lambda op: None, after=_terminate_own_connection)
    decided = api("annotator").post(
        f"/api/annotation/sessions/{state['id']}/decide/", _click(1), format="json"
    )
    assert decided.status_code == 200, decided.content
    session = AnnotationSession.objects.get(pk=state["id"])
    steps = list(
        Step.objects.filter(trajectory_id=session.trajectory_id).values_list("index", "decision_meta")
    )
    assert [(i, meta["obs_version"]) for i, meta in steps] == [(0, 1)]
    assert session.obs_version == 2 and session.decision_claim == ""
    assert decided.json()["step"] == 0 and "store" in decided["Server-Timing"]


def test_a_decision_that_cannot_be_stored_leaves_the_screen_read_again(
    api, users, live_stack, around_env_calls, monkeypatch
):
    """The store fails for good (no try left after the connection was terminated): the answer is a
    503 (never a 500), nothing is stored, and the session shows the environment's screen after the
    action that ran (a new version), so a decision on the old screen is refused; one on the new
    screen is stored."""
    from annotation.services import decisions

    monkeypatch.setattr(decisions, "STORE_RETRY_WAITS_S", ())
    state = _started(api, users)
    around_env_calls(lambda op: None, after=_terminate_own_connection)
    url = f"/api/annotation/sessions/{state['id']}/decide/"
    failed = api("annotator").post(url, _click(1), format="json")
    assert failed.status_code == 503 and failed["Retry-After"], failed.content
    session = AnnotationSession.objects.get(pk=state["id"])
    assert not Step.objects.filter(trajectory_id=session.trajectory_id).exists()
    assert session.obs_version == 2 and session.decision_claim == ""
    around_env_calls(lambda op: None)  # the database is back
    assert api("annotator").post(url, _click(1), format="json").status_code == 409
    assert api("annotator").post(url, _click(2), format="json").status_code == 200
    assert Step.objects.filter(trajectory_id=session.trajectory_id).count() == 1


def test_a_decision_after_one_whose_process_died_reads_the_screen_again(api, users, live_stack):
    """A claim left by a decision whose process died (it lapses after ANNOTATION_CLAIM_TTL_S): the
    next decision cannot know whether that one ran, so it reads the screen again and is refused."""
    state = _started(api, users)
    AnnotationSession.objects.filter(pk=state["id"]).update(
        decision_claim="died", decision_claimed_at=timezone.now() - timedelta(minutes=10)
    )
    url = f"/api/annotation/sessions/{state['id']}/decide/"
    refused = api("annotator").post(url, _click(1), format="json")
    assert refused.status_code == 409 and "read again" in refused.json()["detail"], refused.content
    session = AnnotationSession.objects.get(pk=state["id"])
    assert session.obs_version == 2 and session.decision_claim == ""
    assert api("annotator").post(url, _click(2), format="json").status_code == 200
