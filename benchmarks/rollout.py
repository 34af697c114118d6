"""Engine benchmarks (SPEC §10, issues 7 and 24). Both run the real engine: Celery rollout and
trainer workers, an env host (Chromium + MiniWoB++, Xvfb desktops, games), the run's policy server,
PostgreSQL, Redis, in a database of their own (`<name>_bench_rollout`, `<name>_bench_learn`). Their settings are
`benchmarks.harness.config.RolloutBenchConfig` / `LearnBenchConfig`; history in benchmarks/HISTORY.md.

`run_rollout(quick)`: the same workload in async mode, then in sync mode, each for a fixed
wall-clock window. The workload ("mix", the default) is a trained policy's episodes over three
environment kinds in one run (`env.kind` "mixed": each rollout leases its task's kind): the starter
model (workers/policy/starter.py, trained on eight MiniWoB++ tasks, greedy success ≈ 42 % there)
plays those eight MiniWoB++ tasks in Chromium, every desktop task of the shipped OSWorld-format
examples on the sandboxed Xvfb desktop, and every shipped HTML5 game (in real time), at T = 0.5 with step-wise GRPO
groups of N rollouts; an episode ends when the task is solved, the environment says done, or at the
run's step cap, so its length is the policy's, and every action costs what the environment really
takes (no pause added). Both modes run the same seed: the first of the split's range (validation for
--quick, the final test for a full run; `ROLLOUT_SEEDS`). Sync mode is the standard synchronous
recipe (verl's, DART's baseline): a batch of B task groups × N rollouts is handed out, the trainer
steps once the whole batch is back, pushes the weights, and only then is the next batch handed out.
("starter": the same on the MiniWoB++ tasks only; "budgets", the figures before 2026-11-26: the
untrained model with hand-picked step budgets and a transition pause, PPO, one trajectory per
environment per batch.)

Figures per mode: training-usable actions per minute (steps the trainer gave a loss to, within the
staleness bound of the update that consumed them, ÷ the window), environment utilisation (time an
environment executes an action or waits for one being computed for it — the time inside episodes,
from the claim, or from the lease of a "mixed" run, to the stored result — ÷ the window's wall time
× environments; waiting for a rollout to be handed out, at the barrier or for a lease is idle),
trainer idle fraction, figures per environment kind (`by_kind`) and, in sync mode, where the time
goes (`sync_phases`: each batch's rollout phase and the train gap after it). Keys:
`async_actions_per_min`, `sync_actions_per_min`, `async_over_sync` (with a bootstrap interval over
task groups), `async_env_utilization`, `sync_env_utilization`, `workload`; beside them the same in
training-usable episodes (one trajectory, DART's scheduling unit: `async_over_sync_episodes`; DART's
throughput figure, like SPEC's key, is in actions per minute) and actions per
usable episode per mode, since async_over_sync = (episodes, ratio) × (actions per episode, ratio)
and an episode is 1 step or the cap by the task instance and the policy's luck; the "remote"
workload adds its `latency` distribution (benchmarks/remote_vm.py).

"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.harness.config import (
    ROLLOUT_BUDGETS,
    ROLLOUT_KINDS,
    ROLLOUT_TASKS,
    RolloutBenchConfig,
)
from benchmarks.harness.cpu import CpuWindow, cpu_ceiling
from benchmarks.harness.engine import bench_user, child_main, run_in_child, start_checkpoint, task_pool
from benchmarks.harness.figures import env_utilization, episode_summary, kind_figures, sync_phases
from benchmarks.harness.stats import bootstrap_sum_ratio_interval
from benchmarks.remote_vm import RemoteLatency
from webapp.settings.env import database_url


def run_rollout(quick: bool) -> dict[str, Any]:
    return run_in_child("benchmarks.rollout", "rollout", quick)


# ---------------------------------------------------------------------------- inside the driver


def mix_pool(name: str) -> Any:
    """The "mix" workload's pool: the starter's MiniWoB++ tasks (browser), every desktop task of the
    shipped OSWorld-format examples (the importer disables what this host cannot run) and every
    shipped game in real time, through the importer `demo_setup` uses (games have none: a row each)."""
    from demo.setup import osworld_examples_dir
    from webapp.store.importers.services import task_import_run
    from webapp.store.models import Task, TaskPool
    from workers.envs.games.env import list_games

    task_import_run(pool_name=name, create_pool=True, paths=[osworld_examples_dir()], fmt="osworld",
                    miniwob=list(ROLLOUT_TASKS))  # fmt: skip
    pool = TaskPool.objects.get(name=name)
    # The game's own instruction and parameters (workers.envs.games.env), in real time: virtual-time
    # games starting at once in one Chromium hang (3 of 4 concurrent resets, benchmarks/HISTORY.md).
    for game in list_games():
        Task.objects.create(pool=pool, external_id=f"games/{game}", instruction="", env_kind="game",
                            source="game", setup={"game": game, "virtual_time": False})  # fmt: skip
    return pool


def pool_kinds(pool: Any) -> dict[str, list[str]]:
    """The enabled tasks of a pool by environment kind (what a run over it plays)."""
    from webapp.store.models import Task

    out: dict[str, list[str]] = {}
    rows = Task.objects.filter(pool=pool, enabled=True, supported=True).order_by("env_kind", "external_id")
    for kind, external_id in rows.values_list("env_kind", "external_id"):
        out.setdefault(kind, []).append(external_id)
    return out


def usable_counts(versions_by_rollout: list[list[str]], oldest: int) -> tuple[int, int]:
    """(usable steps, usable episodes) of one consumed group: its rollouts' step versions, a step
    usable when its version is at least `oldest`, an episode when one of its steps is."""
    usable = [
        sum(1 for v in versions if v.isdigit() and int(v) >= oldest) for versions in versions_by_rollout
    ]
    return sum(usable), sum(1 for n in usable if n)


def _usable_by_group(run: Any) -> list[tuple[int, int]]:
    """Training-usable (steps, episodes) of each consumed group: steps the trainer gave a loss to.
    Completed rollouts it consumed (the curator's train_ids, whether or not their group then carried
    a GRPO signal) count with their steps within the staleness bound of the update that consumed
    them, and as an episode when one of their steps does."""
    from rl_control.models import RolloutGroup
    from webapp.store.models import Step

    bound = int(run.config["curation"]["staleness_bound"])
    out = []
    for group in RolloutGroup.objects.filter(run=run).exclude(state="open").exclude(trained_version=None):
        ids = [int(i) for i in group.plan.get("train_ids", [])]
        oldest = group.trained_version - 1 - bound  # the update ran at trained_version - 1
        versions: dict[int, list[str]] = {i: [] for i in ids}
        for trajectory_id, version in Step.objects.filter(trajectory_id__in=ids).values_list(
            "trajectory_id", "policy_version"
        ):
            versions[trajectory_id].append(version)
        out.append(usable_counts(list(versions.values()), oldest))
    return out


def _episodes(run: Any) -> list[dict[str, Any]]:
    """The run's episodes: kind, status, steps, reward, the batch of their group (sync), and their
    (start, end) in unix seconds. An episode starts when its environment is ready: a "mixed" run's
    wait for a lease of the task's kind (`lease_wait_s`) is not inside it."""
    from rl_control.models import RolloutGroup
    from webapp.store.models import Trajectory

    batches = dict(RolloutGroup.objects.filter(run=run).values_list("pk", "batch"))
    rows = Trajectory.objects.filter(run=run).values_list(
        "task__env_kind", "status", "num_steps", "final_reward", "created_at", "finished_at", "metadata"
    )
    out = []
    for kind, status, steps, reward, created, finished, meta in rows:
        engine = (meta or {}).get("engine", {})
        out.append({"kind": kind, "status": status, "steps": steps, "reward": reward,
                    "batch": batches.get(engine.get("group")),
                    "start": created.timestamp() + float(engine.get("lease_wait_s") or 0.0),
                    "end": finished.timestamp() if finished else None})  # fmt: skip
    return out


