"""`bench learn` (issue 7 item 7, issue 24): does RL through the real engine improve a weak SFT policy?

1. Scripted-expert demonstrations on the first seeds of the tuning range of each MiniWoB++ task
   (workers.policy.expert), with the expert's thoughts by default.
2. A deliberately limited SFT of a fresh embedded model on them (few optimizer steps); its thought
   is then capped (`LearnBenchConfig.max_thought`, 0 by default), so every policy acts directly.
3. Greedy success on the evaluation seeds (workers.policy.evaluate) — the "before". A full run reads
   the final-test range (the reported figure), --quick the validation range (benchmarks.harness.stats).
4. An RL run (step-wise GRPO, with or without experience-pool injection of the stored
   demonstrations) from that checkpoint through the real engine: Celery rollout and trainer
   workers, env host with Chromium, policy server.
5. Greedy success of the run's averaged weights (grpo.weight_ema) on the same seeds — the "after"
   — and, beside it, of the newest online weights. Every rate carries its Wilson 95 % interval.

A task set without demonstrations (`FLYWHEEL_LEARN_TASK_SET=new`, issue 34 item 4; its tasks have
no scripted expert) skips steps 1-2: RL starts from the starter model a fresh install serves
(workers.policy.starter), with nothing stored and no injection; the JSON says `"start": "starter"`.

`run_learn(quick)` runs it in a child process on its own database (`<name>_bench_learn`). The settings
are `benchmarks.harness.config.LearnBenchConfig`; their history is in benchmarks/HISTORY.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.harness.config import LEARN_STARTER_SETS, LearnBenchConfig
from benchmarks.harness.engine import bench_user, child_main, run_in_child, start_checkpoint, task_pool
from benchmarks.harness.stats import rate
from webapp.settings.env import database_url


def report_figures(report: Any) -> dict[str, Any]:
    """Mean success of an evaluation (workers.policy.evaluate.EvalReport) with its interval, and
    each task's rate with its own."""
    episodes = report.episodes
    tasks: dict[str, list[bool]] = {}
    for ep in episodes:
        tasks.setdefault(ep.task, []).append(bool(ep.success))
    return {
        "mean": round(report.mean, 4),
        **{k: v for k, v in rate(sum(ep.success for ep in episodes), len(episodes)).items() if k != "rate"},
        "per_task": {t: rate(sum(r), len(r), 3) for t, r in tasks.items()},
    }


def _start(config: LearnBenchConfig, workdir: Path) -> tuple[Any, dict[str, Any]]:
    """The model RL starts from, and what made it: a short SFT on the set's expert demonstrations,
    or, for a set without demonstrations (`config.start == "starter"`), the starter model."""
    return _starter_start() if config.start == "starter" else _sft_start(config, workdir)


def _starter_start() -> tuple[Any, dict[str, Any]]:
    """The starter model a fresh install serves (workers.policy.starter; trained once per machine on
    the first set's demonstrations and cached), as it is: no SFT, no demonstration of the set."""
    from workers.policy.embedded.policy import load_checkpoint
    from workers.policy.starter import cached_starter

    t0 = time.perf_counter()
    directory, _ = cached_starter(Path(settings.FLYWHEEL_CACHE_DIR))
    model, _ = load_checkpoint(directory)
    model.eval()
    return model, {"examples": 0, "loss_last": None, "demos_s": 0.0, "sft_s": 0.0,
                   "starter_s": time.perf_counter() - t0, "model": directory.name}  # fmt: skip


def _sft_start(config: LearnBenchConfig, workdir: Path) -> tuple[Any, dict[str, Any]]:
    """Expert demonstrations on the tuning seeds and a short SFT of a fresh model on them."""
    from workers.policy.embedded.policy import new_model
    from workers.policy.expert import collect_demonstrations
    from workers.policy.sft import sft_train

    t0 = time.perf_counter()
    examples = collect_demonstrations(config.tasks, config.demo_range, thoughts=config.demo_thoughts)
    demos_s = time.perf_counter() - t0
    model = new_model(seed=0)
    t0 = time.perf_counter()
    sft = sft_train(model, examples, workdir / "sft", steps=config.sft_steps, lr=1e-3, batch_size=16, seed=0)
    if config.max_thought is not None:
        model.config.max_thought = config.max_thought
    model.eval()
    return model, {"examples": len(examples), "loss_last": sft.get("loss_last"), "demos_s": demos_s,
                   "sft_s": time.perf_counter() - t0, "model": "sft"}  # fmt: skip


