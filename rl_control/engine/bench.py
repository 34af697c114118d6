"""Engine benchmarks (SPEC §10, issues 7 and 24). Both run the real engine: Celery rollout and
trainer workers, an env host with Chromium + MiniWoB++, the run's policy server, PostgreSQL, Redis,
in a database of their own (`<name>_bench_rollout`, `<name>_bench_learn`). Their settings are
`workers.benchkit.config.RolloutBenchConfig` / `LearnBenchConfig`; history in docs/benchmarks.md.

`run_rollout(quick)`: the same workload in async mode, then in sync mode, each for a fixed
wall-clock window. The workload ("starter", the default) is a trained policy's: the starter model
(workers/policy/starter.py, greedy success ≈ 42 % on its eight MiniWoB++ tasks) plays those tasks at
T = 0.5 with step-wise GRPO groups of N rollouts; an episode ends when the task is solved or at the
step cap, so its length is the policy's, and every action costs what the environment really takes
(no pause added). Sync mode is the standard synchronous recipe (verl's, DART's baseline): a batch of
B task groups × N rollouts is handed out, the trainer steps once the whole batch is back, pushes the
weights, and only then is the next batch handed out. ("budgets", the figures before 2026-11-26: the
untrained model with hand-picked step budgets and a transition pause, PPO, one trajectory per
environment per batch.)

Figures per mode: training-usable actions per minute (steps the trainer gave a loss to, within the
staleness bound of the update that consumed them, ÷ the window), environment utilisation (time an
environment executes an action or waits for one being computed for it — the time inside episodes,
from the claim to the stored result — ÷ the window's wall time × environments; waiting for a
rollout to be handed out, at the barrier or for a lease is idle), trainer idle fraction. Keys:
`async_actions_per_min`, `sync_actions_per_min`, `async_over_sync`, `async_env_utilization`,
`sync_env_utilization`, `workload`.

`run_learn(quick)`: rl_control.engine.learn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from webapp.benchkit.database import bench_database
from webapp.benchkit.processes import owned_processes
from workers.benchkit.config import ROLLOUT_BUDGETS, ROLLOUT_TASKS, LearnBenchConfig, RolloutBenchConfig


def _driver(kind: str, quick: bool) -> dict[str, Any]:
    """Run the measurement in a child process on the bench database; its last line is JSON. Stopped
    from outside, the child gets SIGTERM first, so its own clean-up (the stack) runs."""
    db = bench_database(kind)
    args = [sys.executable, "-m", "rl_control.engine.bench", kind] + (["--quick"] if quick else [])
    proc = subprocess.Popen(args, env=db.env, cwd=settings.BASE_DIR, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"bench {kind} failed ({proc.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return dict(json.loads(lines[-1]))


def run_rollout(quick: bool) -> dict[str, Any]:
    return _driver("rollout", quick)


def run_learn(quick: bool) -> dict[str, Any]:
    return _driver("learn", quick)


# ---------------------------------------------------------------------------- inside the driver


def _start_checkpoint(workdir: Path, model: Any = None) -> Any:
    from webapp.store.models import Checkpoint
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    path = workdir / "start"
    if model is None:
        model = new_model(FlywheelPolicyConfig(flywheel_version="0"), seed=0)
    model.config.flywheel_version = "0"
    model.save_pretrained(path)
    FlywheelTokenizer().save_pretrained(path)
    return Checkpoint.objects.create(version=f"bench-start-{workdir.name}", path=str(path))


def _pool(name: str, tasks: list[tuple[str, int | None]], pause_ms: int = 0) -> Any:
    """A pool of MiniWoB++ tasks: (task, step budget or None), each with the given transition pause."""
    from webapp.store.models import Task, TaskPool

    pool = TaskPool.objects.create(name=name)
    for task, budget in tasks:
        setup: dict[str, Any] = {"task": task}
        if budget:
            setup["max_steps"] = budget
        if pause_ms:
            setup["transition_pause_ms"] = pause_ms
        Task.objects.create(
            pool=pool, external_id=task, instruction="", env_kind="browser", source="miniwob", setup=setup
        )
    return pool


def _user() -> Any:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-rl")
    return user


def env_utilization(
    intervals: list[tuple[float, float | None]], start: float, end: float, envs: int
) -> float:
    """Share of the window [start, end] × `envs` that environments spent inside episodes: the
    episodes' (claimed, finished) times, clipped to the window (unfinished = still inside at the end)."""
    if end <= start or envs <= 0:
        return 0.0
    busy = sum(max(0.0, min(end, b if b is not None else end) - max(start, a)) for a, b in intervals)
    return round(busy / ((end - start) * envs), 4)