def _measure_mode(mode: str, pool: Any, checkpoint: Any, config: RolloutBenchConfig) -> dict[str, Any]:
    from django.utils import timezone

    from rl_control import services
    from rl_control.engine.slots import slot_read
    from rl_control.engine.stack import launch_when_ready, wait_for
    from rl_control.models import Run, RunMetric
    from webapp.store.models import Trajectory
    from workers.rl.run_config import MIXED_KIND

    if config.algorithm == "grpo":
        algo: dict[str, Any] = {"temperature": config.temperature, "rollouts_per_task": config.group_size,
                                "beta_kl": 0.0}  # fmt: skip
    else:  # "budgets", as before: every update a policy update with a weight push (no critic-only phase)
        algo = {"value_pretrain_max_updates": 0}
    run = services.run_create(
        user=bench_user(), name=f"bench-{mode}", algorithm=config.algorithm, mode=mode, pool=pool,
        start_checkpoint=checkpoint,
        config={
            "seed": config.seed,
            "env": {"parallel_envs": config.envs,
                    "kind": MIXED_KIND if config.workload == "mix" else "browser"},
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
    load = os.getloadavg()[0]
    cpu = CpuWindow(os.getpid(), stack_role, services=("postgres", "redis-server"))
    cpu.start()
    time.sleep(config.window_s)
    window_end = timezone.now()
    load_end = os.getloadavg()[0]
    cpu_figures = cpu.stop()
    run.refresh_from_db()
    services.run_stop(run=run)
    wait_for("the slots to stop", lambda: all(slot_read(run.pk, k).get("state") != "running"
                                              for k in range(config.envs)), 300, every_s=1.0)  # fmt: skip
    by_group = _usable_by_group(run)
    usable, usable_episodes = [a for a, _ in by_group], [e for _, e in by_group]
    episodes = _episodes(run)
    summary = episode_summary([e for e in episodes if e["status"] == "completed"])

    def mean(name: str) -> float | None:
        values = list(RunMetric.objects.filter(run=run, name=name).values_list("value", flat=True))
        return round(sum(values) / len(values), 4) if values else None

    return {
        "window_s": round(time.time() - started, 1),
        "load_avg_1m": [round(load, 2), round(load_end, 2)],  # at the window's start and end
        "cpu": cpu_figures,
        "usable_actions_per_min": round(60.0 * sum(usable) / config.window_s, 2),
        "usable_actions": sum(usable),
        "usable_by_group": usable,
        "usable_episodes_per_min": round(60.0 * sum(usable_episodes) / config.window_s, 2),
        "usable_episodes_by_group": usable_episodes,
        "env_utilization": env_utilization(
            [(e["start"], e["end"]) for e in episodes],
            window_start.timestamp(),
            window_end.timestamp(),
            config.envs,
        ),
        "env_utilization_of_leased": mean("efficiency/env_utilization"),  # the engine's own: ÷ time leased
        "stale_steps_frac": mean("efficiency/stale_steps_frac"),
        "all_actions": sum(e["steps"] for e in episodes),
        "episodes": summary["episodes"],
        "episode_steps_p50": summary["steps_p50"],
        "episode_steps_max": summary["steps_max"],
        "success_rate": summary["success_rate"],
        "by_kind": kind_figures(episodes),
        **({"sync_phases": sync_phases(episodes, config.envs)} if mode == "sync" else {}),
        "updates": Run.objects.get(pk=run.pk).updates_done,
        "trainer_idle_frac": mean("efficiency/trainer_idle_frac"),
        "weight_sync_s": mean("efficiency/weight_sync_s"),
        "update_s": mean("efficiency/update_s"),
    }


def stack_role(cmdline: list[str]) -> str | None:
    """The role of one of the stack's processes from its command line (None: its parent's role):
    the run's policy server, the trainer, the rollout workers, the env hosts (with their Chromium,
    Xvfb and sandboxes below them) or this driver."""
    if any("workers.policy.server" in part for part in cmdline):
        return "policy_server"
    if "-Q" in cmdline[:-1]:
        queue = cmdline[cmdline.index("-Q") + 1]
        for prefix, role in (("train", "trainer"), ("rollout", "rollout_workers"), ("env", "environments")):
            if queue.startswith(prefix):
                return role
    if any("benchmarks.rollout" in part for part in cmdline):
        return "driver"
    return None


def _rollout_start(config: RolloutBenchConfig, workdir: Path) -> Any:
    """The start checkpoint: the starter model (trained once per machine, cached) or, for the
    "budgets" workload, an untrained model with its thought capped."""
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import load_checkpoint, new_model
    from workers.policy.starter import cached_starter

    if config.workload in ("mix", "starter", "remote"):
        directory, _ = cached_starter(Path(settings.FLYWHEEL_CACHE_DIR))
        model, _ = load_checkpoint(directory)
        return start_checkpoint(workdir, model)
    model_config = FlywheelPolicyConfig(flywheel_version="0")
    if config.max_thought is not None:
        model_config.max_thought = config.max_thought
    return start_checkpoint(workdir, new_model(model_config, seed=0))


def workload_text(config: RolloutBenchConfig, kinds: dict[str, list[str]] | None = None) -> str:
    """What the workload was, for the JSON's `workload`: `kinds` are the pool's tasks by kind."""
    common = (f"GRPO groups of N={config.group_size}, sync batch {config.batch_groups} groups × "
              f"{config.group_size}, step cap {config.step_cap}, run seed {config.seed} ({config.split} range), "
              f"the environments' own transition times")  # fmt: skip
    if config.workload == "mix":
        names = {"browser": "MiniWoB++", "desktop": "desktop (OSWorld-format, Xvfb sandbox)",
                 "game": "HTML5 game (real time)"}  # fmt: skip
        mix = "; ".join(
            f"{len(tasks)} {names.get(kind, kind)}: {', '.join(tasks)}"
            for kind, tasks in (kinds or {}).items()
        )
        return (
            f"starter model (trained on MiniWoB++, T {config.temperature:g}) on one run over {mix}; {common}"
        )
    if config.workload == "starter":
        return f"starter model (trained, T {config.temperature:g}) on {len(ROLLOUT_TASKS)} MiniWoB++ tasks, {common}"
    if config.workload == "remote":
        return (f"environments like remote VMs (not CPU-bound): starter model (trained, T {config.temperature:g}) "
                f"on {len(ROLLOUT_TASKS)} MiniWoB++ tasks, each call answered after a {RemoteLatency().describe()}; "
                f"{common}, plus those waits")  # fmt: skip
    return (f"untrained model, PPO, hand-picked step budgets {sorted(ROLLOUT_BUDGETS.values())}, "
            f"transition pause {config.transition_pause_ms} ms")  # fmt: skip


def rollout_figures(
    config: RolloutBenchConfig, out: dict[str, dict[str, Any]], kinds: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The JSON of `bench rollout` from the two modes' measurements (SPEC §10 keys first). The
    interval of `async_over_sync` is a bootstrap over each mode's consumed task groups (the
    workload's spread within one run; not the machine's load, which one run cannot show)."""
    a, s = out["async"]["usable_actions_per_min"], out["sync"]["usable_actions_per_min"]
    ga, gs = out["async"].get("usable_by_group"), out["sync"].get("usable_by_group")
    interval = bootstrap_sum_ratio_interval(ga, gs) if ga and gs and sum(gs) else None
    episodes = episode_ratio(out)
    cpu = {mode: out[mode].get("cpu") or {} for mode in ("async", "sync")}
    per_cpu_s = {
        mode: round(out[mode]["usable_actions_per_min"] / 60.0 / cpu[mode]["own_cores"], 3)
        if cpu[mode].get("own_cores") else None
        for mode in ("async", "sync")
    }  # fmt: skip
    return {
        "async_actions_per_min": a,
        "sync_actions_per_min": s,
        "async_over_sync": round(a / s, 3) if s else None,
        "async_over_sync_ci95": [round(x, 3) for x in interval] if interval else None,
        "async_env_utilization": out["async"]["env_utilization"],
        "sync_env_utilization": out["sync"]["env_utilization"],
        **episodes,
        "workload": workload_text(config, kinds),
        "workload_tasks": kinds,
        **({"latency": asdict(RemoteLatency())} if config.workload == "remote" else {}),
        "split": config.split,
        "goal_async_over_sync": 2.0,
        "goal_async_env_utilization": 0.85,
        # async ÷ sync = (cores the stack used, ratio) × (usable actions per CPU-second, ratio); the first
        # factor cannot exceed cores ÷ the cores sync mode used (`cpu_ceiling_async_over_sync`)
        "async_cores_used": cpu["async"].get("own_cores"),
        "sync_cores_used": cpu["sync"].get("own_cores"),
        "async_usable_actions_per_cpu_s": per_cpu_s["async"],
        "sync_usable_actions_per_cpu_s": per_cpu_s["sync"],
        "cpu_ceiling_async_over_sync": cpu_ceiling(
            cpu["sync"].get("own_cores"), cpu["sync"].get("cores") or 1
        ),
        "config": config.to_json(),
        "async": out["async"],
        "sync": out["sync"],
    }


def episode_ratio(out: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """async ÷ sync in training-usable episodes per minute (one trajectory, the unit DART schedules;
    its 1.9× throughput figure is in actions per minute, as SPEC's key is), and the
    identity async_over_sync = (episodes, ratio) × (usable actions per usable episode, ratio): the
    actions ratio also counts how long the episodes each mode happened to play were (1 to the step
    cap, by the task instance and the policy's luck), which on a few groups per mode can outweigh
    how many episodes each mode got through."""
    ea, es = (out[mode].get("usable_episodes_per_min") for mode in ("async", "sync"))
    if ea is None or es is None:
        return {}
    ga, gs = out["async"].get("usable_episodes_by_group"), out["sync"].get("usable_episodes_by_group")
    # A group is N episodes unless some were lost or stale: then resampling groups shows nothing of
    # the spread (the interval would be the point), so there is none.
    varies = bool(ga and gs and len(set(ga) | set(gs)) > 1)
    interval = bootstrap_sum_ratio_interval(ga, gs) if ga and gs and varies and sum(gs) else None
    per_episode = {
        mode: round(out[mode]["usable_actions_per_min"] / out[mode]["usable_episodes_per_min"], 3)
        if out[mode]["usable_episodes_per_min"] else None
        for mode in ("async", "sync")
    }  # fmt: skip
    return {
        "async_episodes_per_min": ea,
        "sync_episodes_per_min": es,
        "async_over_sync_episodes": round(ea / es, 3) if es else None,
        "async_over_sync_episodes_ci95": [round(x, 3) for x in interval] if interval else None,
        "async_actions_per_episode": per_episode["async"],
        "sync_actions_per_episode": per_episode["sync"],
        "actions_per_episode_ratio": round(per_episode["async"] / per_episode["sync"], 3)
        if per_episode["async"] and per_episode["sync"] else None,
    }  # fmt: skip


def drive_rollout(quick: bool) -> dict[str, Any]:
    from django.test.utils import override_settings

    from rl_control.engine.stack import LocalStack

    config = RolloutBenchConfig.for_run(quick)
    workdir = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    db = settings.DATABASES["default"]
    kinds_up = ROLLOUT_KINDS if config.workload == "mix" else ("browser",)
    stack = LocalStack(workdir, database_url(db),
                       settings_module="webapp.settings.dev", envs=config.envs, slot_timeout_s=120.0,
                       updates_per_chunk=1000, warm_pool={k: config.envs for k in kinds_up},
                       host_per_kind=True,
                       host_module="benchmarks.remote_vm" if config.workload == "remote" else None)  # fmt: skip
    checkpoint = _rollout_start(config, workdir)
    if config.workload in ("starter", "remote"):
        tasks: list[tuple[str, int | None]] = [(t, None) for t in ROLLOUT_TASKS]
    else:
        tasks = list(ROLLOUT_BUDGETS.items())
    stack.start()
    load_before = os.getloadavg()[0]
    kinds: dict[str, list[str]] = {}
    try:
        with override_settings(**stack.settings_overrides()):
            from webapp.fleet import services as fleet

            fleet.registry.cache_clear()
            out = {}
            for mode in ("async", "sync"):
                if config.workload == "mix":
                    pool = mix_pool(f"bench-rollout-{mode}")
                else:
                    pool = task_pool(f"bench-rollout-{mode}", tasks, config.transition_pause_ms)
                kinds = pool_kinds(pool)
                out[mode] = _measure_mode(mode, pool, checkpoint, config)
    finally:
        stack.stop()
    return {
        **rollout_figures(config, out, kinds),
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }


def main(argv: list[str]) -> int:
    return child_main(drive_rollout, argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