def _rl_after(config: LearnBenchConfig, rl: dict[str, Any], model: Any) -> tuple[Any, Any, bool]:
    """Evaluations of the run's online and averaged weights (online = the start when none trained)."""
    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.policy.evaluate import evaluate
    from workers.rl.trainer import EMA_DIR

    online_dir = Path(rl["trainer_dir"]) if rl["trainer_dir"] else None
    averaged_dir = online_dir / EMA_DIR if online_dir and (online_dir / EMA_DIR).is_dir() else None
    online_policy = (
        EmbeddedPolicy.from_pretrained(online_dir, seed=0) if online_dir else EmbeddedPolicy(model, seed=0)
    )
    online = evaluate(online_policy, config.tasks, config.eval_range)
    if averaged_dir is None:
        return online, online, False
    return (
        evaluate(EmbeddedPolicy.from_pretrained(averaged_dir, seed=0), config.tasks, config.eval_range),
        online,
        True,
    )


def learn_benchmark(
    config: LearnBenchConfig,
    *,
    start_checkpoint: Callable[[Path, Any], Any],
    pool: Callable[[str, list[tuple[str, int | None]]], Any],
    user: Callable[[], Any],
) -> dict[str, Any]:
    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.policy.evaluate import evaluate

    workdir = Path(tempfile.mkdtemp(prefix="bench-learn-"))
    model, sft = _start(config, workdir)
    timings: dict[str, float] = {k: sft.pop(k) for k in ("demos_s", "sft_s", "starter_s") if k in sft}
    t0 = time.perf_counter()
    before = evaluate(EmbeddedPolicy(model, seed=0), config.tasks, config.eval_range)
    timings["eval_before_s"] = time.perf_counter() - t0

    checkpoint = start_checkpoint(workdir, model)
    bench_pool = pool("bench-learn", [(t, None) for t in config.tasks])
    # The same demonstrations, stored (as the flywheel stores annotations): with injection they
    # pre-populate the run's experience pool (seed 002 §4.2); the ablation stores them too. A set
    # learned from the starter has none (no expert plays its tasks).
    stored = _store_demonstrations(bench_pool, config.demo_range, config) if config.start == "sft" else 0
    t0 = time.perf_counter()
    rl = rl_phase(
        checkpoint=checkpoint, pool=bench_pool, user=user(), workdir=workdir / "stack",
        minutes=config.rl_minutes, envs=config.envs, name="bench-learn", preset="grpo-dart",
        config={"grpo": config.grpo(), "curation": config.curation()},
    )  # fmt: skip
    timings["rl_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    after, online, averaged = _rl_after(config, rl, model)
    timings["eval_after_s"] = time.perf_counter() - t0
    figures = learn_figures(config, before, after, online, averaged, rl["success_rates"])
    result = {
        **figures,
        "start_model": sft["model"],
        "sft_examples": sft["examples"],
        "sft_loss_last": sft["loss_last"],
        "stored_demonstrations": stored,
        "rl_updates": rl["run"].updates_done,
        "rl_policy_version": rl["run"].policy_version,
        "rl_episodes": rl["run"].episodes_done,
        "rl_status": rl["run"].status,
        "rl_error": rl["run"].error,
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }
    # a headline that is not its table, or a "no demonstrations" figure that had some, is no figure
    if mismatches := headline_mismatches(result) + start_mismatches(result):
        raise RuntimeError("bench learn: " + "; ".join(mismatches))
    return result


def learn_figures(
    config: LearnBenchConfig, before: Any, after: Any, online: Any, averaged: bool, train_success: list[float]
) -> dict[str, Any]:
    """The figures of `bench learn` from its three evaluations (SPEC §10 keys first) and the run's
    training success per update."""
    b, a, o = report_figures(before), report_figures(after), report_figures(online)
    third = max(1, len(train_success) // 3)
    return {
        "success_before": b["mean"],
        "success_after": a["mean"],
        "gain_points": round(100.0 * (a["mean"] - b["mean"]), 1),
        "minutes": config.rl_minutes,
        "success_before_ci95": b["ci95"],
        "success_after_ci95": a["ci95"],
        "episodes_per_evaluation": a["n"],
        "split": config.split,
        "task_set": config.task_set,
        "start": config.start,
        "injection": config.injection,
        "before_per_task": b["per_task"],
        "after_per_task": a["per_task"],
        "after_weights": "averaged (EMA)" if averaged else "online",
        "success_after_online": o["mean"],
        "success_after_online_ci95": o["ci95"],
        "gain_points_online": round(100.0 * (o["mean"] - b["mean"]), 1),
        "after_online_per_task": o["per_task"],
        "goal_gain_points": 20.0,
        "train_success_first_third": round(sum(train_success[:third]) / third, 3) if train_success else None,
        "train_success_last_third": round(sum(train_success[-third:]) / third, 3) if train_success else None,
        "config": config.to_json(),
    }


# (headline, its interval, per-task table) of each evaluation in a `bench learn` JSON
EVALUATIONS = (
    ("success_before", "success_before_ci95", "before_per_task"),
    ("success_after", "success_after_ci95", "after_per_task"),
    ("success_after_online", "success_after_online_ci95", "after_online_per_task"),
)


def headline_mismatches(figures: dict[str, Any]) -> list[str]:
    """Where a `bench learn` JSON disagrees with its own per-task table (issue 35 item 5: a reported
    "before" of 42.5 % whose per-task rates added up to 38.3 %). Each evaluation's rate and interval
    are recomputed from the per-task counts, each task's rate and interval from its own counts, the
    gains from the rates; every task of the set is read on every evaluation seed. Empty: consistent."""
    config = figures.get("config") or {}
    tasks, seeds = config.get("tasks"), config.get("eval_seeds")
    out: list[str] = []
    pooled: dict[str, float] = {}
    for headline, interval, table_key in EVALUATIONS:
        table = figures.get(table_key)
        if not isinstance(table, dict) or not table:
            out.append(f"{table_key}: missing")
            continue
        if tasks is not None and sorted(table) != sorted(tasks):
            out.append(f"{table_key}: tasks {sorted(table)} are not the set's {sorted(tasks)}")
        k = n = 0
        for task, row in table.items():
            wins, count = row.get("successes"), row.get("n")
            if not isinstance(wins, int) or not isinstance(count, int) or not 0 <= wins <= count:
                out.append(f"{table_key}[{task}]: counts {wins}/{count} are not a success count of n")
                continue
            if seeds is not None and count != seeds:
                out.append(f"{table_key}[{task}]: n {count}, not the {seeds} evaluation seeds")
            own = rate(wins, count, 3)
            if row.get("rate") != own["rate"] or row.get("ci95") != own["ci95"]:
                out.append(f"{table_key}[{task}]: {row.get('rate')} {row.get('ci95')} is not {wins}/{count}")
            k, n = k + wins, n + count
        expect = rate(k, n)
        pooled[headline] = float(expect["rate"])
        if figures.get(headline) != expect["rate"]:
            out.append(
                f"{headline}: {figures.get(headline)}, but its table adds up to {k}/{n} = {expect['rate']}"
            )
        if figures.get(interval) != expect["ci95"]:
            out.append(f"{interval}: {figures.get(interval)}, but {k}/{n} gives {expect['ci95']}")
        if figures.get("episodes_per_evaluation") != n:
            out.append(
                f"episodes_per_evaluation: {figures.get('episodes_per_evaluation')}, {table_key} has {n}"
            )
    for gain, after in (("gain_points", "success_after"), ("gain_points_online", "success_after_online")):
        if after in pooled and "success_before" in pooled:
            expect_gain = round(100.0 * (pooled[after] - pooled["success_before"]), 1)
            if figures.get(gain) != expect_gain:
                out.append(f"{gain}: {figures.get(gain)}, but the tables give {expect_gain}")
    return out


def start_mismatches(figures: dict[str, Any]) -> list[str]:
    """Where a `bench learn` JSON of a set learned without demonstrations (LEARN_STARTER_SETS) says
    it had some: its start must be the starter, with no SFT example, no stored demonstration and no
    injection. JSONs of the other sets (and those written before the key existed) start from SFT.
    Empty: consistent."""
    expect = "starter" if figures.get("task_set") in LEARN_STARTER_SETS else "sft"
    out: list[str] = []
    if figures.get("start", "sft") != expect:
        out.append(
            f"start: {figures.get('start')!r}, but the {figures.get('task_set')!r} set starts from {expect!r}"
        )
    if expect == "starter":
        for key, none in (("injection", "none"), ("sft_examples", 0), ("stored_demonstrations", 0)):
            if key in figures and figures[key] != none:
                out.append(f"{key}: {figures[key]!r}, but a set without demonstrations has {none!r}")
        if (figures.get("config") or {}).get("demo_range") is not None:
            out.append("config.demo_range: a set without demonstrations reads no tuning seed")
    return out


def _store_demonstrations(pool: Any, seeds: range, config: LearnBenchConfig) -> int:
    """Scripted-expert episodes of every task of `pool` on `seeds`, stored as labelled annotation
    stand-ins (webapp.flywheel.services.sampling.record_expert_episode) with thoughts as the SFT
    demonstrations have them; returns how many succeeded."""
    from webapp.flywheel.services.sampling import record_expert_episode
    from workers.envs.browser.miniwob import MiniWoBEnv

    # A capped thought cannot hold the expert's: store action-only episodes then (the trainer
    # encodes a stored step with the start checkpoint's grammar and drops what exceeds it).
    store_thoughts = config.demo_thoughts and config.max_thought is None
    env = MiniWoBEnv(wait_s=0.0)
    try:
        episodes = [
            record_expert_episode(env=env, task=task, seed=seed, thoughts=store_thoughts)
            for task in pool.tasks.all()
            for seed in seeds
        ]
    finally:
        env.close()
    return sum(1 for t in episodes if t is not None and (t.final_reward or 0) > 0)


def rl_phase(
    *,
    checkpoint: Any,
    pool: Any,
    user: Any,
    workdir: Path,
    minutes: float,
    envs: int,
    name: str,
    config: dict[str, Any],
    preset: str = "grpo-dart",
) -> dict[str, Any]:
    """An RL run from `checkpoint` on `pool` through a local engine stack (real Celery rollout and
    trainer workers, env host, policy server) for at most `minutes`; the current database.

    Returns {run (final Run row), trainer_dir (newest weights, "" if none), checkpoint (the newest
    registered Checkpoint or None), success_rates (training success per update)}."""
    from django.test.utils import override_settings

    from rl_control import services
    from rl_control.engine.stack import LocalStack, launch_when_ready
    from rl_control.models import EngineState, Run, RunMetric
    from webapp.fleet import services as fleet
    from webapp.store.models import Checkpoint

    db = settings.DATABASES["default"]
    url = database_url(db)  # its password included: the platform's PostgreSQL takes none without
    stack = LocalStack(workdir, url, settings_module="webapp.settings.dev", envs=envs, slot_timeout_s=120.0,
                       updates_per_chunk=20)  # fmt: skip
    stack.start()
    try:
        with override_settings(**stack.settings_overrides()):
            fleet.registry.cache_clear()
            run = services.run_create(
                user=user, name=name, preset=preset, pool=pool, start_checkpoint=checkpoint,
                config={**config, "env": {**config.get("env", {}), "parallel_envs": envs},
                        "budget": {"max_updates": 10_000, "max_minutes": minutes}},
            )  # fmt: skip
            launch_when_ready(run)
            deadline = time.monotonic() + minutes * 60.0 + 120.0
            while time.monotonic() < deadline:
                run.refresh_from_db()
                if run.status != "running":
                    break
                services.run_enforce_budget(run=run)  # no beat here: the bench enforces max_minutes itself
                time.sleep(5.0)
            run.refresh_from_db()
            if run.status == "running":
                services.run_stop(run=run)
            state = EngineState.objects.get(run=run)
            rates = list(RunMetric.objects.filter(run=run, name="outcome/success_rate").order_by("step")
                         .values_list("value", flat=True))  # fmt: skip
    finally:
        stack.stop()
        fleet.registry.cache_clear()
    return {
        "run": Run.objects.get(pk=run.pk),
        "trainer_dir": state.trainer_dir,
        "checkpoint": Checkpoint.objects.filter(run=run).order_by("-created_at", "-id").first(),
        "success_rates": rates,
    }


def run_learn(quick: bool) -> dict[str, Any]:
    return run_in_child("benchmarks.learn", "learn", quick)


def drive_learn(quick: bool) -> dict[str, Any]:
    return learn_benchmark(LearnBenchConfig.for_run(quick), start_checkpoint=start_checkpoint, pool=task_pool,
                           user=bench_user)  # fmt: skip


def main(argv: list[str]) -> int:
    return child_main(drive_learn, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
