"""Browser figures for `bench envstep`: MiniWoB++ step latency and scripted-policy throughput.

A step is one click action + reward readout + CDP JPEG screenshot + DOM elements on click-test,
measured through `MiniWoBEnv.step` (caller thread → pool loop → Chromium and back).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from benchmarks.harness.platform_config import EnvstepBenchConfig
from benchmarks.harness.stats import percentile
from workers.actions.types import Action, Point
from workers.envs.base import TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.envs.browser.pool import BrowserPool

_TASK = TaskSpec(task_id="click-test", instruction="", kind="browser", source="miniwob")


def _episode(env: MiniWoBEnv, seed: int) -> float:
    """A trivial scripted policy: click the centre of the first button."""
    obs = env.reset(_TASK, seed=seed)
    button = next(e for e in obs.elements if e.tag == "button")
    env.step(Action("click", point=Point(*button.center)))
    return env.evaluate()


def browser_figures(config: EnvstepBenchConfig) -> dict[str, Any]:
    steps, pages, episodes_per_page = config.browser_steps, config.browser_pages, config.episodes_per_page
    with BrowserPool() as pool:
        env = MiniWoBEnv(pool)
        env.reset(_TASK, seed=0)
        latencies: list[float] = []
        for i in range(steps):
            if env.done:
                env.reset(_TASK, seed=i)
            t0 = time.perf_counter()
            env.step(Action("click", point=Point(5, 205)))  # misses the button: episode goes on
            latencies.append((time.perf_counter() - t0) * 1000)
        env.close()
        envs = [MiniWoBEnv(pool) for _ in range(pages)]
        successes: list[float] = []

        def run(k: int) -> None:
            for j in range(episodes_per_page):
                successes.append(_episode(envs[k], seed=k * 1000 + j))

        t0 = time.perf_counter()
        threads = [threading.Thread(target=run, args=(k,)) for k in range(pages)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        for e in envs:
            e.close()
    return {
        "browser_step_p50_ms": round(statistics.median(latencies), 1),
        "browser_step_p95_ms": round(percentile(latencies, 0.95), 1),
        "browser_pages": pages,
        "browser_episodes_per_s": round(len(successes) / elapsed, 2),
        "browser_scripted_success": round(sum(successes) / max(1, len(successes)), 3),
    }


if __name__ == "__main__":
    print(browser_figures(EnvstepBenchConfig.for_run(quick=True)))
