"""Writes for RL runs: create / fork, and launch / resume, which start the engine (rl_control.engine)
once the transition commits (the trainer starts the rollout slots). The state machine, progress and
budget, which the engine itself calls, are in rl_control.services.state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from rl_control.models import Run, RunMode, RunStatus
from rl_control.presets import PRESETS, preset_overrides
from rl_control.selectors import start_profile
from rl_control.services.state import run_status_publish, run_transition
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


class RunConfigError(ValueError):
    """Invalid run input; `errors` maps "section.field" (or an argument's name) to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {key: list(messages) for key, messages in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(self.errors.items())))


class RunPreflightError(RunConfigError):
    """What a run needs before it may start is missing (the API answers 400 {field: [messages]})."""


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
    run_status_publish(run)
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
        run = run_transition(run, "launch", started_at=now, resumed_at=now)
        _engine_start(run)
    return run


@transaction.atomic
def run_resume(*, run: Run) -> Run:
    """paused → running; a new trainer chunk continues from the last committed update."""
    run = run_transition(run, "resume", resumed_at=timezone.now())
    _engine_start(run)
    return run
