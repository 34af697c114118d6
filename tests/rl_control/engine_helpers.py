"""Shared by the engine-part tests: a run of the grpo-dart preset, running, with its engine state."""

from __future__ import annotations

from typing import Any

from rl_control.models import EngineState, Run


def running_run(make_run: Any, **config: Any) -> Run:
    run = make_run(preset="grpo-dart", config={"env": {"parallel_envs": 2}, **config})
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    EngineState.objects.create(run=run)
    return run
