"""Figures of `bench rollout` from its episodes (plain Python: no Django): environment utilisation
over a window, per environment kind, and where a synchronous run's time goes. Each episode is a dict
with its kind, status, steps, reward, sync batch and (start, end) in unix seconds."""

from __future__ import annotations

import itertools
from typing import Any


def env_utilization(
    intervals: list[tuple[float, float | None]], start: float, end: float, envs: int
) -> float:
    """Share of the window [start, end] × `envs` that environments spent inside episodes: the
    episodes' (claimed, finished) times, clipped to the window (unfinished = still inside at the end)."""
    if end <= start or envs <= 0:
        return 0.0
    busy = sum(max(0.0, min(end, b if b is not None else end) - max(start, a)) for a, b in intervals)
    return round(busy / ((end - start) * envs), 4)


def episode_summary(done: list[dict[str, Any]]) -> dict[str, Any]:
    """Completed episodes: how many, their steps (p50, max) and the share with a positive reward."""
    steps = sorted(e["steps"] for e in done)
    return {
        "episodes": len(done),
        "steps_p50": steps[len(steps) // 2] if steps else None,
        "steps_max": steps[-1] if steps else None,
        "success_rate": round(sum(1 for e in done if (e["reward"] or 0) > 0) / len(done), 3)
        if done
        else None,
    }


def kind_figures(episodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per environment kind: completed episodes, their steps (p50, max), success rate, wall seconds
    per step (the policy's sampling and the environment's transition together), and the episodes
    lost (crashed environment, failed call, abandoned: never trained on)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in sorted({e["kind"] for e in episodes}):
        done = [e for e in episodes if e["kind"] == kind and e["status"] == "completed" and e["end"]]
        steps = sum(e["steps"] for e in done)
        seconds = sum(e["end"] - e["start"] for e in done)
        out[kind] = {
            **episode_summary(done),
            "s_per_step": round(seconds / steps, 3) if steps else None,
            "episode_s_mean": round(seconds / len(done), 2) if done else None,
            "lost": sum(
                1 for e in episodes if e["kind"] == kind and e["status"] not in ("completed", "running")
            ),
        }
    return out


def sync_phases(episodes: list[dict[str, Any]], envs: int) -> dict[str, Any]:
    """Where a synchronous run's time goes, per batch that finished: the rollout phase (first
    episode start → last episode end; environments idle in it once their own episodes are done,
    waiting for the batch's slowest) and the gap to the next batch's first episode (the trainer's
    update and weight push: every environment idle). Means over those batches, and the share of
    environment time inside episodes during the rollout phases."""
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for e in episodes:
        if e["batch"] is not None:
            by_batch.setdefault(int(e["batch"]), []).append(e)
    spans = []
    for b in sorted(by_batch):
        group = by_batch[b]
        if any(e["end"] is None for e in group):
            continue
        spans.append((b, min(e["start"] for e in group), max(e["end"] for e in group),
                      sum(e["end"] - e["start"] for e in group)))  # fmt: skip
    phases = [
        (s1, e1, busy, s2) for (b1, s1, e1, busy), (b2, s2, _, _) in itertools.pairwise(spans) if b2 == b1 + 1
    ]
    if not phases:
        return {"batches": 0}
    rollout = sum(e1 - s1 for s1, e1, _, _ in phases)
    gap = sum(s2 - e1 for _, e1, _, s2 in phases)
    return {
        "batches": len(phases),
        "rollout_phase_s_mean": round(rollout / len(phases), 2),
        "train_gap_s_mean": round(gap / len(phases), 2),
        "train_gap_frac": round(gap / (rollout + gap), 3),
        "env_utilization_in_rollout_phase": round(sum(b for _, _, b, _ in phases) / (rollout * envs), 3),
    }
