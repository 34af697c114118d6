"""Environments that behave like remote VMs, for `bench rollout` with FLYWHEEL_ROLLOUT_WORKLOAD=remote
(issue 37 item 7).

On this machine every part of an episode competes for 2 cores, which caps async ÷ sync near 1.5.
Where environments are remote VMs (OSWorld's: a VM per environment, reached over the network), an
environment call is mostly a wait. Here each environment is a real one (MiniWoB++ in Chromium) whose
reset and step answer only once a time drawn from `RemoteLatency` has passed since the call began:
the rest of that time is a sleep (an I/O wait: no CPU), as a remote call's would be.

`python -m benchmarks.remote_vm worker ARGS…` is the env host's Celery worker (`celery -A webapp
worker ARGS…`) with every environment kind so wrapped.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RemoteLatency:
    """OSWorld-like times of one environment call, in seconds: uniform in `step_s` / `reset_s`, and
    one call in `tail_p` takes `tail_factor` (uniform) times that (the long tail; capped so that no
    call outlasts the engine's 60 s environment-call timeout)."""

    step_s: tuple[float, float] = (1.0, 3.0)
    reset_s: tuple[float, float] = (5.0, 20.0)
    tail_p: float = 0.05
    tail_factor: tuple[float, float] = (1.5, 2.5)

    def draw(self, rng: random.Random, call: str) -> float:
        low, high = self.step_s if call == "step" else self.reset_s
        seconds = rng.uniform(low, high)
        if rng.random() < self.tail_p:
            seconds *= rng.uniform(*self.tail_factor)
        return seconds

    def describe(self) -> str:
        return (f"remote-VM latency: step U{list(self.step_s)} s, reset U{list(self.reset_s)} s, "
                f"{self.tail_p:.0%} of calls × U{list(self.tail_factor)} (I/O waits, no CPU)")  # fmt: skip


class RemoteVM:
    """A real environment whose reset and step take at least a drawn remote-call time."""

    def __init__(self, env: Any, latency: RemoteLatency, rng: random.Random) -> None:
        self.env, self.latency, self.rng = env, latency, rng

    def _answer(self, call: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        result = fn()
        time.sleep(max(0.0, self.latency.draw(self.rng, call) - (time.monotonic() - started)))
        return result

    def reset(self, task: Any, seed: int | None = None) -> Any:
        return self._answer("reset", lambda: self.env.reset(task, seed))

    def step(self, action: Any) -> Any:
        return self._answer("step", lambda: self.env.step(action))

    def __getattr__(self, name: str) -> Any:  # observe, evaluate, close, is_alive, VNC details, …
        return getattr(self.env, name)


def wrap_factories(factories: dict[str, Callable[[], Any]], latency: RemoteLatency, seed: int) -> None:
    """Make every kind's environments RemoteVMs (each with its own seeded draws), in place."""
    counter = itertools.count()

    def remote(make: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: RemoteVM(make(), latency, random.Random(seed * 1000 + next(counter)))

    for kind, make in list(factories.items()):
        factories[kind] = remote(make)


def main(argv: list[str]) -> None:
    from webapp.celery import app
    from workers.envs.factory import FACTORIES

    wrap_factories(FACTORIES, RemoteLatency(), seed=0)
    app.worker_main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
