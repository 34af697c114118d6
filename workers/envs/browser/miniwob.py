"""MiniWoB++ tasks from the `miniwob` wheel as a `browser` environment (SPEC §3).

Layout: every task page puts the task in `#wrap`, a 160×210 px box at the page's top-left corner
(`#query`, the yellow 50 px instruction strip, above `#area`, the 160×160 task area). The reward
panel and click-trace canvas sit at x ≥ 165. We therefore use a fixed 160×210 viewport: the
screenshot is exactly the task (instruction strip included, as in the original benchmark), and
page pixels = screenshot pixels = `Convention.SCREEN` coordinates.

Episode: `reset` loads `/wob/miniwob/<task>.html` from the local server (once per session and task;
later resets restart the episode in place, like the wheel's own driver), then runs
`Math.seedrandom(seed); core.EPISODE_MAX_TIME = ms; core.startEpisodeReal();` and waits for
`WOB_TASK_READY`. The instruction is `core.getUtterance()`. After each action the step reads
`WOB_DONE_GLOBAL`, `WOB_REWARD_GLOBAL` (time-discounted, in [-1, 1]) and `WOB_RAW_REWARD_GLOBAL`.
The step reward is the discounted reward once the episode ends, else 0; `done` is set when the page
ends the episode (success, failure or its real-time timeout) or on a terminal action (`finished`, ...).
`evaluate()` maps the raw reward to success: 1.0 if it is > 0, else 0.0 (the benchmark's own
success criterion; partial-credit tasks count as success when positive).

The episode timer runs in real time; the default `episode_max_time_ms` of 60 s suits scripted and
model policies. Human annotation needs more: set `setup["episode_max_time_ms"]` on the task.
"""

from __future__ import annotations

import importlib.util
import secrets
from functools import cache
from pathlib import Path
from typing import Any

from workers.actions.types import Action
from workers.envs.base import EnvError, EnvKind, Observation, TaskSpec
from workers.envs.browser.page_env import PageEnv, transition_pause_s
from workers.envs.browser.pool import BrowserPool, PageSession
from workers.envs.browser.server import get_server

VIEWPORT = (160, 210)
DEFAULT_MAX_TIME_MS = 60_000
READY_TIMEOUT_MS = 5_000

_START_JS = """([seed, ms]) => {
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = ms;
  core.startEpisodeReal();
}"""
_STATE_JS = """() => ({
  done: !!WOB_DONE_GLOBAL, reward: +WOB_REWARD_GLOBAL, raw: +WOB_RAW_REWARD_GLOBAL,
  reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON), episode: WOB_EPISODE_ID,
})"""
_EXPERT_JS = """() => {
  const flat = [];
  const walk = (node, depth) => {
    if (!node) return;
    const {children, ...rest} = node;
    flat.push({...rest, depth});
    for (const c of children || []) walk(c, depth + 1);
  };
  walk(core.getDOMInfo(document.getElementById('area')), 0);
  return {
    utterance: core.getUtterance(),
    query_html: document.getElementById('query').innerHTML,
    dom: flat,
    ready: !!WOB_TASK_READY, done: !!WOB_DONE_GLOBAL,
    reward: +WOB_REWARD_GLOBAL, raw_reward: +WOB_RAW_REWARD_GLOBAL,
  };
}"""


