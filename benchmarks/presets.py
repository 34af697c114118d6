"""`bench presets [--quick]` (issue 34): does each preset's default, launched on the starter as a new
researcher launches it, train the policy into a rising success curve within 10 minutes?

Against the stack at FLYWHEEL_BENCH_URL (default PUBLIC_BASE_URL, i.e. `make up`'s; `local`: a stack of
the bench's own, as `bench launch` starts one): signs in as the demo `researcher`, and for each preset
in turn launches a run on pool `demo-miniwob` with an empty `config` — exactly the defaults the launch
form shows for the start model of a fresh install (the embedded starter); FLYWHEEL_PRESETS_SEED sets
the run's `seed` and nothing else — lets it work for the window
(600 s; --quick: 180 s and the first preset only), stops it, and reads back what the run page shows: its
episodes (each with its success and the policy version that played it), its trained versions
(checkpoints `run<id>-v<n>`) and the reward chart's points. One preset runs at a time, so each has the
machine as a researcher alone would.

The curve, per preset, from the run's own training episodes (sampled at the preset's temperature,
as the run page's success chart shows them):
- `first_half` / `second_half`: success of the episodes in finish order, each with its Wilson 95 %
  interval, and `gain_points` between them with a bootstrap 95 % interval (resampling episodes
  within each half);
- `by_version`: success of the episodes played by the starter's weights (version 0) against those
  played by a trained version (≥ 1);
- `above_starter_points`: the second half against the starter's own episodes (version 0), with its
  bootstrap interval: a curve that only climbs out of a dip its first updates made is not above
  the starter;
- `rising`: the second half's rate above the first half's; `rising_significant`: the gain's
  interval above 0.

Last line: JSON with `presets` (name → figures), `rising` (how many presets rose), `trained` (how many
reached a trained version) and `window_s`.
"""

from __future__ import annotations

import os
import random
import re
import time
from typing import Any

import httpx

from benchmarks.harness.platform_config import PresetsBenchConfig
from benchmarks.harness.stats import rate
from benchmarks.launch import Researcher, on_stack, trained_versions


def run_presets(quick: bool) -> dict[str, Any]:
    config = PresetsBenchConfig.for_run(quick)
    return on_stack(config.base_url, lambda base: _measure(config, base))


def curve(successes: list[bool], versions: list[int], seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    """The success curve of one run's episodes, in finish order (see the module's docstring)."""
    half = len(successes) // 2
    first, second = successes[:half], successes[half:]
    starter = [ok for ok, v in zip(successes, versions, strict=True) if v == 0]
    trained = [ok for ok, v in zip(successes, versions, strict=True) if v >= 1]
    rng = random.Random(seed)
    gain, gain_ci = _difference(second, first, rng, resamples)
    above, above_ci = _difference(second, starter, rng, resamples)
    return {
        "episodes": len(successes),
        "first_half": rate(sum(first), len(first)),
        "second_half": rate(sum(second), len(second)),
        "gain_points": gain,
        "gain_points_ci95": gain_ci,
        "by_version": {
            "starter_weights": rate(sum(starter), len(starter)),
            "trained_weights": rate(sum(trained), len(trained)),
        },
        # the second half against the episodes the starter's own weights played (version 0): a curve
        # that rises only out of a dip its first updates made is not above the starter
        "above_starter_points": above,
        "above_starter_points_ci95": above_ci,
        "rising": bool(first and second and gain > 0),
        "rising_significant": bool(first and second and gain_ci[0] > 0),
    }


def _difference(
    later: list[bool], earlier: list[bool], rng: random.Random, resamples: int
) -> tuple[float, list[float]]:
    """Points between two success rates, with a bootstrap 95 % interval (each side resampled on its
    own); (0, [-100, 100]) when either side is empty."""
    if not later or not earlier:
        return 0.0, [-100.0, 100.0]
    diffs = sorted(
        _mean(rng.choices(later, k=len(later))) - _mean(rng.choices(earlier, k=len(earlier)))
        for _ in range(resamples)
    )
    low, high = diffs[int(0.025 * len(diffs))], diffs[min(len(diffs) - 1, int(0.975 * len(diffs)))]
    return round(100 * (_mean(later) - _mean(earlier)), 1), [round(100 * low, 1), round(100 * high, 1)]


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values) if values else 0.0


