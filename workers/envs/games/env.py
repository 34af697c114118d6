"""HTML5 mini-games as a `game` environment, rewarded by each game's own JS verifier (seed 000 §2.5.1).

Every game is one HTML file in `html/` with inline JS, deterministic under `?seed=`, that defines
`window.__start()` (begin the game clock), `window.__verify() -> {reward, done, score, level,
success}` (reward in [0, 1]) and `window.__state()` (internal state for scripted experts only).

Time: by default the env runs the page on CDP virtual time (`workers.envs.browser.vtime`): the page
loads, time is paused, `__start()` runs, and each step grants `step_ms` (default 200) of page time
after the action; `wait` grants `wait_s` seconds. Games move only when the agent acts, so an episode
replays identically under the same seed and actions however slow the policy is. With
`virtual_time=False` (or a task's `setup["virtual_time"]` false) the game runs in real time (for
humans driving the page live, and for `bench rollout`: several virtual-time games starting at once
in one Chromium hang, benchmarks/HISTORY.md).

Rewards: the step reward is the change of the verifier's `reward` since the previous step, so the
rewards of an episode sum to the final verifier reward; `done` is the verifier's `done` (or a
terminal action such as `finished`); `evaluate()` returns the verifier's current `reward`, which
is 1.0 exactly when the game is won.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from workers.actions.types import Action
from workers.envs.base import EnvError, EnvKind, Observation, TaskSpec
from workers.envs.browser import vtime
from workers.envs.browser.input import perform
from workers.envs.browser.page_env import PageEnv
from workers.envs.browser.pool import BrowserPool, PageSession
from workers.envs.browser.server import get_server

GAMES_DIR = Path(__file__).parent / "html"
# A game page loads and starts in ≈0.1 s on an idle machine; a start is given up as hung after
# START_TIMEOUT_S or START_PER_OPEN times what opening its page took, whichever is longer (a loaded
# browser is slow at both), at most the env's call timeout.
START_TIMEOUT_S = 10.0
START_PER_OPEN = 10.0
log = logging.getLogger(__name__)
# Viewport per game (page pixels): the board and its HUD fit exactly, nothing scrolls.
GAME_VIEWPORTS: dict[str, tuple[int, int]] = {"2048": (400, 470), "whack": (420, 420), "maze": (400, 410)}
DEFAULT_INSTRUCTIONS: dict[str, str] = {
    "2048": "Slide the tiles with the arrow keys (or the buttons under the board) to make a {target} tile.",
    "whack": "Click every mole (a hole labelled MOLE) before it hides again.",
    "maze": "Move the blue dot to the green square with the arrow keys, or click the next cell.",
}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"2048": {"target": 2048}, "whack": {}, "maze": {}}


def list_games() -> list[str]:
    """Names of the shipped games (the HTML files in `html/`)."""
    return sorted(p.stem for p in GAMES_DIR.glob("*.html"))


def game_url(game: str, seed: int, params: dict[str, Any] | None = None, autostart: bool = False) -> str:
    """The local http URL of a game page with its seed and parameters."""
    if game not in GAME_VIEWPORTS:
        raise EnvError(f"unknown game {game!r}; known: {', '.join(list_games())}")
    server = get_server()
    server.mount("games", GAMES_DIR)
    query = {**DEFAULT_PARAMS[game], **(params or {}), "seed": seed, "autostart": int(autostart)}
    return server.url("games", f"{game}.html?{urlencode(query)}")


def _check_verdict(raw: Any) -> dict[str, Any]:
    """The verifier's answer, checked: a bad game page is an `EnvError`, not a silent 0."""
    if not isinstance(raw, dict) or not {"reward", "done", "score", "level"} <= raw.keys():
        raise EnvError(f"game verifier returned {raw!r}; expected {{reward, done, score, level}}")
    reward = float(raw["reward"])
    if not 0.0 <= reward <= 1.0:
        raise EnvError(f"game verifier reward {reward} is outside [0, 1]")
    return {**raw, "reward": reward, "done": bool(raw["done"])}


