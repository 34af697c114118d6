"""`bench flywheel [--quick]`: one whole flywheel on MiniWoB++ without a human, in its own database
(`<name>_bench_flywheel`), starting from an untrained embedded model:

    iteration 0: rejection sampling with the untrained model → V(s) (verifier) → pool refresh
    scripted-expert demonstrations (labelled stand-ins for human annotations, source "annotation")
    dataset v1 (SFT = V(s)=1, CT = the rest) → SFT → s1 → RL from s1 → r1
    → promote the better of s1 / r1 on the held-out seeds (annotation + RL start) = c1
    iteration 1: rejection sampling with c1 → V(s) → refresh → dataset v2 → SFT c1 → s2 → RL → c2
    iteration 2 (full only): rejection sampling with c2 …

RL runs through the real engine (benchmarks.learn.rl_phase: Celery rollout and trainer
workers, env host with Chromium, policy server) on the same pool, so its trajectories land in the
pool's store and feed the next dataset. Success is greedy success on held-out seeds
(workers.policy.evaluate); the V(s)=1 rate is that of each iteration's rejection sampling. The
settings are `benchmarks.harness.platform_config.FlywheelBenchConfig`.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import asdict
from itertools import pairwise
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from benchmarks.harness.platform_config import FlywheelBenchConfig


def _use_own_database(name: str) -> None:
    """Point the default connection at a fresh database and migrate it."""
    from benchmarks.harness.database import recreate_database

    recreate_database(name)
    connections.close_all()
    settings.DATABASES["default"]["NAME"] = name
    connections["default"].settings_dict["NAME"] = name
    call_command("migrate", verbosity=0, interactive=False)


def _log(message: str) -> None:
    print(f"[bench flywheel] {message}", file=sys.stderr, flush=True)


def _rejection_sampling(
    config: FlywheelBenchConfig, checkpoint: Any, task_ids: list[int], seed_base: int
) -> dict[str, Any]:
    from webapp.flywheel.models import FlywheelJob
    from webapp.flywheel.services.jobs import job_create
    from webapp.flywheel.tasks import rejection_sampling_start

    job = job_create(
        kind="rejection_sampling", checkpoint=checkpoint, enqueue=False,
        params={"k": config.k, "task_ids": task_ids, "seed_base": seed_base, "max_steps": config.max_steps,
                "temperature": config.rs_temperature, "max_new_tokens": config.max_new_tokens},
    )  # fmt: skip
    started = time.perf_counter()
    rejection_sampling_start(job.pk, inline=True)
    job = FlywheelJob.objects.get(pk=job.pk)
    if job.status != "succeeded":
        raise RuntimeError(f"rejection sampling job {job.pk} {job.status}: {job.error}")
    result = job.result
    return {"episodes": result["episodes"], "v1": result["v1"], "v1_rate": round(result["v1_rate"], 4),
            "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def _success(config: FlywheelBenchConfig, checkpoint: Any, intervals: dict[str, Any] | None = None) -> float:
    """Greedy success of `checkpoint` on the held-out seeds; its Wilson interval goes into `intervals`."""
    from benchmarks.harness.stats import wilson_interval
    from webapp.flywheel.services.training import evaluate_checkpoint

    tasks, seeds = config.tasks, list(config.eval_range)
    _log(f"evaluating {checkpoint.version} on {len(tasks)} tasks × {len(seeds)} held-out seeds")
    report = evaluate_checkpoint(checkpoint=checkpoint, tasks=list(tasks), seeds=seeds, max_steps=config.max_steps,
                                 max_new_tokens=config.max_new_tokens)  # fmt: skip
    if not report:
        return float("nan")
    if intervals is not None:
        intervals[checkpoint.version] = [
            round(x, 4) for x in wilson_interval(report["successes"], report["episodes"])
        ]
    return round(report["mean"], 4)


def _rl_then_pick(config: FlywheelBenchConfig, sft: Any, pool: Any, it: int) -> tuple[dict[str, Any], Any]:
    """RL from the SFT checkpoint through the real engine; returns the figures and the checkpoint to
    promote: the RL result unless it does worse than its SFT start on the held-out seeds."""
    import tempfile
    from pathlib import Path

    from django.contrib.auth import get_user_model

    from benchmarks.harness.config import LearnBenchConfig
    from benchmarks.learn import rl_phase

    learn = LearnBenchConfig(quick=False)  # the learn bench's RL settings (lr, temperature, staleness)
    user, _ = get_user_model().objects.get_or_create(username="bench-flywheel")
    started = time.perf_counter()
    rl = rl_phase(
        checkpoint=sft, pool=pool, user=user, workdir=Path(tempfile.mkdtemp(prefix="bench-flywheel-rl-")),
        minutes=config.rl_minutes, envs=config.rl_envs, name=f"flywheel iteration {it + 1}",
        config={"grpo": {"rollouts_per_task": 4, "lr": learn.lr, "beta_kl": 0.0, "temperature": learn.temperature},
                "curation": {"rollouts_max": 4, "rollouts_min": 2, "step_cap": config.max_steps + 2,
                             "min_batch_trajectories": 16, "staleness_bound": learn.staleness,
                             "injection": "experience_pool"}},
    )  # fmt: skip
    run, rates = rl["run"], rl["success_rates"]
    figures: dict[str, Any] = {
        "run": run.pk, "status": run.status, "error": run.error, "updates": run.updates_done,
        "episodes": run.episodes_done, "wall_s": round(time.perf_counter() - started, 1),
        "train_success_first": round(rates[0], 3) if rates else None,
        "train_success_last": round(rates[-1], 3) if rates else None,
    }  # fmt: skip
    if rl["checkpoint"] is None:
        figures["picked"] = "sft (the run registered no checkpoint)"
        return figures, sft
    sft_success = _success(config, sft)
    rl_success = _success(config, rl["checkpoint"])
    figures.update(checkpoint=rl["checkpoint"].version, success_sft=sft_success, success_rl=rl_success)
    if rl_success >= sft_success:
        figures["picked"] = "rl"
        return figures, rl["checkpoint"]
    figures["picked"] = "sft (RL did worse on the held-out seeds)"
    return figures, sft


def run_flywheel(quick: bool) -> dict[str, Any]:
    import torch

    from benchmarks.harness.stats import wilson_interval

    config = FlywheelBenchConfig.for_run(quick)
    torch.set_num_threads(config.threads)
    _use_own_database(f"{settings.DATABASES['default']['NAME']}_bench_flywheel")
    from webapp.flywheel.services.datasets import dataset_build
    from webapp.flywheel.services.promotion import checkpoint_promote
    from webapp.flywheel.services.refresh import pool_refresh
    from webapp.flywheel.services.sampling import record_expert_episode
    from webapp.flywheel.services.training import checkpoint_sft
    from webapp.flywheel.services.validation import validate_pending
    from webapp.store.checkpoints import checkpoint_create_initial
    from webapp.store.models import Task, TaskPool
    from workers.envs.browser.miniwob import MiniWoBEnv

    tasks, k, iterations = config.tasks, config.k, config.iterations
    run = uuid.uuid4().hex[:6]
    started = time.perf_counter()

    pool = TaskPool.objects.create(name=f"bench-flywheel-{run}", validation_mode="verifier")
    task_rows = [
        Task.objects.create(pool=pool, external_id=name, instruction="", env_kind="browser", source="miniwob")
        for name in tasks
    ]
    task_ids = [t.pk for t in task_rows]
    current = checkpoint_create_initial(version=f"bench-init-{run}", seed=0)
    figures: dict[str, Any] = {"tasks": list(tasks), "k": k, "iterations": []}
    intervals: dict[str, Any] = {}
    success0 = _success(config, current, intervals)
    figures["success_untrained"] = success0

    for it in range(iterations):
        entry: dict[str, Any] = {"iteration": it, "checkpoint": current.version}
        _log(f"iteration {it}: rejection sampling with {current.version}")
        entry["rejection_sampling"] = _rejection_sampling(
            config, current, task_ids, config.rs_seed_base + 100 * it
        )
        validate_pending(pool_id=pool.pk)
        refresh = pool_refresh(pool=pool)
        entry["buckets"] = refresh.buckets
        entry["success"] = success0 if it == 0 else _success(config, current, intervals)
        entry["success_ci95"] = intervals.get(current.version)
        if it == iterations - 1:
            figures["iterations"].append(entry)
            break
        if it == 0:
            env = MiniWoBEnv(wait_s=0.0)
            try:
                demos = [record_expert_episode(env=env, task=t, seed=config.demo_seed_base + s) for t in task_rows
                         for s in range(config.demos_per_task)]  # fmt: skip
            finally:
                env.close()
            entry["expert_demonstrations"] = sum(1 for d in demos if d is not None)
            validate_pending(pool_id=pool.pk)
        dataset = dataset_build(filters={"pool": pool.pk}, name=f"bench iteration {it + 1}")
        entry["dataset"] = {"version": dataset.version, "sft": dataset.sft_count, "ct": dataset.ct_count}
        _log(f"SFT of {current.version} on dataset v{dataset.version} ({dataset.sft_count} SFT trajectories)")
        t0 = time.perf_counter()
        child = checkpoint_sft(parent=current, dataset=dataset, steps=config.sft_steps[min(it, 1)], seed=it,
                               version=f"bench-sft{it + 1}-{run}")  # fmt: skip
        entry["sft"] = {**child.metrics["sft"], "wall_s": round(time.perf_counter() - t0, 1)}
        _log(f"RL from {child.version} for {config.rl_minutes} min")
        entry["rl"], child = _rl_then_pick(config, child, pool, it)
        checkpoint_promote(checkpoint=child, targets=["annotation", "rl_start"])
        entry["promoted"] = child.version
        current = child
        figures["iterations"].append(entry)

    rates = [e["rejection_sampling"]["v1_rate"] for e in figures["iterations"]]
    successes = [e["success"] for e in figures["iterations"]]
    episodes = [e["rejection_sampling"]["episodes"] for e in figures["iterations"]]
    v1 = [e["rejection_sampling"]["v1"] for e in figures["iterations"]]
    figures.update(
        vs1_rate_by_iteration=rates,  # SPEC §10
        sft_gain_points=round(100 * (max(successes) - success0), 1),  # SPEC §10: best held-out over untrained
        vs1_rate_ci95_by_iteration=[
            [round(x, 4) for x in wilson_interval(k, n)] for k, n in zip(v1, episodes, strict=True)
        ],
        success_per_iteration=successes,
        success_ci95_per_iteration=[e["success_ci95"] for e in figures["iterations"]],
        v1_rate_rises=all(b > a for a, b in pairwise(rates)),
        annotation_model=current.version,
        seconds=round(time.perf_counter() - started, 1),
        config=asdict(config),
    )
    return figures
