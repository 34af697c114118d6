"""Environments for verl's agent loop: Flywheel's fleet (production) or one in-process env (CPU)."""

from __future__ import annotations

import os
from typing import Any, Protocol

from workers.envs.base import Observation
from workers.envs.wire import task_spec_from_wire


class Envs(Protocol):
    def open(self, task: dict[str, Any], seed: int) -> Observation: ...
    def step(self, action: dict[str, Any]) -> tuple[Observation, bool]: ...
    def evaluate(self) -> float: ...
    def close(self) -> None: ...


class LocalEnvs:
    """One environment of this process (workers.envs.factory), e.g. MiniWoB++ in Chromium."""

    def __init__(self, kind: str = "browser") -> None:
        from workers.envs.factory import FACTORIES

        self.env = FACTORIES[kind]()

    def open(self, task: dict[str, Any], seed: int) -> Observation:
        return self.env.reset(task_spec_from_wire(task), seed=seed)

    def step(self, action: dict[str, Any]) -> tuple[Observation, bool]:
        from workers.actions.types import Action

        result = self.env.step(Action.from_json(action))
        return result.observation, bool(result.done)

    def evaluate(self) -> float:
        return float(self.env.evaluate())

    def close(self) -> None:
        self.env.close()


class FleetEnvs:
    """A leased environment of a Flywheel install (webapp.fleet): any env host, any machine."""

    def __init__(self, kind: str, owner: str) -> None:
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.prod")
        django.setup()
        from webapp.fleet import services as fleet

        self.fleet = fleet
        self.lease = fleet.lease_acquire(kind=kind, owner=owner, background=True)

    def open(self, task: dict[str, Any], seed: int) -> Observation:
        from workers.envs.wire import observation_from_wire

        out = self.fleet.env_call(lease=self.lease, op="reset", payload={"task": task, "seed": seed})
        return observation_from_wire(out["observation"])

    def step(self, action: dict[str, Any]) -> tuple[Observation, bool]:
        from workers.envs.wire import observation_from_wire

        out = self.fleet.env_call(lease=self.lease, op="step", payload={"action": action})
        return observation_from_wire(out["observation"]), bool(out.get("done"))

    def evaluate(self) -> float:
        return float(self.fleet.env_call(lease=self.lease, op="evaluate")["reward"])

    def close(self) -> None:
        self.fleet.lease_release(lease_id=self.lease.lease_id)