def _measure_mode(mode: str, pool: Any, checkpoint: Any, config: RolloutBenchConfig) -> dict[str, Any]:
    from django.utils import timezone

    from rl_control import services
    from rl_control.engine.slots import slot_read
    from rl_control.engine.stack import launch_when_ready, wait_for
    from rl_control.models import RolloutGroup, Run, RunMetric
    from webapp.store.models import Step, Trajectory

    if config.algorithm == "grpo":
        algo: dict[str, Any] = {"temperature": config.temperature, "rollouts_per_task": config.group_size,
                                "beta_kl": 0.0}  # fmt: skip
    else:  # "budgets", as before: every update a policy update with a weight push (no critic-only phase)
        algo = {"value_pretrain_max_updates": 0}
    run = services.run_create(
        user=_user(), name=f"bench-{mode}", algorithm=config.algorithm, mode=mode, pool=pool,
        start_checkpoint=checkpoint,
        config={
            "env": {"parallel_envs": config.envs},
            config.algorithm: algo,
            # fixed N (no dynamic sampling), so a sync batch is exactly B groups × N rollouts
            "curation": {"step_cap": config.step_cap,
                         **({"rollouts_min": config.group_size, "rollouts_max": config.group_size}
                            if config.algorithm == "grpo" else {}),
                         "min_batch_trajectories": config.batch_groups * config.group_size,
                         "staleness_bound": config.async_staleness if mode == "async" else 0,
                         "injection": "none"},
            "budget": {"max_updates": 10_000, "max_minutes": 60},
        },
    )  # fmt: skip
    launch_when_ready(run)
    # The window starts when the first episode starts (the trainer's start-up is not measured).
    wait_for("the first rollout", lambda: Trajectory.objects.filter(run=run).exists(), 300)
    started, window_start = time.time(), timezone.now()
    time.sleep(config.window_s)
    window_end = timezone.now()
    run.refresh_from_db()
    services.run_stop(run=run)
    wait_for("the slots to stop", lambda: all(slot_read(run.pk, k).get("state") != "running"
                                              for k in range(config.envs)), 300, every_s=1.0)  # fmt: skip
    # Training-usable: steps the trainer gave a loss to. Completed rollouts it consumed (the
    # curator's train_ids, whether or not their group then carried a GRPO signal) count with their
    # steps within the staleness bound of the update that consumed them.
    bound = int(run.config["curation"]["staleness_bound"])
    usable = 0
    for group in RolloutGroup.objects.filter(run=run).exclude(state="open").exclude(trained_version=None):
        ids = [int(i) for i in group.plan.get("train_ids", [])]
        oldest = group.trained_version - 1 - bound  # the update ran at trained_version - 1
        versions = Step.objects.filter(trajectory_id__in=ids).values_list("policy_version", flat=True)
        usable += sum(1 for v in versions if v.isdigit() and int(v) >= oldest)
    every = Trajectory.objects.filter(run=run)
    completed = every.filter(status="completed")
    lengths = sorted(completed.values_list("num_steps", flat=True))
    intervals = [
        (a.timestamp(), b.timestamp() if b else None)
        for a, b in every.values_list("created_at", "finished_at")
    ]

    def mean(name: str) -> float | None:
        values = list(RunMetric.objects.filter(run=run, name=name).values_list("value", flat=True))
        return round(sum(values) / len(values), 4) if values else None

    return {
        "window_s": round(time.time() - started, 1),
        "usable_actions_per_min": round(60.0 * usable / config.window_s, 2),
        "usable_actions": usable,
        "env_utilization": env_utilization(
            intervals, window_start.timestamp(), window_end.timestamp(), config.envs
        ),
        "env_utilization_of_leased": mean("efficiency/env_utilization"),  # the engine's own: ÷ time leased
        "stale_steps_frac": mean("efficiency/stale_steps_frac"),
        "all_actions": sum(every.values_list("num_steps", flat=True)),
        "episodes": len(lengths),
        "episode_steps_p50": lengths[len(lengths) // 2] if lengths else None,
        "episode_steps_max": lengths[-1] if lengths else None,
        "success_rate": round(completed.filter(final_reward__gt=0).count() / len(lengths), 3)
        if lengths
        else None,
        "updates": Run.objects.get(pk=run.pk).updates_done,
        "trainer_idle_frac": mean("efficiency/trainer_idle_frac"),
        "weight_sync_s": mean("efficiency/weight_sync_s"),
        "update_s": mean("efficiency/update_s"),
    }


def _rollout_start(config: RolloutBenchConfig, workdir: Path) -> Any:
    """The start checkpoint: the starter model (trained once per machine, cached) or, for the
    "budgets" workload, an untrained model with its thought capped."""
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import load_checkpoint, new_model
    from workers.policy.starter import cached_starter

    if config.workload == "starter":
        directory, _ = cached_starter(Path(settings.FLYWHEEL_CACHE_DIR))
        model, _ = load_checkpoint(directory)
        return _start_checkpoint(workdir, model)
    model_config = FlywheelPolicyConfig(flywheel_version="0")
    if config.max_thought is not None:
        model_config.max_thought = config.max_thought
    return _start_checkpoint(workdir, new_model(model_config, seed=0))


def rollout_figures(config: RolloutBenchConfig, out: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON of `bench rollout` from the two modes' measurements (SPEC §10 keys first)."""
    a, s = out["async"]["usable_actions_per_min"], out["sync"]["usable_actions_per_min"]
    if config.workload == "starter":
        workload = (f"starter model (trained, T {config.temperature:g}) on {len(ROLLOUT_TASKS)} MiniWoB++ tasks, "
                    f"GRPO groups of N={config.group_size}, sync batch {config.batch_groups} groups × "
                    f"{config.group_size}, step cap {config.step_cap}, the environments' own transition times")  # fmt: skip
    else:
        workload = (f"untrained model, PPO, hand-picked step budgets {sorted(ROLLOUT_BUDGETS.values())}, "
                    f"transition pause {config.transition_pause_ms} ms")  # fmt: skip
    return {
        "async_actions_per_min": a,
        "sync_actions_per_min": s,
        "async_over_sync": round(a / s, 3) if s else None,
        "async_env_utilization": out["async"]["env_utilization"],
        "sync_env_utilization": out["sync"]["env_utilization"],
        "workload": workload,
        "goal_async_over_sync": 2.0,
        "goal_async_env_utilization": 0.85,
        "config": config.to_json(),
        "async": out["async"],
        "sync": out["sync"],
    }


def drive_rollout(quick: bool) -> dict[str, Any]:
    from django.test.utils import override_settings

    from rl_control.engine.stack import LocalStack

    config = RolloutBenchConfig.for_run(quick)
    workdir = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    db = settings.DATABASES["default"]
    stack = LocalStack(workdir, f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT']}/{db['NAME']}",
                       settings_module="webapp.settings.dev", envs=config.envs, slot_timeout_s=120.0,
                       updates_per_chunk=1000)  # fmt: skip
    checkpoint = _rollout_start(config, workdir)
    if config.workload == "starter":
        tasks: list[tuple[str, int | None]] = [(t, None) for t in ROLLOUT_TASKS]
    else:
        tasks = list(ROLLOUT_BUDGETS.items())
    stack.start()
    load_before = os.getloadavg()[0]
    try:
        with override_settings(**stack.settings_overrides()):
            from webapp.fleet import services as fleet

            fleet.registry.cache_clear()
            out = {}
            for mode in ("async", "sync"):
                pool = _pool(f"bench-rollout-{mode}", tasks, config.transition_pause_ms)
                out[mode] = _measure_mode(mode, pool, checkpoint, config)
    finally:
        stack.stop()
    return {
        **rollout_figures(config, out),
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }


def drive_learn(quick: bool) -> dict[str, Any]:
    from rl_control.engine.learn import learn_benchmark

    return learn_benchmark(LearnBenchConfig.for_run(quick), start_checkpoint=_start_checkpoint, pool=_pool,
                           user=_user)  # fmt: skip


def main(argv: list[str]) -> int:
    import django

    django.setup()
    kind, quick = argv[0], "--quick" in argv
    with owned_processes():
        figures = drive_rollout(quick) if kind == "rollout" else drive_learn(quick)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
