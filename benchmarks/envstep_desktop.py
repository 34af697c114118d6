"""Desktop figures for `bench envstep` (SPEC §10): step latency and boot time of a real session.

A step is `DesktopEnv.step`: XTEST input, an mss grab of the 1280×800 screen and a JPEG q80 encode.
Boot is Xvfb + openbox + x11vnc until each reports ready (no apps).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.harness.platform_config import EnvstepBenchConfig
from benchmarks.harness.stats import percentile
from workers.actions.types import Action, Point
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv

_TASK = TaskSpec(task_id="bench", instruction="benchmark", kind="desktop", source="bench")
# Inside the xterm at +0+0; the action mix covers pointer moves, clicks, typing and hotkeys.
_CYCLE: tuple[Action, ...] = (
    Action("hover", point=Point(300, 200)),
    Action("click", point=Point(200, 150)),
    Action("type", text="a"),
    Action("hotkey", keys=("backspace",)),
    Action("hover", point=Point(900, 600)),
)


def measure_steps(n: int, settle: bool = False) -> dict[str, float]:
    """Step latency; with `settle` each step also waits for the screen to be quiet (the default
    DesktopEnv behaviour), without it the figure is input + grab + encode only."""
    quiet = DesktopConfig.settle_quiet_s if settle else 0.0
    env = DesktopEnv(DesktopConfig(apps=("xterm",), vnc=False, settle_quiet_s=quiet))
    try:
        env.reset(_TASK)
        for action in _CYCLE:  # warm-up: first grab and keymap lookups
            env.step(action)
        totals: list[float] = []
        grabs: list[float] = []
        encodes: list[float] = []
        for i in range(n):
            t0 = time.perf_counter()
            result = env.step(_CYCLE[i % len(_CYCLE)])
            totals.append((time.perf_counter() - t0) * 1000)
            grabs.append(result.observation.timings_ms["grab"])
            encodes.append(result.observation.timings_ms["encode"])
        png = [env.observe("png").timings_ms["encode"] for _ in range(5)]
    finally:
        env.close()
    return {
        "desktop_step_p50_ms": round(percentile(totals, 0.5), 2),
        "desktop_step_p95_ms": round(percentile(totals, 0.95), 2),
        "desktop_grab_p50_ms": round(statistics.median(grabs), 2),
        "desktop_jpeg_encode_p50_ms": round(statistics.median(encodes), 2),
        "desktop_png_encode_p50_ms": round(statistics.median(png), 2),
        "desktop_steps": n,
    }


def measure_boots(n: int) -> dict[str, float]:
    boots: list[float] = []
    for _ in range(n):
        env = DesktopEnv(DesktopConfig(apps=(), vnc=True))
        try:
            boots.append(env.boot())
        finally:
            env.close()
    return {
        "desktop_boot_p50_s": round(statistics.median(boots), 3),
        "desktop_boot_max_s": round(max(boots), 3),
        "desktop_boots": n,
    }


def desktop_figures(config: EnvstepBenchConfig) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    figures.update(measure_steps(config.desktop_steps))
    settled = measure_steps(config.settled_steps, settle=True)
    figures["desktop_step_settled_p50_ms"] = settled["desktop_step_p50_ms"]
    figures["desktop_step_settled_p95_ms"] = settled["desktop_step_p95_ms"]
    figures.update(measure_boots(config.desktop_boots))
    return figures


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(desktop_figures(EnvstepBenchConfig.for_run(quick="--quick" in sys.argv))))