@cache
def miniwob_html_dir() -> Path:
    """The wheel's `miniwob/html` folder, found without importing the package (which pulls gym)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise EnvError("the miniwob package is not installed")
    html = Path(next(iter(spec.submodule_search_locations))) / "html"
    if not (html / "core" / "core.js").is_file():
        raise EnvError(f"miniwob html not found under {html}")
    return html


def list_miniwob_tasks() -> list[str]:
    """Every MiniWoB++ task name shipped in the wheel (`miniwob/html/miniwob/*.html`), sorted."""
    return sorted(p.stem for p in (miniwob_html_dir() / "miniwob").glob("*.html"))


def task_url(name: str) -> str:
    """The local http URL of a task page (starts the server on first use)."""
    server = get_server()
    server.mount("wob", miniwob_html_dir())
    return server.url("wob", f"miniwob/{name}.html")


def resolve_task_name(task: TaskSpec) -> str:
    """`setup["task"]`, else the task id (with an optional `miniwob/` prefix), checked against the wheel."""
    name = str(task.setup.get("task") or task.task_id)
    name = name.removeprefix("miniwob/").removeprefix("miniwob.").removesuffix(".html")
    if name not in set(list_miniwob_tasks()):
        raise EnvError(f"unknown MiniWoB++ task {name!r}")
    return name


class MiniWoBEnv(PageEnv):
    """One MiniWoB++ episode at a time in a pooled 160×210 page. See the module docstring."""

    kind: EnvKind = "browser"

    def __init__(self, pool: BrowserPool | None = None, **kwargs: Any) -> None:
        super().__init__(pool, **kwargs)
        self.task_name: str | None = None
        self.seed: int | None = None

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        name = resolve_task_name(task)
        max_ms = int(task.setup.get("episode_max_time_ms", DEFAULT_MAX_TIME_MS))
        if max_ms <= 0:
            raise EnvError("episode_max_time_ms must be positive")
        self.pause_s = transition_pause_s(task)
        self.seed = seed if seed is not None else secrets.randbelow(2**31)
        handle = self._session(VIEWPORT)
        self.task_name = name
        self.done, self.last_reward = False, 0.0
        return handle.call(lambda s: self._start(s, name, str(self.seed), max_ms), self.call_timeout_s)

    async def _start(self, s: PageSession, name: str, seed: str, max_ms: int) -> Observation:
        url = task_url(name)
        if s.page.url != url:
            await s.page.goto(url, wait_until="load")
        await s.page.evaluate(_START_JS, [seed, max_ms])
        await s.page.wait_for_function("WOB_TASK_READY", timeout=READY_TIMEOUT_MS)
        # Some tasks (click-dialog) focus an element that jQuery UI first placed outside the 160 px
        # viewport, which scrolls the page sideways; the task always lives at the top-left corner.
        await s.page.evaluate("window.scrollTo(0, 0)")
        self.instruction = await s.page.evaluate("core.getUtterance()")
        return await self._observation(s)

    async def _readout(self, s: PageSession, action: Action) -> tuple[float, bool, dict[str, Any]]:
        state = await s.page.evaluate(_STATE_JS)
        done = bool(state["done"]) or action.kind in ("finished", "answer", "call_user", "ask_user")
        reward = float(state["reward"]) if state["done"] else 0.0
        info = {"raw_reward": float(state["raw"]), "reason": state["reason"], "page_done": state["done"]}
        return reward, done, info

    def evaluate(self) -> float:
        """1.0 if the episode's raw reward is positive (MiniWoB++ success), else 0.0."""
        state = self._require().call(lambda s: s.page.evaluate(_STATE_JS), self.call_timeout_s)
        return 1.0 if state["done"] and float(state["raw"]) > 0 else 0.0

    def expert_state(self) -> dict[str, Any]:
        """What the task page knows, for scripted experts only (never shown to a policy).

        Keys: `task`, `seed`, `utterance`, `fields` (the wheel's parsed key/value pairs for the
        utterance, [] when it has no extractor), `query_html`, `dom` (flattened `core.getDOMInfo`
        of `#area`: tag, id, classes, text, value, left/top/width/height in page pixels, ref, depth),
        `ready`, `done`, `reward`, `raw_reward`.
        """
        state: dict[str, Any] = self._require().call(
            lambda s: s.page.evaluate(_EXPERT_JS), self.call_timeout_s
        )
        state["task"] = self.task_name
        state["seed"] = self.seed
        state["fields"] = _fields(self.task_name or "", state["utterance"])
        return state


def _fields(task_name: str, utterance: str) -> list[tuple[str, str]]:
    """The wheel's field extraction (pure regex code) for tasks that define one."""
    from miniwob.fields import FIELD_EXTRACTORS

    extractor = FIELD_EXTRACTORS.get(task_name)
    if extractor is None:
        return []
    try:
        return [(str(k), str(v)) for k, v in extractor(utterance)]
    except ValueError:
        return []
