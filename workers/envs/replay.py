"""Replay a stored episode: the same task and seed in a fresh environment, re-created in the start
state the episode recorded (workers.envs.episode), the stored screen actions in order, then the
task's own evaluator. A trajectory that records what re-creates its episode (webapp.store:
`metadata.seed`, `metadata.episode`) must replay to its stored reward."""

from __future__ import annotations

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
    episode end stops the replay, as it stopped the episode (terminal actions are not sent to the
    environment, as neither annotation nor rollouts send them)."""
    env = fresh_env(task["kind"], start)
    try:
        spec = task_spec_from_wire(task)
        identity = episode_env(env, spec, env.reset(spec, seed=seed))
        play_steps(env, steps, send_terminal=False)
        return Replayed(float(env.evaluate()), identity)
    finally:
        env.close()


def play_steps(env: Any, steps: list[list[dict[str, Any]]], *, send_terminal: bool = True) -> None:
    """Run `steps` (per step, its actions in screen pixels as Action JSON) on a reset environment,
    up to a terminal action or the environment's episode end, as the episode stopped. The terminal
    action itself is sent when `send_terminal` (a reference solution of an OSWorld infeasible task is
    solved by giving up); a replay of a recorded episode does not send it, as neither annotation nor
    rollouts did."""
    for actions in steps:
        for data in actions:
            action = Action.from_json(data)
            if action.kind in TERMINAL_KINDS and not send_terminal:
                return
            if env.step(action).done or action.kind in TERMINAL_KINDS:
                return
