"""Celery tasks of RL runs: receive ids, load rows, call services.

rollout_slot        queue `rollout`: one environment slot of a run (rl_control.engine.worker)
train_chunk         queue `train` (concurrency 1): N trainer updates, then the next chunk
                    (rl_control.engine.learner)
serving_start       queue `default`, at launch: the run's policy servers and slots (before its trainer)
engine_watch        queue `default`, beat: restart dead slots / trainer chunks of running runs
runs_enforce_budgets  queue `default`, beat: finish running runs whose budget ran out
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task
from celery.result import allow_join_result
from django.conf import settings
from django.db import DatabaseError

from rl_control.engine.slots import slot_enqueue, slot_fail
from rl_control.models import Run, RunStatus
from rl_control.services import state
from webapp.overload import database_lost, first_line

log = logging.getLogger(__name__)
REQUEUED = frozenset({"continue", "waiting", "yielded"})  # slot outcomes that queue the slot again


@shared_task(name="rl_control.tasks.runs_enforce_budgets", ignore_result=True)
def runs_enforce_budgets() -> list[int]:
    """Finish every running run over its budget; returns the ids it finished (for logs and tests).

    Meant for celery beat (e.g. once a minute); the schedule lives in the settings.
    """
    finished = []
    for run in Run.objects.filter(status=RunStatus.RUNNING).only("pk"):
        if state.run_enforce_budget(run=run):
            finished.append(run.pk)
    return finished


@shared_task(name="rl_control.tasks.rollout_slot", ignore_result=True)
def rollout_slot(run_id: int, slot: int, generation: int) -> str:
    """Roll out on slot `slot` of run `run_id` while this task's `generation` owns it."""
    from rl_control.engine.worker import slot_loop

    try:
        if not Run.objects.filter(pk=run_id).exists():
            return "gone"
        # env calls wait on the env host's reply (fleet.env_call runs on the host's own queue, so
        # this cannot deadlock). allow_join_result flips a process-wide flag: run rollout workers
        # with the prefork or solo pool (one task per process), not threads.
        with allow_join_result():
            outcome = slot_loop(run_id, slot, generation)
    except Exception as exc:
        # PostgreSQL terminating the connection (a restart, pg_terminate_backend) is expected: one
        # line, and the slot restarts as after any failure. Anything else keeps its traceback.
        lost = database_lost(exc)
        if lost:
            log.warning("run %s slot %s: the database connection was lost (%s); any episode in flight "
                        "is abandoned and the slot restarts", run_id, slot, first_line(exc))  # fmt: skip
        else:
            log.exception("run %s slot %s: rollout task failed; the slot restarts", run_id, slot)
        time.sleep(2.0)  # no hot crash loop
        _slot_fail(run_id, slot, generation)
        if lost:
            return "connection lost"
        raise
    if outcome in REQUEUED:
        slot_enqueue(run_id, slot, generation)
    return outcome


def _slot_fail(run_id: int, slot: int, generation: int) -> None:
    """`slot_fail`; while the database is still out of reach (PostgreSQL restarting), the slot's
    heartbeat stops instead and the supervisor reclaims it (rl_control.engine.slots)."""
    try:
        slot_fail(run_id, slot, generation)
    except DatabaseError as exc:
        if not database_lost(exc):
            raise
        log.warning("run %s slot %s: the database is out of reach (%s); the slot is reclaimed when its "
                    "heartbeat lapses", run_id, slot, first_line(exc))  # fmt: skip


@shared_task(name="rl_control.tasks.train_chunk", ignore_result=True)
def train_chunk(run_id: int, chunk: int) -> str:
    """One chunk of trainer updates for run `run_id`; enqueues the next chunk when it is allowed to."""
    from rl_control.engine.learner import learner_chunk

    try:
        if not Run.objects.filter(pk=run_id).exists():
            return "gone"
        outcome = learner_chunk(run_id=run_id, chunk=chunk)
    except DatabaseError as exc:  # before the chunk started (a loss during it is handled there)
        if not database_lost(exc):
            raise
        log.warning("run %s: trainer chunk %s found the database out of reach (%s); the trainer restarts "
                    "when its heartbeat lapses", run_id, chunk, first_line(exc))  # fmt: skip
        return "connection lost"
    if outcome == "continue":
        train_chunk.apply_async(args=[run_id, chunk + 1], queue=settings.RL_TRAIN_QUEUE)
    return outcome


@shared_task(name="rl_control.tasks.serving_start", bind=True, ignore_result=True, max_retries=3)
def serving_start(self: Any, run_id: int) -> str:
    """Start a launched run's policy servers and rollout slots (queue RL_SERVING_START_QUEUE): its
    first episodes do not wait for the train worker, which another run may hold. A lost database
    connection (PostgreSQL restarted, the connection terminated) is tried again shortly."""
    from rl_control.engine.control import serving_start_run
    from rl_control.engine.serving import ServingError

    try:
        if not Run.objects.filter(pk=run_id).exists():
            return "gone"
        return serving_start_run(run_id=run_id)
    except ServingError as exc:  # the trainer starts them again and fails the run if it cannot
        log.warning("run %s: its policy servers did not start at launch: %s", run_id, exc)
        return "failed"
    except DatabaseError as exc:
        raise self.retry(exc=exc, countdown=2**self.request.retries) from exc


@shared_task(name="rl_control.tasks.engine_watch", ignore_result=True)
def engine_watch() -> list[int]:
    """Restart what died: slots without heartbeat, a trainer chunk without heartbeat (running runs)."""
    from rl_control.engine.control import engine_watch_run

    return [run.pk for run in Run.objects.filter(status=RunStatus.RUNNING) if engine_watch_run(run=run)]