def _episodes(client: httpx.Client, run_id: int) -> list[dict[str, Any]]:
    """Every episode of the run, oldest first (the API pages newest first)."""
    rows: list[dict[str, Any]] = []
    url: str | None = f"/api/rl/runs/{run_id}/episodes/?page_size=1000"
    while url:
        page = client.get(url)
        page.raise_for_status()
        body = page.json()
        rows.extend(body["results"])
        url = body.get("next")
    return sorted(rows, key=lambda r: (r.get("finished_at") or "", r["id"]))


def _measure_one(researcher: Researcher, preset: str, config: PresetsBenchConfig) -> dict[str, Any]:
    client, csrf = researcher.client, researcher.csrf
    body = {"name": f"bench presets {preset} {time.strftime('%H:%M:%S')}", "preset": preset,
            "pool": researcher.pool, "launch": True,
            "config": {} if config.seed is None else {"seed": config.seed}}  # fmt: skip
    run_id, started, _ = researcher.launch(body, config.ready_wait_s)
    first_trained_s: float | None = None
    try:
        while (left := config.window_s - (time.perf_counter() - started)) > 0:
            time.sleep(min(10.0, left))
            run = client.get(f"/api/rl/runs/{run_id}/").json()
            if first_trained_s is None and int(run.get("policy_version") or 0) >= 1:
                first_trained_s = round(time.perf_counter() - started, 1)
            if run.get("status") not in ("running", "created", "queued"):
                break
    finally:
        client.post(f"/api/rl/runs/{run_id}/stop/", headers=csrf)
    run = client.get(f"/api/rl/runs/{run_id}/").json()
    episodes = [e for e in _episodes(client, run_id) if e.get("status") != "running"]
    successes = [bool((e.get("metadata") or {}).get("engine", {}).get("success")) for e in episodes]
    versions = [_version_number(e.get("policy_version")) for e in episodes]
    chart = client.get(f"/api/rl/runs/{run_id}/metrics/", params={"names": "outcome/success_rate"}).json()
    points = [round(y, 3) for s in chart.get("series", []) for y in s.get("y", [])]
    checkpoints = client.get(f"/api/rl/runs/{run_id}/checkpoints/").json()
    return {
        "run_id": run_id,
        "algorithm": run.get("algorithm"),
        "first_trained_s": first_trained_s,
        "trained_versions": trained_versions(run_id, checkpoints),
        "updates": int(run.get("updates_done") or 0),
        "success_chart": points,
        "status_at_end": run.get("status"),
        "error": run.get("error") or None,
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        **curve(successes, versions),
    }


def _version_number(version: Any) -> int:
    """An episode's policy version as a number: an int as is; `run<id>-v<n>` → n; else 0 (the start)."""
    if isinstance(version, int):
        return version
    if str(version).isdigit():
        return int(version)
    match = re.search(r"v(\d+)$", str(version or ""))
    return int(match.group(1)) if match else 0


def _measure(config: PresetsBenchConfig, base: str) -> dict[str, Any]:
    researcher = Researcher.sign_in(base, config.username, config.password, config.pool)
    figures = {name: _measure_one(researcher, name, config) for name in config.presets}
    return {
        "quick": config.quick,
        "base_url": base,
        "window_s": config.window_s,
        "presets": figures,
        "trained": sum(1 for f in figures.values() if f["trained_versions"] >= 1),
        "rising": sum(1 for f in figures.values() if f["rising"]),
        "rising_significant": sum(1 for f in figures.values() if f["rising_significant"]),
        "config": config.to_json(),
        "cores": os.cpu_count(),
    }