class GameEnv(PageEnv):
    """One game episode in a pooled page; see the module docstring."""

    kind: EnvKind = "game"

    def __init__(
        self,
        pool: BrowserPool | None = None,
        *,
        step_ms: float = 200.0,
        virtual_time: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(pool, **kwargs)
        if step_ms < 0:
            raise ValueError("step_ms must be >= 0")
        self.step_ms = step_ms
        self.virtual_time = self.default_virtual_time = virtual_time
        self.game: str | None = None
        self.seed: int | None = None
        self.verdict: dict[str, Any] = {}

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        game = str(task.setup.get("game") or task.task_id).removeprefix("games/")
        params = dict(task.setup.get("params") or {})
        self.seed = seed if seed is not None else secrets.randbelow(2**31)
        url = game_url(game, self.seed, params)
        template = task.instruction or DEFAULT_INSTRUCTIONS[game]
        self.instruction = template.format(**{**DEFAULT_PARAMS[game], **params})
        self.step_ms = float(task.setup.get("step_ms", self.step_ms))
        self.virtual_time = bool(task.setup.get("virtual_time", self.default_virtual_time))
        self.game, self.done, self.last_reward = game, False, 0.0
        # A fresh page per episode: virtual time cannot be switched back to real time on a page.
        # A fresh page now and then never finishes starting: such a page is dropped and the start
        # tried once more on a new one. The first try's deadline scales with how long this browser
        # took to open the page, so that a merely loaded machine is not taken for a hung page.
        for attempt in range(2):
            self.close()
            opened = time.monotonic()
            handle = self._session(GAME_VIEWPORTS[game])
            open_s = time.monotonic() - opened
            first = min(max(START_TIMEOUT_S, START_PER_OPEN * open_s), self.call_timeout_s)
            try:
                return handle.call(
                    lambda s: self._start(s, url), first if attempt == 0 else self.call_timeout_s
                )
            except EnvError as exc:
                if attempt == 1 or "timed out" not in str(exc):
                    raise
                log.warning("game %s: page did not start (%s); retrying on a fresh page", game, exc)
        raise AssertionError("unreachable")

    async def _start(self, s: PageSession, url: str) -> Observation:
        await s.page.goto(url, wait_until="load")
        if self.virtual_time:
            await vtime.pause(s)
        await s.page.evaluate("window.__start()")
        self.verdict = _check_verdict(await s.page.evaluate("window.__verify()"))
        return await self._observation(s)

    async def _act(self, s: PageSession, action: Action) -> None:
        if not self.virtual_time:
            await perform(s, action, self.wait_s)  # real time: the game's clock runs on its own
        elif action.kind == "wait":
            await vtime.advance(s, self.wait_s * 1000)
        else:
            await perform(s, action, self.wait_s)
            await vtime.advance(s, self.step_ms)

    async def _readout(self, s: PageSession, action: Action) -> tuple[float, bool, dict[str, Any]]:
        verdict = _check_verdict(await s.page.evaluate("window.__verify()"))
        reward = verdict["reward"] - self.verdict.get("reward", 0.0)
        self.verdict = verdict
        done = verdict["done"] or action.kind in ("finished", "answer", "call_user", "ask_user")
        return reward, done, dict(verdict)

    def evaluate(self) -> float:
        """The verifier's current reward in [0, 1] (1.0 = won)."""
        verdict = self._require().call(lambda s: s.page.evaluate("window.__verify()"), self.call_timeout_s)
        return float(_check_verdict(verdict)["reward"])

    def expert_state(self) -> dict[str, Any]:
        """The game's internal state (`window.__state()`) plus the verdict; never shown to a policy."""
        state = self._require().call(lambda s: s.page.evaluate("window.__state()"), self.call_timeout_s)
        return {"game": self.game, "seed": self.seed, "state": state, "verdict": dict(self.verdict)}
