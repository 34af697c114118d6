"""A seam for real VMs: the Environment protocol over OSWorld's own `DesktopEnv`
(`desktop_env.desktop_env.DesktopEnv`), which runs OSWorld's Ubuntu image under one of its VM
providers (Docker with KVM when /dev/kvm exists, VMware, VirtualBox, cloud providers).

The default desktop stays the Xvfb session (`workers.envs.desktop.DesktopEnv`); hosts that have a
provider set `FLYWHEEL_DESKTOP_BACKEND=osworld-vm` (and `OSWORLD_VM_PROVIDER`, `OSWORLD_VM_PATH`) and
their env hosts build this class for desktop tasks instead (`workers.envs.factory.make_desktop`).
OSWorld's DesktopEnv then does set-up, getters and evaluation itself, inside the VM, with its full
vocabulary; our actions become the pyautogui code its `pyautogui` action space runs.

It needs desktop-env's own dependencies (gymnasium, docker, …) that `make setup` does not install
(desktop-env is installed --no-deps for its evaluators): `pip install desktop-env==1.0.2` with its
dependencies on such a host. Without them, or without the provider, construction fails with the
reason (`EnvError`), never later in the middle of an episode.
"""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any

from workers.actions.types import GIVE_UP_KINDS, TERMINAL_KINDS, Action
from workers.envs.base import EnvError, EnvKind, ImageFormat, Observation, StepResult, TaskSpec

BACKEND_ENV = "FLYWHEEL_DESKTOP_BACKEND"


def pyautogui_code(action: Action, scroll_clicks: int = 5) -> str:
    """Our action as OSWorld's `pyautogui` action-space code (or its WAIT / DONE / FAIL words)."""
    p, e = action.point, action.end_point
    if action.kind == "wait":
        return "WAIT"
    if action.kind in GIVE_UP_KINDS:
        return "FAIL"
    if action.kind in TERMINAL_KINDS:
        return "DONE"
    if action.kind in {"click", "left_double", "right_single", "hover"}:
        if p is None:
            raise EnvError(f"{action.kind} needs a point")
        x, y = round(p.x), round(p.y)
        return {
            "click": f"pyautogui.click({x}, {y})",
            "left_double": f"pyautogui.doubleClick({x}, {y})",
            "right_single": f"pyautogui.rightClick({x}, {y})",
            "hover": f"pyautogui.moveTo({x}, {y})",
        }[action.kind]
    if action.kind == "drag":
        if p is None or e is None:
            raise EnvError("drag needs a start and an end point")
        return (
            f"pyautogui.moveTo({round(p.x)}, {round(p.y)}); "
            f"pyautogui.dragTo({round(e.x)}, {round(e.y)}, duration=0.5, button='left')"
        )
    if action.kind == "type":
        text = action.text or ""
        enter = text.endswith("\n")
        code = f"pyautogui.typewrite({json.dumps(text.removesuffix(chr(10)))}, interval=0.02)"
        return code + ("; pyautogui.press('enter')" if enter else "")
    if action.kind == "hotkey":
        keys = [k.lower() for k in action.keys or ()]
        if not keys:
            raise EnvError("hotkey needs keys")
        return f"pyautogui.hotkey({', '.join(json.dumps(k) for k in keys)})"
    if action.kind == "scroll":
        direction = action.direction or "down"
        amount = scroll_clicks if direction in {"up", "left"} else -scroll_clicks
        move = f"pyautogui.moveTo({round(p.x)}, {round(p.y)}); " if p is not None else ""
        call = "hscroll" if direction in {"left", "right"} else "scroll"
        return f"{move}pyautogui.{call}({amount})"
    raise EnvError(f"action {action.kind!r} has no OSWorld desktop equivalent")


def osworld_task_config(task: TaskSpec) -> dict[str, Any]:
    """The OSWorld task JSON DesktopEnv.reset takes, from a stored OSWorld task spec."""
    if task.source != "osworld":
        raise EnvError(f"an OSWorld VM runs OSWorld tasks only, not {task.source!r} ones")
    from workers.envs import osworld

    evaluator = osworld.evaluator_of(task)
    return {
        "id": task.task_id,
        "instruction": task.instruction,
        "config": osworld.setup_steps(task),
        "evaluator": evaluator or {"func": "infeasible"},
        "proxy": False,
    }


class OSWorldVMEnv:
    """Environment protocol over OSWorld's DesktopEnv. `make_env` builds the DesktopEnv (by default
    `desktop_env.desktop_env.DesktopEnv(provider_name=..., path_to_vm=..., action_space='pyautogui')`)."""

    kind: EnvKind = "desktop"

    def __init__(
        self,
        provider: str | None = None,
        path_to_vm: str | None = None,
        screen_size: tuple[int, int] = (1920, 1080),
        make_env: Any = None,
    ) -> None:
        self.provider = provider or os.environ.get("OSWORLD_VM_PROVIDER", "docker")
        self.path_to_vm = path_to_vm or os.environ.get("OSWORLD_VM_PATH") or None
        self.screen_size = screen_size
        self._env = (make_env or self._make_env)()
        self._task: TaskSpec | None = None
        self.last_action_kind: str | None = None

    def _make_env(self) -> Any:
        try:
            from desktop_env.desktop_env import DesktopEnv as VMDesktopEnv
        except ImportError as exc:
            raise EnvError(
                f"the OSWorld VM backend needs desktop-env's own dependencies ({exc.name or exc}); "
                "install desktop-env==1.0.2 with them on VM hosts (docs/osworld.md)"
            ) from exc
        try:
            return VMDesktopEnv(
                provider_name=self.provider,
                path_to_vm=self.path_to_vm,
                action_space="pyautogui",
                screen_size=self.screen_size,
                headless=True,
                require_a11y_tree=False,
            )
        except Exception as exc:  # the provider's own errors (no docker daemon, no image, no VM)
            raise EnvError(f"OSWorld VM provider {self.provider!r} could not start: {exc}") from exc

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        self._task = task
        self.last_action_kind = None
        return self._observation(self._env.reset(task_config=osworld_task_config(task), seed=seed))

    def step(self, action: Action) -> StepResult:
        self.last_action_kind = action.kind
        obs, reward, done, info = self._env.step(pyautogui_code(action))
        return StepResult(self._observation(obs), float(reward or 0.0), bool(done), dict(info or {}))

    def observe(self) -> Observation:
        return self._observation(self._env._get_obs())

    def evaluate(self) -> float:
        return float(self._env.evaluate())

    def close(self) -> None:
        self._env.close()

    def is_alive(self) -> bool:
        return self._env is not None

    def _observation(self, obs: dict[str, Any], image_format: ImageFormat = "png") -> Observation:
        shot = obs.get("screenshot") if isinstance(obs, dict) else None
        if not isinstance(shot, (bytes, bytearray)) or not shot:
            raise EnvError("the OSWorld VM returned no screenshot")
        from PIL import Image

        with Image.open(io.BytesIO(shot)) as image:
            width, height = image.size
        return Observation(
            screenshot=bytes(shot),
            width=width,
            height=height,
            image_format=image_format,
            instruction=self._task.instruction if self._task else "",
            clock=time.monotonic(),
        )
