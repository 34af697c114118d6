"""`bench envstep`: desktop and browser step latency and desktop boot time (SPEC §10)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from benchmarks.harness.platform_config import EnvstepBenchConfig


def run_envstep(quick: bool) -> dict[str, Any]:
    from benchmarks.envstep_browser import browser_figures
    from benchmarks.envstep_desktop import desktop_figures

    config = EnvstepBenchConfig.for_run(quick)
    figures: dict[str, Any] = {}
    figures.update(desktop_figures(config))
    figures.update(browser_figures(config))
    figures["config"] = asdict(config)
    return figures
