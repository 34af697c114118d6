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
as the run page's success chart shows them). Differences are standardised by task: the run plays its
tasks in a seeded order, a few at a time, and their success rates range from 0 to 80 %, so a raw
difference between two sets of episodes measures their task mix as much as the weights (the
starter's version-0 episodes are the run's first few tasks only: issue 34's "first-update dip" was
that). Each difference is Σ_t w_t·(later_t − earlier_t) over the tasks both sides played, with a
bootstrap 95 % interval that redraws each task's episodes on each side at its add-one rate
(s + 1) / (n + 2), so that a side of a few episodes that all failed still has spread.
- `first_half` / `second_half`: success of the episodes in finish order, each with its Wilson 95 %
  interval; `gain_points` between them, standardised (weights: each task's episodes in both halves),
  and `gain_points_unadjusted`, the raw difference of the two rates;
- `by_version`: success of the episodes played by the starter's weights (version 0) against those
  played by a trained version (≥ 1), raw;
- `above_starter_points`: the second half against the starter's own episodes (version 0), on the
  tasks the starter played (`above_starter_tasks`; weights: the starter's episodes per task);
- `rising`: a positive gain; `rising_significant`: the gain's interval above 0.

Last line: JSON with `presets` (name → figures), `rising` (how many presets rose), `trained` (how many
reached a trained version) and `window_s`.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import httpx
import numpy as np

from benchmarks.harness.platform_config import PresetsBenchConfig
from benchmarks.harness.stats import rate
from benchmarks.launch import Researcher, on_stack, trained_versions


def run_presets(quick: bool) -> dict[str, Any]:
    config = PresetsBenchConfig.for_run(quick)
    return on_stack(config.base_url, lambda base: _measure(config, base))


def curve(
    successes: list[bool],
    versions: list[int],
    tasks: list[str] | None = None,
    seed: int = 0,
    resamples: int = 2000,
) -> dict[str, Any]:
    """The success curve of one run's episodes, in finish order (see the module's docstring).
    `tasks`: each episode's task; the differences compare like with like, task by task."""
    tasks = list(tasks) if tasks is not None else [""] * len(successes)
    episodes = list(zip(tasks, successes, strict=True))
    half = len(episodes) // 2
    first, second = episodes[:half], episodes[half:]
    starter = [e for e, v in zip(episodes, versions, strict=True) if v == 0]
    trained = [e for e, v in zip(episodes, versions, strict=True) if v >= 1]
    rng = np.random.default_rng(seed)
    gain, gain_ci, _ = _difference(second, first, rng, resamples, weigh_by_later=True)
    above, above_ci, above_tasks = _difference(second, starter, rng, resamples, weigh_by_later=False)

    def rate_of(rows: list[tuple[str, bool]]) -> dict[str, Any]:
        return rate(sum(ok for _, ok in rows), len(rows))

    raw = round(100 * (_mean(second) - _mean(first)), 1) if first and second else 0.0
    return {
        "episodes": len(episodes),
        "first_half": rate_of(first),
        "second_half": rate_of(second),
        "gain_points": gain,
        "gain_points_ci95": gain_ci,
        "gain_points_unadjusted": raw,
        "by_version": {"starter_weights": rate_of(starter), "trained_weights": rate_of(trained)},
        # the second half against the starter's own episodes (version 0), on the tasks the starter
        # played: the run's first groups play a few tasks only (its seeded order), so a raw rate of
        # version 0 against later versions compares task mixes, not weights
        "above_starter_points": above,
        "above_starter_points_ci95": above_ci,
        "above_starter_tasks": above_tasks,
        "rising": bool(first and second and gain > 0),
        "rising_significant": bool(first and second and gain_ci[0] > 0),
    }


def _difference(
    later: list[tuple[str, bool]],
    earlier: list[tuple[str, bool]],
    rng: np.random.Generator,
    resamples: int,
    *,
    weigh_by_later: bool,
) -> tuple[float, list[float], list[str]]:
    """Points between two success rates, standardised by task: Σ_t w_t·(later_t − earlier_t) over the
    tasks both sides played, w_t ∝ the task's episodes on both sides (`weigh_by_later`) or on the
    earlier side only; a parametric bootstrap 95 % interval, each task's side redrawn on its own
    at its add-one rate (s + 1) / (n + 2). (0, [-100, 100], []) when no task is on both sides."""
    by_task: dict[str, list[list[bool]]] = {}
    for side, rows in enumerate((later, earlier)):
        for task, ok in rows:
            by_task.setdefault(task, [[], []])[side].append(ok)
    common = sorted(t for t, (a, b) in by_task.items() if a and b)
    if not common:
        return 0.0, [-100.0, 100.0], []
    weights = np.array(
        [len(by_task[t][1]) + (len(by_task[t][0]) if weigh_by_later else 0) for t in common], float
    )
    weights /= weights.sum()
    point, draws = 0.0, np.zeros(resamples)
    for w, task in zip(weights, common, strict=True):
        for sign, outcomes in ((1.0, by_task[task][0]), (-1.0, by_task[task][1])):
            n, p = len(outcomes), _mean(outcomes)
            point += sign * w * p
            # drawn at (s + 1) / (n + 2): a task side of 4 episodes that all failed (or all succeeded)
            # would otherwise resample with no spread at all, and the interval would claim certainty
            draws += sign * w * rng.binomial(n, (n * p + 1) / (n + 2), size=resamples) / n
    low, high = np.percentile(draws, [2.5, 97.5])
    return round(100 * float(point), 1), [round(100 * float(low), 1), round(100 * float(high), 1)], common


def _mean(values: list[Any]) -> float:
    """The success rate of outcomes, or of (task, outcome) rows."""
    oks = [v[1] if isinstance(v, tuple) else v for v in values]
    return sum(oks) / len(oks) if oks else 0.0


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
    tasks = [str(e.get("task") or "") for e in episodes]
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
        **curve(successes, versions, tasks),
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
