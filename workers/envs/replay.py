"""Replay a stored episode: the same task and seed in a fresh environment, re-created in the start
state the episode recorded (workers.envs.episode), the stored screen actions in order, then the
task's own evaluator. A trajectory that records what re-creates its episode (webapp.store:
`metadata.seed`, `metadata.episode`) must replay to its stored reward.

`play_steps` is the one way stored actions are played back: here (replay_check), by the OSWorld
reference check (webapp.store.importers.osworld_check) and by review's executability check
(annotation.review.replay, on a leased env host)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from workers.actions.types import TERMINAL_KINDS, Action
from workers.envs.base import Environment
from workers.envs.episode import episode_env
from workers.envs.wire import task_spec_from_wire


@dataclass(frozen=True)
class Replayed:
    reward: float
    env: dict[str, Any]  # the fresh environment's kind, version and start state


def fresh_env(kind: str, start: dict[str, Any] | None = None) -> Environment:
    """A new environment of `kind`, as an env host builds it. A desktop gets the recorded screen size
    and no VNC server (nobody watches a replay)."""
    from workers.envs.factory import FACTORIES, make_desktop

    if kind == "desktop":
        screen = (start or {}).get("screen")
        if isinstance(screen, list) and _is_size(screen):
            return make_desktop(vnc=False, width=int(screen[0]), height=int(screen[1]))
        return make_desktop(vnc=False)
    return FACTORIES[kind]()


def _is_size(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 8192 for v in value)
    )


def replay_episode(
    task: dict[str, Any], seed: int, steps: list[list[dict[str, Any]]], start: dict[str, Any] | None = None
) -> Replayed:
    """The evaluator's reward after running `steps` (per step, its actions in screen pixels as
    Action JSON) from `task` (on the wire) reset with `seed`, in an environment started as `start`
    (the recorded start state; None: the kind's defaults). A terminal action or the environment's
    episode end stops the replay, as it stopped the episode."""
    env = fresh_env(task["kind"], start)
    try:
        spec = task_spec_from_wire(task)
        identity = episode_env(env, spec, env.reset(spec, seed=seed))
        play_steps(env_step(env), steps)
        return Replayed(float(env.evaluate()), identity)
    finally:
        env.close()


StepFn = Callable[[Action], bool]
"""Runs one action on a reset environment (in this process, or on an env host through a lease);
True when the environment ended the episode."""


def env_step(env: Environment) -> StepFn:
    """`play_steps`'s step for an environment in this process."""
    return lambda action: env.step(action).done


def play_steps(step: StepFn, steps: Iterable[list[dict[str, Any]]]) -> int:
    """Run `steps` (per step, its actions in screen pixels as Action JSON) through `step`, up to a
    terminal action or the environment's episode end, as the episode stopped; the number of steps
    run, the one that ended the episode included. The terminal action itself is sent, as annotation
    and rollouts send it (OSWorld scores an infeasible task 1 only when the last action gave up).
    `steps` is read lazily: a step is taken from it only when the ones before it ran through."""
    played = 0
    for actions in steps:
        played += 1
        for data in actions:
            action = Action.from_json(data)
            if step(action) or action.kind in TERMINAL_KINDS:
                return played
    return played
