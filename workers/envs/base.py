"""The environment protocol every kind implements (SPEC §3): reset / step / evaluate / close."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from workers.actions.types import Action

EnvKind = Literal["desktop", "browser", "game", "phone", "terminal"]
ImageFormat = Literal["jpeg", "png"]


class EnvError(RuntimeError):
    """An environment could not do what was asked (boot failed, process died, bad action)."""


class EnvCrashed(EnvError):
    """The environment's process (Xvfb, Chromium, ...) is gone; the session must be replaced."""


@dataclass(frozen=True)
class Element:
    """One interactive element from the accessibility tree / DOM, in screen pixels."""

    index: int
    tag: str
    text: str
    x: float
    y: float
    width: float
    height: float

    @property
    def center(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y + self.height / 2)


@dataclass(frozen=True)
class Observation:
    """What an agent sees after reset or a step.

    `screenshot` holds encoded image bytes (`image_format`), `width`×`height` screen pixels.
    `elements` / `dom_text` are optional accessibility data; `terminal_output` is set by terminal
    environments; `timings_ms` names how long each part took (e.g. {"grab": 2.1, "encode": 3.9}).
    `clock` is `time.monotonic()` when the screenshot was taken.
    """

    screenshot: bytes
    width: int
    height: int
    image_format: ImageFormat = "jpeg"
    instruction: str = ""
    elements: tuple[Element, ...] = ()
    dom_text: str | None = None
    terminal_output: str | None = None
    url: str | None = None
    clock: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSpec:
    """What an environment needs to set up a task; built from a `Task` row by the service layer.

    `setup` and `verifier` are the task's JSON configs (their shape depends on `source`).
    """

    task_id: str
    instruction: str
    kind: EnvKind
    source: str
    setup: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    kind: EnvKind

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation: ...

    def step(self, action: Action) -> StepResult: ...

    def observe(self) -> Observation: ...

    def evaluate(self) -> float: ...

    def close(self) -> None: ...

    def is_alive(self) -> bool: ...
