"""`bench envstep`: desktop and browser step latency and desktop boot time (SPEC §10)."""

from __future__ import annotations

from typing import Any


def run_envstep(quick: bool) -> dict[str, Any]:
    from workers.envs.bench_browser import browser_figures
    from workers.envs.bench_desktop import desktop_figures

    figures: dict[str, Any] = {}
    figures.update(desktop_figures(quick=quick))
    figures.update(browser_figures(quick=quick))
    return figures
