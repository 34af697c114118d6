"""Figures of one trainer update that come from the curation plans, the finished episodes and the
fleet rather than from the loss (SPEC §9: think length, rollouts per task, step limit, curriculum
buckets, success per domain, live / idle environments and boot time). The learner adds them to the
update's metric point (rl_control.engine.learner)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Avg
from django.db.models.functions import Length

from webapp.store.models import Step, Trajectory
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
    from rl_control.run_config import MIXED_KIND
    from webapp.fleet.services import registry

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
