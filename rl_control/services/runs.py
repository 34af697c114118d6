"""Writes for RL runs: create / fork, the control state machine, progress and budget.

State machine (every change is one conditional UPDATE; an illegal one raises `RunTransitionError`):

    created ──launch──▶ running ◀──resume── paused
       │                  │ └──────pause──────▲
       └──stop / fail──▶ stopped / failed ◀───┤ (stop, fail from running or paused too)
                          running / paused ──finish──▶ finished

The engine (rl_control.engine) executes running runs: `run_launch` and `run_resume` start a trainer
chunk once the transition commits (the trainer starts the rollout slots); pause, stop, finish and
fail stop the run's own policy servers (rl_control.engine.serving); every rollout task and the
trainer look at the run's status at each episode / loop and stop by themselves (an episode in
flight at a pause is finished and kept).
The trainer reports through `run_progress` and `metrics_record`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import DurationField, ExpressionWrapper, F, FloatField, Value
from django.db.models.functions import Coalesce, Extract, Greatest, Now
from django.utils import timezone
from pydantic import ValidationError

from rl_control.events import RunStatusEvent, publish_run_status
from rl_control.models import Run, RunMode, RunStatus
from rl_control.presets import PRESETS, preset_overrides
from rl_control.selectors import start_profile
from webapp.flywheel.selectors import rl_start_checkpoint
from webapp.store.models import Checkpoint, Task, TaskPool
from webapp.store.selectors import runnable_env_kinds
from workers.rl.config import errors_by_field
from workers.rl.run_config import (
    MIXED_KIND,
    RUN_CONFIGS,
    EnvSettings,
    ServingSettings,
    deep_merge,
    env_kind_for,
    run_config_build,
)


class RunError(Exception):
    """A request about a run that cannot be carried out as asked (the API answers 400)."""


class RunConfigError(ValueError):
    """Invalid run input; `errors` maps "section.field" (or an argument's name) to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {key: list(messages) for key, messages in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(self.errors.items())))


class RunPreflightError(RunConfigError):
    """What a run needs before it may start is missing (the API answers 400 {field: [messages]})."""


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


def _publish_status(run: Run) -> None:
    transaction.on_commit(partial(publish_run_status, status_payload(run)))


# ---------------------------------------------------------------------------------------- create


def _task_errors(*, pool: TaskPool | None, task_ids: list[int], env_kind: str) -> dict[str, list[str]]:
    if pool is None and not task_ids:
        return {"pool": ["choose a task pool or list task_ids"]}
    if not task_ids:
        return {}
    tasks = dict(Task.objects.filter(pk__in=task_ids).values_list("pk", "pool_id"))
    missing = [t for t in task_ids if t not in tasks]
    if missing:
        return {"task_ids": [f"no such task: {', '.join(map(str, missing))}"]}
    if pool is not None:
        outside = [t for t in task_ids if tasks[t] != pool.pk]
        if outside:
            return {"task_ids": [f"not in pool {pool.name}: {', '.join(map(str, outside))}"]}
    kinds = set(Task.objects.filter(pk__in=task_ids).values_list("env_kind", flat=True))
    if env_kind != MIXED_KIND and kinds - {env_kind}:
        return {
            "task_ids": [
                f"tasks use env kind {', '.join(sorted(kinds))}; env.kind is {env_kind} (mixed: each its own)"
            ]
        }
    return {}


def run_create(
    *,
    user: Any,
    name: str,
    config: Mapping[str, Any] | None = None,
    preset: str = "",
    algorithm: str | None = None,
    mode: str | None = None,
    pool: TaskPool | None = None,
    parent: Run | None = None,
    start_checkpoint: Checkpoint | None = None,
) -> Run:
    """Create a run in `created` from a preset (optional) with `config` applied over it.

    `algorithm` and `mode` default to the preset's (else grpo / async); `start_checkpoint` to the
    newest checkpoint promoted to "RL start" (the flywheel), else the run starts from a fresh model.
    Raises `RunConfigError` with every problem at once, keyed "section.field" or by the argument's name.
    """
    errors: dict[str, list[str]] = {}
    base: Mapping[str, Any] = {}
    if preset:
        if preset not in PRESETS:
            raise RunConfigError({"preset": [f"unknown preset; choose one of {sorted(PRESETS)}"]})
        chosen = PRESETS[preset]
        if algorithm and algorithm != chosen.algorithm:
            errors["algorithm"] = [f"preset {preset} is {chosen.algorithm}"]
        if start_checkpoint is None and parent is None:
            start_checkpoint = rl_start_checkpoint()
        profile = start_profile(start_checkpoint, _endpoints_of(config))
        base, algorithm, mode = preset_overrides(preset, profile), chosen.algorithm, mode or chosen.mode
    algorithm, mode = algorithm or "grpo", mode or "async"
    if not name.strip():
        errors["name"] = ["must not be blank"]
    if mode not in RunMode.values:
        errors["mode"] = [f"must be one of {RunMode.values}"]
    full: dict[str, Any] = {}
    try:
        merged = _with_pool_kind(deep_merge(base, config or {}), pool)
        full = run_config_check(algorithm=algorithm, config=_with_host_defaults(merged))
    except RunConfigError as exc:
        errors.update(exc.errors)
    if full:
        errors.update(_task_errors(pool=pool, task_ids=full["task_ids"], env_kind=full["env"]["kind"]))
        errors.update(_endpoint_errors(full))
    if errors:
        raise RunConfigError(errors)
    if start_checkpoint is None and parent is None:
        start_checkpoint = rl_start_checkpoint()
    run = Run.objects.create(
        name=name.strip()[:200],
        algorithm=algorithm,
        mode=mode,
        preset=preset,
        pool=pool,
        config=full,
        parent=parent,
        start_checkpoint=start_checkpoint,
        created_by=user,
    )
    if full["serving"]["endpoints"].strip():
        from rl_control.engine.serving import run_secret_make

        run_secret_make(run)
    _publish_status(run)
    return run


def run_config_check(*, algorithm: str, config: Any) -> dict[str, Any]:
    """`config` for `algorithm` validated by the run config's model, defaults filled in; raises
    `RunConfigError` {"section.field": [messages]} listing every problem (hostile input included)."""
    if algorithm not in RUN_CONFIGS:
        raise RunConfigError({"algorithm": [f"must be one of {sorted(RUN_CONFIGS)}"]})
    if not isinstance(config, Mapping):
        raise RunConfigError({"config": ["must be a JSON object"]})
    try:
        return run_config_build(algorithm=algorithm, config=config)
    except ValidationError as exc:
        errors = errors_by_field(exc)
    for other in set(RUN_CONFIGS) - {algorithm}:
        if other in errors:
            errors[other] = [f"only for algorithm {other}; this run uses {algorithm}"]
    raise RunConfigError(errors)


def _endpoint_errors(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """A run's external endpoints must not be servers the platform owns (the annotation model's,
    another run's, a platform service): the engine pushes weights there."""
    from rl_control.engine.serving import platform_endpoint_problem

    urls = ServingSettings.model_validate(config.get("serving") or {}).urls()
    problems = [p for url in urls if (p := platform_endpoint_problem(url))]
    return {"serving.endpoints": problems} if problems else {}


def _endpoints_of(config: Mapping[str, Any] | None) -> str:
    serving = (config or {}).get("serving")
    endpoints = serving.get("endpoints", "") if isinstance(serving, Mapping) else ""
    return endpoints if isinstance(endpoints, str) else ""


def _with_pool_kind(config: Mapping[str, Any], pool: TaskPool | None) -> dict[str, Any]:
    """`config` with env.kind, when it leaves it open, taken from the tasks the run would play (its
    task_ids, else its pool's enabled, supported tasks): their kind, "mixed" when they mix."""
    out = dict(config)
    env = out.get("env", {})
    task_ids = out.get("task_ids") or []
    if not isinstance(env, Mapping) or "kind" in env or not isinstance(task_ids, list):
        return out  # set by the caller (or malformed: run_config_check says so)
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in task_ids):
        return out
    kind = env_kind_for(runnable_env_kinds(pool_id=pool.pk if pool else None, task_ids=task_ids))
    if kind is not None:
        out["env"] = {**env, "kind": kind}
    return out


def _with_host_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with what it leaves open that depends on the deployment filled in: the environments
    in parallel (`preflight.host_parallel_envs`: the fleet's environments of the run's kind, else the
    cores), so a run on a 2-core machine does not ask for 8."""
    from rl_control.engine.preflight import host_parallel_envs

    out = dict(config)
    env = out.get("env", {})
    if not isinstance(env, Mapping) or "parallel_envs" in env:
        return out  # set by the caller (or not a section at all: run_config_check says so)
    env = dict(env)
    kind = env.get("kind", EnvSettings.model_fields["kind"].default)
    if isinstance(kind, str):
        env["parallel_envs"] = host_parallel_envs(kind)[0]
        out["env"] = env
    return out


def run_fork(
    *,
    run: Run,
    user: Any,
    checkpoint: Checkpoint | None = None,
    name: str = "",
    config: Mapping[str, Any] | None = None,
) -> Run:
    """A new `created` run with `run`'s config (plus overrides) starting from one of its checkpoints.

    `checkpoint` must belong to `run` (or be the checkpoint `run` started from); when omitted, the
    newest checkpoint of `run` is used, else the one it started from.
    """
    if checkpoint is None:
        checkpoint = run.checkpoints.order_by("-created_at", "-id").first() or run.start_checkpoint
    elif checkpoint.run_id != run.pk and checkpoint.pk != run.start_checkpoint_id:
        raise RunConfigError(
            {"checkpoint": [f"checkpoint {checkpoint.version} does not belong to run {run.pk}"]}
        )
    return run_create(
        user=user,
        name=name or f"{run.name} (fork)",
        config=deep_merge(run.config, config or {}),
        preset=run.preset if run.preset in PRESETS else "",  # a fork keeps its preset's name
        algorithm=run.algorithm,
        mode=run.mode,
        pool=run.pool,
        parent=run,
        start_checkpoint=checkpoint,
    )


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


def _transition(run: Run, action: str, **fields: Any) -> Run:
    allowed, target = TRANSITIONS[action]
    changed = Run.objects.filter(pk=run.pk, status__in=allowed).update(
        status=target, updated_at=timezone.now(), **fields
    )
    run.refresh_from_db()
    if changed != 1:
        raise RunTransitionError(
            f"cannot {action} run {run.pk}: it is {run.status}; {action} is allowed from {', '.join(allowed)}"
        )
    _publish_status(run)
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


def _engine_start(run: Run) -> None:
    from rl_control.engine.control import engine_start

    engine_start(run=run)


def run_launch(*, run: Run) -> Run:
    """created → running, and the engine starts once this commits. Raises `RunPreflightError` (and
    changes nothing) when something the run needs is missing (rl_control.engine.preflight). The
    preflight asks the workers and the run's endpoints, so it runs before the transaction."""
    from django.conf import settings

    if settings.RL_PREFLIGHT and run.status == RunStatus.CREATED:
        from rl_control.engine.preflight import run_preflight

        if errors := run_preflight(run):
            raise RunPreflightError(errors)
    with transaction.atomic():
        now = timezone.now()
        run = _transition(run, "launch", started_at=now, resumed_at=now)
        _engine_start(run)
    return run


def run_pause(*, run: Run) -> Run:
    return _transition(run, "pause", **_end_spell())


@transaction.atomic
def run_resume(*, run: Run) -> Run:
    """paused → running; a new trainer chunk continues from the last committed update."""
    run = _transition(run, "resume", resumed_at=timezone.now())
    _engine_start(run)
    return run


def run_stop(*, run: Run) -> Run:
    return _transition(run, "stop", finished_at=timezone.now(), **_end_spell())


def run_finish(*, run: Run) -> Run:
    return _transition(run, "finish", finished_at=timezone.now(), **_end_spell())


def run_fail(*, run: Run, error: str) -> Run:
    """Any non-terminal status → failed, with a readable `error` (required)."""
    if not error.strip():
        raise RunError("a failed run needs an error message")
    return _transition(
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
    _publish_status(run)
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
    _publish_status(run)
    run_enforce_budget(run=run)
    return run
