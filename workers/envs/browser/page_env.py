"""Shared machinery of the page-backed environments (MiniWoB++, games, phone): one pooled session,
observation building, and a step template that runs action + readout + screenshot in ONE call on the
pool loop (each cross-thread hop costs ~0.1 ms; each CDP round trip a few ms).

Transition pause: `task.setup["transition_pause_ms"]` (0 … 10,000, default 0) waits that long after
each executed action before the readout and the screenshot, as OSWorld's `sleep_after_execution`
and AndroidWorld's transition pause do: real pages and apps need time for an action's effect
(navigation, animation, a server round trip) to show. The wait is an asyncio sleep on the pool
loop, so other sessions in the same browser keep working meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from workers.actions.types import TERMINAL_KINDS, Action
from workers.envs.base import EnvError, EnvKind, ImageFormat, Observation, StepResult, TaskSpec
from workers.envs.browser.dom import dom_text
from workers.envs.browser.input import perform
from workers.envs.browser.pool import BrowserPool, PageSession, SessionHandle, get_default_pool

MAX_TRANSITION_PAUSE_MS = 10_000


def transition_pause_s(task: TaskSpec) -> float:
    """The task's `setup["transition_pause_ms"]` in seconds; EnvError if it is not 0 … 10,000."""
    value = task.setup.get("transition_pause_ms", 0)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_TRANSITION_PAUSE_MS
    ):
        raise EnvError(
            f"transition_pause_ms must be a number of ms in 0 … {MAX_TRANSITION_PAUSE_MS}, not {value!r}"
        )
    return float(value) / 1000.0


class PageEnv:
    """Base for environments that live in one browser page. Subclasses set `kind` and implement
    `_load` (navigate and set up the task), `_readout` (reward, done, info) and may extend `_act`.
    """

    kind: EnvKind = "browser"

    def __init__(
        self,
        pool: BrowserPool | None = None,
        *,
        image_format: ImageFormat = "jpeg",
        quality: int = 80,
        with_elements: bool = True,
        wait_s: float = 1.0,
        call_timeout_s: float = 30.0,
    ) -> None:
        if image_format not in ("jpeg", "png"):
            raise EnvError(f"image_format must be 'jpeg' or 'png', not {image_format!r}")
        self.pool = pool or get_default_pool()
        self.image_format: ImageFormat = image_format
        self.quality = quality
        self.with_elements = with_elements
        self.wait_s = wait_s
        self.call_timeout_s = call_timeout_s
        self.instruction = ""
        self.pause_s = 0.0  # transition pause of the current task (set by reset)
        self.last_reward = 0.0
        self.done = False
        self._handle: SessionHandle | None = None
        self._session_key: tuple[Any, ...] | None = None

    # ---- protocol ---------------------------------------------------------------------------

    def observe(self) -> Observation:
        return self._require().call(self._observation, self.call_timeout_s)

    def step(self, action: Action) -> StepResult:
        handle = self._require()
        if self.done:
            raise EnvError("episode is over; call reset()")
        return handle.call(lambda s: self._step(s, action), self.call_timeout_s)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def is_alive(self) -> bool:
        return self._handle is not None and self._handle.alive()

    # ---- helpers for subclasses --------------------------------------------------------------

    def _session(
        self, viewport: tuple[int, int], context_options: dict[str, Any] | None = None
    ) -> SessionHandle:
        """The env's session, reopened when missing, dead, or set up with other options."""
        key = (viewport, repr(sorted((context_options or {}).items())))
        if self._handle is not None and (not self._handle.alive() or key != self._session_key):
            self.close()
        if self._handle is None:
            self._handle = self.pool.open_session(viewport=viewport, context_options=context_options)
            self._session_key = key
        return self._handle

    def _require(self) -> SessionHandle:
        if self._handle is None:
            raise EnvError("call reset() first")
        return self._handle

    async def _observation(self, s: PageSession) -> Observation:
        t0 = time.perf_counter()
        shot = await s.screenshot(self.image_format, self.quality)
        clock = time.monotonic()
        t1 = time.perf_counter()
        elements = await s.elements() if self.with_elements else ()
        t2 = time.perf_counter()
        return Observation(
            screenshot=shot,
            width=s.viewport[0],
            height=s.viewport[1],
            image_format=self.image_format,
            instruction=self.instruction,
            elements=elements,
            dom_text=dom_text(elements) if self.with_elements else None,
            url=s.page.url,
            clock=clock,
            timings_ms={"screenshot": (t1 - t0) * 1000, "elements": (t2 - t1) * 1000},
        )

    async def _step(self, s: PageSession, action: Action) -> StepResult:
        t0 = time.perf_counter()
        if action.kind not in TERMINAL_KINDS:
            await self._act(s, action)
            if self.pause_s > 0:
                await asyncio.sleep(self.pause_s)
        t1 = time.perf_counter()
        reward, done, info = await self._readout(s, action)
        t2 = time.perf_counter()
        self.last_reward, self.done = reward, done
        obs = await self._observation(s)
        obs.timings_ms.update({"action": (t1 - t0) * 1000, "readout": (t2 - t1) * 1000})
        return StepResult(observation=obs, reward=reward, done=done, info=info)

    async def _act(self, s: PageSession, action: Action) -> None:
        await perform(s, action, self.wait_s)

    async def _readout(self, s: PageSession, action: Action) -> tuple[float, bool, dict[str, Any]]:
        raise NotImplementedError
