"""A run's state machine and progress: the transitions, the trainer's counters, the budget. What the
engine (rl_control.engine) and its Celery tasks call; below rl_control.services.runs, whose launch
and resume start the engine, so nothing the engine runs imports those back.

State machine (every change is one conditional UPDATE; an illegal one raises `RunTransitionError`):

    created ──launch──▶ running ◀──resume── paused
       │                  │ └──────pause──────▲
       └──stop / fail──▶ stopped / failed ◀───┤ (stop, fail from running or paused too)
                          running / paused ──finish──▶ finished

Pause, stop, finish and fail stop the run's own policy servers (rl_control.engine.serving); every
rollout task and the trainer look at the run's status at each episode / loop and stop by themselves
(an episode in flight at a pause is finished and kept). The trainer reports through `run_progress`
(and `rl_control.services.metrics.metrics_record`).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import DurationField, ExpressionWrapper, F, FloatField, Value
from django.db.models.functions import Coalesce, Extract, Greatest, Now
from django.utils import timezone

from rl_control.events import RunStatusEvent, publish_run_status
from rl_control.models import Run, RunStatus


class RunError(Exception):
    """A request about a run that cannot be carried out as asked (the API answers 400)."""


class RunTransitionError(RunError):
    """The run is not in a state that allows this action (the API answers 409)."""


# action → (statuses it is allowed from, status it leads to)
TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "launch": ((RunStatus.CREATED,), RunStatus.RUNNING),
    "pause": ((RunStatus.RUNNING,), RunStatus.PAUSED),
    "resume": ((RunStatus.PAUSED,), RunStatus.RUNNING),
    "stop": ((RunStatus.CREATED, RunStatus.RUNNING, RunStatus.PAUSED), RunStatus.STOPPED),
    "finish": ((RunStatus.RUNNING, RunStatus.PAUSED), RunStatus.FINISHED),
    "fail": ((RunStatus.CREATED, RunStatus.RUNNING, RunStatus.PAUSED), RunStatus.FAILED),
}
MAX_ERROR_CHARS = 5000


def status_payload(run: Run) -> RunStatusEvent:
    return {
        "type": "run.status",
        "run_id": run.pk,
        "status": run.status,
        "error": run.error,
        "updates_done": run.updates_done,
        "episodes_done": run.episodes_done,
        "policy_version": run.policy_version,
        "samples": run.samples,
        "headline_success": run.headline_success,
    }


def run_status_publish(run: Run) -> None:
    transaction.on_commit(partial(publish_run_status, status_payload(run)))


# ---------------------------------------------------------------------------------- transitions

# Seconds of the current running spell, computed by PostgreSQL inside the UPDATE (0 when not running).
# Never negative: Now() is the transaction's start, which can precede a resumed_at set inside it.
_SPELL_SECONDS = Greatest(
    Coalesce(
        Extract(ExpressionWrapper(Now() - F("resumed_at"), output_field=DurationField()), "epoch"),
        Value(0.0),
        output_field=FloatField(),
    ),
    Value(0.0),
    output_field=FloatField(),
)


def run_transition(run: Run, action: str, **fields: Any) -> Run:
    allowed, target = TRANSITIONS[action]
    changed = Run.objects.filter(pk=run.pk, status__in=allowed).update(
        status=target, updated_at=timezone.now(), **fields
    )
    run.refresh_from_db()
    if changed != 1:
        raise RunTransitionError(
            f"cannot {action} run {run.pk}: it is {run.status}; {action} is allowed from {', '.join(allowed)}"
        )
    run_status_publish(run)
    if target != RunStatus.RUNNING:
        transaction.on_commit(partial(_serving_stop, run.pk))
    return run


def _serving_stop(run_id: int) -> None:
    """Paused or ended: the run's own policy servers exit (started again on resume), and it leaves
    the fair share of the workers (no run yields to it any more)."""
    from rl_control.engine import share
    from rl_control.engine.serving import serving_stop

    serving_stop(run_id)
    share.forget(run_id=run_id)


def _end_spell() -> dict[str, Any]:
    return {"running_seconds": F("running_seconds") + _SPELL_SECONDS, "resumed_at": None}


def run_pause(*, run: Run) -> Run:
    return run_transition(run, "pause", **_end_spell())


def run_stop(*, run: Run) -> Run:
    return run_transition(run, "stop", finished_at=timezone.now(), **_end_spell())


def run_finish(*, run: Run) -> Run:
    return run_transition(run, "finish", finished_at=timezone.now(), **_end_spell())


def run_fail(*, run: Run, error: str) -> Run:
    """Any non-terminal status → failed, with a readable `error` (required)."""
    if not error.strip():
        raise RunError("a failed run needs an error message")
    return run_transition(
        run, "fail", error=error.strip()[:MAX_ERROR_CHARS], finished_at=timezone.now(), **_end_spell()
    )


# ------------------------------------------------------------------------------------- progress


def run_elapsed_seconds(run: Run, *, now: datetime | None = None) -> float:
    """Running time so far, pauses excluded (from the row as loaded)."""
    spell = ((now or timezone.now()) - run.resumed_at).total_seconds() if run.resumed_at else 0.0
    return run.running_seconds + max(0.0, spell)


def run_budget_exhausted(run: Run) -> str | None:
    """Which budget limit the run has reached, as a sentence, or None."""
    budget = run.config.get("budget") or {}
    if budget.get("max_updates") is not None and run.updates_done >= budget["max_updates"]:
        return f"reached max_updates = {budget['max_updates']}"
    if budget.get("max_episodes") is not None and run.episodes_done >= budget["max_episodes"]:
        return f"reached max_episodes = {budget['max_episodes']}"
    if budget.get("max_minutes") is not None and run_elapsed_seconds(run) >= 60.0 * budget["max_minutes"]:
        return f"reached max_minutes = {budget['max_minutes']}"
    return None


def run_budget_fraction(run: Run) -> float:
    """How much of the run's budget is spent, in [0, 1]: the largest fraction over its limits
    (updates, episodes, minutes); 0 when it has none. Learning-rate schedules anneal over this."""
    budget = run.config.get("budget") or {}
    spent = (
        (run.updates_done, budget.get("max_updates")),
        (run.episodes_done, budget.get("max_episodes")),
        (run_elapsed_seconds(run) / 60.0, budget.get("max_minutes")),
    )
    return min(1.0, max([done / limit for done, limit in spent if limit], default=0.0))


def run_enforce_budget(*, run: Run) -> bool:
    """Finish a running run whose budget is spent; True when this call finished it."""
    run.refresh_from_db()
    if run.status != RunStatus.RUNNING or run_budget_exhausted(run) is None:
        return False
    try:
        run_finish(run=run)
    except RunTransitionError:  # paused or stopped meanwhile: nothing to finish
        return False
    return True


def run_episode_done(*, run_id: int) -> None:
    """A rollout finished: the run's episode count moves at once (the dashboard's counter and episode
    list follow it; the trainer's next update sets the exact count) and an episode budget is enforced
    between updates, not only at them — a first update can take minutes while episodes finish."""
    if not Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
        episodes_done=F("episodes_done") + 1, updated_at=timezone.now()
    ):
        return
    run = Run.objects.get(pk=run_id)
    run_status_publish(run)
    run_enforce_budget(run=run)


def run_progress(
    *,
    run: Run,
    updates_done: int,
    episodes_done: int,
    policy_version: int,
    samples: int,
) -> Run:
    """Record the trainer's counters on a running or paused run; finishes it when the budget is spent.

    Raises `RunTransitionError` when the run is no longer running or paused (the trainer stops).
    """
    changed = Run.objects.filter(pk=run.pk, status__in=(RunStatus.RUNNING, RunStatus.PAUSED)).update(
        updates_done=updates_done,
        episodes_done=episodes_done,
        policy_version=policy_version,
        samples=samples,
        updated_at=timezone.now(),
    )
    run.refresh_from_db()
    if changed != 1:
        raise RunTransitionError(f"run {run.pk} is {run.status}; progress is only recorded while it runs")
    run_status_publish(run)
    run_enforce_budget(run=run)
    return run
