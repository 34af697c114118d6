"""Phone sandbox: Chromium with Playwright's Pixel 7 emulation on small mobile web task pages.

No Android emulator runs on this machine, so "phone" = a 412×839 touch page with a mobile user agent
(device scale factor forced to 1 so screenshot pixels = CSS pixels = action coordinates).
Task setup: {"apps": {"settings": "settings.html?goal=wifi_off", ...}, "start": "settings"}; page
paths are relative to `pages/` (served locally) or absolute URLs. Mobile actions: click = tap,
long_press (CDP touch hold), swipe (CDP touch move sequence, end point or direction), press_back
(history back), press_home (the task's start page), open_app (app name → URL; unknown = EnvError),
type, hotkey, scroll, wait. Reward/done from the page's `window.__verify()`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from workers.actions.types import Action, Point
from workers.envs.base import EnvError, EnvKind, Observation, TaskSpec
from workers.envs.browser.input import perform, require_point
from workers.envs.browser.page_env import PageEnv, transition_pause_s
from workers.envs.browser.pool import PageSession
from workers.envs.browser.server import get_server

PAGES_DIR = Path(__file__).parent / "pages"
VIEWPORT = (412, 839)
PIXEL_7 = {
    "user_agent": (
        "Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Mobile Safari/537.36"
    ),
    "device_scale_factor": 1,
    "is_mobile": True,
    "has_touch": True,
}
LONG_PRESS_S = 0.8
SWIPE_PX = 300


def app_url(target: str) -> str:
    if target.startswith(("http://", "https://")):
        return target
    server = get_server()
    server.mount("phone", PAGES_DIR)
    return server.url("phone", target)


async def touch(s: PageSession, kind: str, point: Point | None) -> None:
    points = [] if point is None else [{"x": point.x, "y": point.y}]
    await s.cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})


class PhoneEnv(PageEnv):
    kind: EnvKind = "phone"

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        self.apps: dict[str, str] = {
            str(k).lower(): str(v) for k, v in (task.setup.get("apps") or {}).items()
        }
        start = str(task.setup.get("start") or next(iter(self.apps), ""))
        if start.lower() not in self.apps:
            raise EnvError(f"phone task needs setup.apps with the start app {start!r}")
        self.home = app_url(self.apps[start.lower()])
        self.instruction, self.done, self.last_reward = task.instruction, False, 0.0
        self.pause_s = transition_pause_s(task)
        handle = self._session(VIEWPORT, PIXEL_7)
        return handle.call(self._load_home, self.call_timeout_s)

    async def _load_home(self, s: PageSession) -> Observation:
        await s.page.goto(self.home, wait_until="load")
        return await self._observation(s)

    async def _act(self, s: PageSession, action: Action) -> None:
        kind = action.kind
        if kind == "click":
            p = require_point(action, s.viewport)
            await s.page.touchscreen.tap(p.x, p.y)
        elif kind == "long_press":
            p = require_point(action, s.viewport)
            await touch(s, "touchStart", p)
            await asyncio.sleep(LONG_PRESS_S)
            await touch(s, "touchEnd", None)
        elif kind == "swipe":
            await self._swipe(s, action)
        elif kind == "press_back":
            await s.page.go_back(wait_until="load")
        elif kind == "press_home":
            await s.page.goto(self.home, wait_until="load")
        elif kind == "open_app":
            name = (action.text or "").lower()
            if name not in self.apps:
                raise EnvError(f"unknown app {action.text!r}; this task has {sorted(self.apps)}")
            await s.page.goto(app_url(self.apps[name]), wait_until="load")
        else:
            await perform(s, action, self.wait_s)

    async def _swipe(self, s: PageSession, action: Action) -> None:
        start = require_point(action, s.viewport)
        if action.end_point is not None:
            end = require_point(action, s.viewport, end=True)
        else:
            dx, dy = {
                "up": (0, -SWIPE_PX),
                "down": (0, SWIPE_PX),
                "left": (-SWIPE_PX, 0),
                "right": (SWIPE_PX, 0),
            }.get(action.direction or "", (None, None))
            if dx is None or dy is None:
                raise EnvError("swipe needs an end_point or a direction up/down/left/right")
            end = Point(
                min(max(start.x + dx, 0), s.viewport[0] - 1), min(max(start.y + dy, 0), s.viewport[1] - 1)
            )
        await touch(s, "touchStart", start)
        for i in range(1, 11):
            f = i / 10
            await touch(
                s, "touchMove", Point(start.x + (end.x - start.x) * f, start.y + (end.y - start.y) * f)
            )
        await touch(s, "touchEnd", None)

    async def _readout(self, s: PageSession, action: Action) -> tuple[float, bool, dict[str, Any]]:
        v = await s.page.evaluate("window.__verify ? window.__verify() : {reward: 0, done: false}")
        reward = float(v["reward"])
        done = bool(v["done"]) or action.kind in ("finished", "answer", "call_user", "ask_user")
        return reward, done, dict(v)

    def evaluate(self) -> float:
        v = self._require().call(
            lambda s: s.page.evaluate("window.__verify ? window.__verify() : {reward: 0}")
        )
        return float(v["reward"])
