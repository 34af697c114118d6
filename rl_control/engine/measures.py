"""Figures of one trainer update that come from the curation plans, the finished episodes and the
fleet rather than from the loss (SPEC §9: think length, rollouts per task, step limit, curriculum
buckets, success per domain, live / idle environments and boot time), and `update_record`, which
writes the update's metric point and the run's progress (called by rl_control.engine.learner)."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Avg
from django.db.models.functions import Length

from rl_control.engine.data import pool_fill
from rl_control.engine.keys import key, rds
from rl_control.engine.samples import rollout_outcome
from rl_control.models import Run
from rl_control.services import state
from rl_control.services.metrics import metrics_record
from webapp.store.models import Step, Trajectory, TrajectoryStatus
from workers.rl.curation import CURRICULUM_BUCKETS


def curation_figures(plans: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """N chosen per task by dynamic sampling (mean and per task), the per-task step limit, and how
    many tasks sit in each curriculum bucket, from the update's group plans."""
    done = [p for p in plans if "next_rollouts" in p]
    if not done:
        return {}
    out: dict[str, float] = {
        "curation/rollouts_per_task_mean": statistics.fmean(float(p["next_rollouts"]) for p in done),
        "curation/step_limit_mean": statistics.fmean(float(p["step_limit"]) for p in done),
    }
    for p in done:
        out[f"curation/rollouts_per_task/{p['task_id']}"] = float(p["next_rollouts"])
    buckets = Counter(
        p["curriculum"] for p in {p["task_id"]: p for p in done}.values() if p.get("curriculum")
    )
    for bucket in CURRICULUM_BUCKETS:
        out[f"curation/bucket/{bucket}"] = float(buckets.get(bucket, 0))
    return out


def episode_figures(finished: list[Trajectory], successes: list[bool], pool_name: str) -> dict[str, float]:
    """Mean thought length per step of the finished episodes, and the success rate per domain (the
    task's first tag, e.g. an OSWorld app, else the run's pool)."""
    if not finished:
        return {}
    out: dict[str, float] = {}
    mean = Step.objects.filter(trajectory__in=[t.pk for t in finished]).aggregate(n=Avg(Length("thought")))[
        "n"
    ]
    if mean is not None:
        out["outcome/think_length_mean"] = float(mean)
    per_domain: dict[str, list[bool]] = {}
    for t, ok in zip(finished, successes, strict=True):
        per_domain.setdefault(t.task.tags[0] if t.task.tags else pool_name, []).append(ok)
    for domain, oks in per_domain.items():
        out[f"outcome/success_rate/domain/{domain[:120]}"] = statistics.fmean(oks)
    return out


def fleet_figures(kind: str) -> dict[str, float]:
    """Live and idle environments of the run's kind (every kind for "mixed") and their mean boot
    time (the Redis registry)."""
    from webapp.fleet.registry import registry
    from workers.rl.run_config import MIXED_KIND

    metrics = registry().metrics()
    counted = [c for k, c in metrics["envs"].items() if kind in (k, MIXED_KIND)]
    idle = sum(c.get("idle", 0) for c in counted)
    out = {
        "fleet/live": float(idle + sum(c.get("leased", 0) for c in counted)),
        "fleet/idle": float(idle),
    }
    if metrics["boot_s_mean"] is not None:
        out["fleet/boot_s"] = float(metrics["boot_s_mean"])
    return out


# Read and reset the run's accounting hash in one step.
_TAKE = """
local v = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return v
"""


def _take_acct(run: Run) -> tuple[dict[str, float], float | None]:
    """What the rollout workers counted since the last take, and the wall seconds since that take (the
    first time: since the run started): the counts accumulate across chunks, pauses, trainer restarts
    and the trainer's loading, so their rates are over this span, not over the current chunk's window."""
    raw = rds().eval(_TAKE, 1, key(run.pk, "acct"))
    now = time.time()
    before = rds().getset(key(run.pk, "acct_at"), repr(now))
    if before is not None:
        since: float | None = now - float(before)
    else:
        since = now - run.started_at.timestamp() if run.started_at else None
    return {raw[i].decode(): float(raw[i + 1]) for i in range(0, len(raw), 2)}, since


