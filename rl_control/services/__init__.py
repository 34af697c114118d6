"""Writes for RL runs (STYLE: services take keyword-only arguments, named <entity>_<verb>).

runs      create / fork, launch / resume (they start the engine)
state     the control state machine, progress and budget (what the engine calls)
metrics   metrics_record (one training step's scalars, alerts) and metrics_compact (blocks)
"""

from rl_control.services import metrics, runs, state
from rl_control.services.metrics import metrics_compact, metrics_record
from rl_control.services.runs import (
    RunConfigError,
    RunPreflightError,
    run_create,
    run_fork,
    run_launch,
    run_resume,
)
from rl_control.services.state import (
    TRANSITIONS,
    RunError,
    RunTransitionError,
    run_budget_exhausted,
    run_budget_fraction,
    run_elapsed_seconds,
    run_enforce_budget,
    run_episode_done,
    run_fail,
    run_finish,
    run_pause,
    run_progress,
    run_stop,
    status_payload,
)

__all__ = [
    "TRANSITIONS",
    "RunConfigError",
    "RunError",
    "RunPreflightError",
    "RunTransitionError",
    "metrics",
    "metrics_compact",
    "metrics_record",
    "run_budget_exhausted",
    "run_budget_fraction",
    "run_create",
    "run_elapsed_seconds",
    "run_enforce_budget",
    "run_episode_done",
    "run_fail",
    "run_finish",
    "run_fork",
    "run_launch",
    "run_pause",
    "run_progress",
    "run_resume",
    "run_stop",
    "runs",
    "state",
    "status_payload",
]  # fmt: skip
