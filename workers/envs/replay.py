"""Replay a stored episode: the same task and seed in a fresh environment, the stored screen actions
in order, then the task's own evaluator. A trajectory that records what re-creates its episode
(webapp.store: `metadata.seed`, the task on the wire) must replay to its stored reward."""

from __future__ import annotations

from typing import Any

from workers.actions.types import TERMINAL_KINDS, Action
from workers.envs.wire import task_spec_from_wire


def replay_episode(task: dict[str, Any], seed: int, steps: list[list[dict[str, Any]]]) -> float:
    """The evaluator's reward after running `steps` (per step, its actions in screen pixels as
    Action JSON) from `task` (on the wire) reset with `seed`. A terminal action or the environment's
    episode end stops the replay, as it stopped the episode."""
    from workers.envs.factory import FACTORIES

    env = FACTORIES[task["kind"]]()
    try:
        env.reset(task_spec_from_wire(task), seed=seed)
        play_steps(env, steps)
        return float(env.evaluate())
    finally:
        env.close()


def play_steps(env: Any, steps: list[list[dict[str, Any]]]) -> None:
    """Run `steps` (per step, its actions in screen pixels as Action JSON) on a reset environment,
    up to a terminal action (run too: an OSWorld infeasible task is solved by giving up) or the
    environment's episode end, as the episode stopped."""
    for actions in steps:
        for data in actions:
            action = Action.from_json(data)
            if env.step(action).done or action.kind in TERMINAL_KINDS:
                return
