"""JSON-safe forms of observations and step results, for Celery messages between Django and the
worker that hosts an environment (screenshots travel base64-encoded)."""

from __future__ import annotations

import base64
from dataclasses import asdict
from typing import Any

from workers.envs.base import Element, Observation, StepResult, TaskSpec


def observation_to_wire(obs: Observation) -> dict[str, Any]:
    data = asdict(obs)
    data["screenshot"] = base64.b64encode(obs.screenshot).decode()
    data["elements"] = [asdict(e) for e in obs.elements]
    return data


def observation_from_wire(data: dict[str, Any]) -> Observation:
    fields = dict(data)
    fields["screenshot"] = base64.b64decode(fields["screenshot"])
    fields["elements"] = tuple(Element(**e) for e in fields.get("elements", ()))
    return Observation(**fields)


def step_result_to_wire(result: StepResult) -> dict[str, Any]:
    return {
        "observation": observation_to_wire(result.observation),
        "reward": result.reward,
        "done": result.done,
        "info": result.info,
    }


def step_result_from_wire(data: dict[str, Any]) -> StepResult:
    return StepResult(
        observation=observation_from_wire(data["observation"]),
        reward=float(data["reward"]),
        done=bool(data["done"]),
        info=dict(data.get("info") or {}),
    )


def task_spec_from_wire(data: dict[str, Any]) -> TaskSpec:
    return TaskSpec(
        task_id=str(data["task_id"]),
        instruction=str(data.get("instruction", "")),
        kind=data["kind"],
        source=str(data.get("source", "custom")),
        setup=dict(data.get("setup") or {}),
        verifier=dict(data.get("verifier") or {}),
    )