def update_record(
    run: Run, step: int, version: int, metrics: dict[str, float], finished: list[Trajectory], trained: set[int],
    injections: dict[str, int], stale: int, window: tuple[float, float], sync_s: float,
) -> None:  # fmt: skip
    """Record one update's metric point (the trainer's `metrics`, the outcome of the `finished`
    episodes, what the rollout workers counted, curation and fleet figures) at `step`, and the run's
    progress (which finishes the run when its budget is spent)."""
    acct, counted_s = _take_acct(run)
    window_start, idle_s = window  # perf_counter() at the end of the previous update, seconds waited since
    window_s = time.perf_counter() - window_start
    rate_s = counted_s if counted_s is not None and counted_s > window_s else window_s
    idle_frac = idle_s / window_s if window_s > 0 else 0.0
    values: dict[str, float] = dict(metrics)
    rewards = [rollout_outcome(t).reward for t in finished]
    if rewards:
        mean = statistics.fmean(rewards)
        half = 1.96 * statistics.pstdev(rewards) / math.sqrt(len(rewards)) if len(rewards) > 1 else 0.0
        successes = [bool(t.metadata.get("engine", {}).get("success")) for t in finished]
        values.update({
            "outcome/reward_mean": mean, "outcome/reward_ci_low": mean - half, "outcome/reward_ci_high": mean + half,
            "outcome/success_rate": statistics.fmean(successes),
            "outcome/verified_success_rate": statistics.fmean(successes),
            "outcome/episode_steps_mean": statistics.fmean(t.num_steps for t in finished),
        })  # fmt: skip
        per_task: dict[str, list[bool]] = {}
        for t, ok in zip(finished, successes, strict=True):
            per_task.setdefault(t.task.external_id, []).append(ok)
        for task_key, oks in per_task.items():
            values[f"outcome/success_rate/task/{task_key}"] = statistics.fmean(oks)
        values.update(episode_figures(finished, successes, run.pool.name if run.pool_id else "none"))
    values.update(fleet_figures(str(run.config["env"]["kind"])))
    busy, idle = acct.get("busy_s", 0.0), acct.get("idle_s", 0.0)
    episodes = int(Trajectory.objects.filter(run=run, status=TrajectoryStatus.COMPLETED).count())
    values.update({
        "outcome/episodes": float(episodes),
        "efficiency/actions_per_min": 60.0 * acct.get("actions", 0.0) / rate_s if rate_s > 0 else 0.0,
        "efficiency/episodes_per_min": 60.0 * acct.get("episodes", 0.0) / rate_s if rate_s > 0 else 0.0,
        "efficiency/trainer_idle_frac": idle_frac,
        "efficiency/pool_fill": float(pool_fill(run=run)),
        "efficiency/weight_sync_s": sync_s,
        "curation/pool_injections": float(injections.get("experience_pool", 0)),
        "curation/cache_injections": float(injections.get("bepa_cache", 0)),
        "curation/replay_injections": float(injections.get("replay", 0)),
        "curation/stale_dropped": float(stale),
        "fleet/crashed": acct.get("crashed", 0.0),
        "fleet/reclaimed": acct.get("reclaimed", 0.0),
        "fleet/crash_rate": acct.get("crashed", 0.0) / max(1.0, acct.get("crashed", 0.0) + acct.get("episodes", 0.0)),
    })  # fmt: skip
    if busy + idle > 0:
        values["efficiency/env_utilization"] = busy / (busy + idle)
    samples = int(Step.objects.filter(trajectory_id__in=trained).count())
    metrics_record(run=run, step=step, values=values, policy_version=version, samples=samples)
    run.refresh_from_db()
    try:
        state.run_progress(
            run=run, updates_done=run.updates_done + 1, episodes_done=episodes, policy_version=version,
            samples=run.samples + samples,
        )  # fmt: skip
    except state.RunTransitionError:
        pass  # stopped meanwhile; the loop notices
