"""Engine benchmarks (SPEC §10, issue 7 items 7–8). Both run the real engine: Celery rollout and
trainer workers, an env host with Chromium + MiniWoB++, the embedded policy server, PostgreSQL,
Redis, in a database of their own (`<name>_bench_rollout`, `<name>_bench_learn`).

`run_rollout(quick)`: the same heterogeneous workload in async mode, then in sync mode (batch
barrier), each for a fixed wall-clock window, with PPO (one rollout is one scheduling unit; a sync
batch is one trajectory per environment, as in a coupled rollout-then-train loop). Heterogeneous:
eight MiniWoB++ tasks whose step budgets (`setup["max_steps"]`) span 1 to 20 steps, long-tailed as
real GUI task sets are; the start policy is untrained, so most episodes run to their budget. Every
action is followed by a transition pause (`setup["transition_pause_ms"]`, as OSWorld's
`sleep_after_execution` and AndroidWorld's transition pause): on a production fleet an action's
cost is mostly waiting on the environment and a GPU server, not this machine's two CPU cores, and
without the pause the 2-core box itself, not the scheduler, would be what is measured.
Figures per mode: training-usable actions per minute (steps of trajectories the trainer actually
consumed, divided by the window), environment utilisation (time inside episodes ÷ time leased, the
engine's own accounting), trainer idle fraction; and the ratio async ÷ sync. "Training-usable" =
steps the trainer gave a loss to: steps of completed rollouts it consumed that were within the
staleness bound of that update (stale steps and stale, crashed, abandoned and unfinished rollouts
do not count). Goals: ratio ≥ 2.5, async utilisation ≥ 0.9.

`run_learn(quick)`: MiniWoB++ 8 tasks; scripted-expert demonstrations → a deliberately limited
SFT (few steps) → success rate on held-out seeds → RL through the real engine (GRPO) for a time
budget → success rate on the same held-out seeds with the newest RL checkpoint, per task.
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


def optional_env(name: str, default: str, cast: type[int] | type[float]) -> Any:
    """A bench setting from the environment: `cast` of its value, or None when it is set to ""."""
    value = os.environ.get(name, default)
    return cast(value) if value else None


WORKLOAD: list[tuple[str, int]] = [  # (MiniWoB++ task, step budget)
    ("click-test", 1),
    ("focus-text", 1),
    ("click-button", 2),
    ("click-link", 3),
    ("click-tab", 5),
    ("click-dialog", 8),
    ("enter-text", 13),
    ("click-checkboxes", 20),
]
# Async mode trains on steps up to this many versions old (truncated IS corrects the lag; AReaL runs
# η = 4–8). With the engine default of 1, versions advance every few seconds here (8-trajectory
# batches) while a 20-step episode takes ~25 s, so most steps of long episodes were too old to
# train on (measured: 29 % of the async steps stale, ratio 1.47 at --quick).
ASYNC_STALENESS = 4
# Thought cap (tokens) of the untrained start model, as in bench learn's RL runs. Uncapped, the
# untrained model writes ~110 random tokens per action; decoding them and training on them made this
# 2-core machine's CPU, not the scheduler, what the bench measured (measured 2026-11-26 on a 2.45 GHz
# EPYC: the policy server saturated one core at ~1.4 actions/s, async env utilisation 1.0 but mostly
# waiting on it; ratio 1.60, against 2.62 on a faster machine with the same code path). Capped, an
# action's cost is mostly the transition pause, as on a fleet with GPU servers. "" = uncapped (96).
ROLLOUT_MAX_THOUGHT = optional_env("FLYWHEEL_ROLLOUT_MAX_THOUGHT", "0", int)
LEARN_TASKS = ["click-test", "click-button", "click-link", "focus-text", "enter-text", "click-dialog",
               "click-tab", "click-checkboxes"]  # fmt: skip


def _bench_db(kind: str) -> tuple[str, str]:
    from webapp.store.bench import _db_url, _recreate_database

    name = f"{settings.DATABASES['default']['NAME']}_bench_{kind}"
    _recreate_database(name)
    url = _db_url(name)
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "webapp.settings.dev"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], env=env, check=True, cwd=settings.BASE_DIR
    )
    return name, url


def _driver(kind: str, quick: bool) -> dict[str, Any]:
    """Run the measurement in a child process on the bench database; its last line is JSON."""
    _, url = _bench_db(kind)
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "webapp.settings.dev"}
    args = [sys.executable, "-m", "rl_control.engine.bench", kind] + (["--quick"] if quick else [])
    out = subprocess.run(args, env=env, cwd=settings.BASE_DIR, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(
            f"bench {kind} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        )
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


def _measure_mode(
    mode: str, pool: Any, checkpoint: Any, envs: int, window_s: float, step_cap: int
) -> dict[str, Any]:
    from rl_control import services
    from rl_control.engine.slots import slot_read
    from rl_control.engine.stack import wait_for
    from rl_control.models import RolloutGroup, Run, RunMetric
    from webapp.store.models import Step, Trajectory

    run = services.run_create(
        user=_user(), name=f"bench-{mode}", algorithm="ppo", mode=mode, pool=pool, start_checkpoint=checkpoint,
        config={
            "env": {"parallel_envs": envs},
            # every update is a policy update with a weight push (no critic-only pretraining phase)
            "ppo": {"value_pretrain_max_updates": 0},
            "curation": {"step_cap": step_cap, "min_batch_trajectories": envs,
                         "staleness_bound": ASYNC_STALENESS if mode == "async" else 0,
                         "injection": "none"},
            "budget": {"max_updates": 10_000, "max_minutes": 60},
        },
    )  # fmt: skip
    services.run_launch(run=run)
    # The window starts when the first episode starts (the trainer's start-up is not measured).
    wait_for("the first rollout", lambda: Trajectory.objects.filter(run=run).exists(), 300)
    started = time.time()
    time.sleep(window_s)
    run.refresh_from_db()
    services.run_stop(run=run)
    wait_for("the slots to stop", lambda: all(slot_read(run.pk, k).get("state") != "running" for k in range(envs)),
             300, every_s=1.0)  # fmt: skip
    # Training-usable: steps the trainer gave a loss to. Completed rollouts it consumed (the
    # curator's train_ids, whether or not their group then carried a GRPO signal) count with their
    # steps within the staleness bound of the update that consumed them; excluded are stale steps
    # and stale, crashed, abandoned and unfinished rollouts.
    bound = int(run.config["curation"]["staleness_bound"])
    usable = 0
    for group in RolloutGroup.objects.filter(run=run).exclude(state="open").exclude(trained_version=None):
        ids = [int(i) for i in group.plan.get("train_ids", [])]
        oldest = group.trained_version - 1 - bound  # the update ran at trained_version - 1
        versions = Step.objects.filter(trajectory_id__in=ids).values_list("policy_version", flat=True)
        usable += sum(1 for v in versions if v.isdigit() and int(v) >= oldest)
    every = Trajectory.objects.filter(run=run)

    def mean(name: str) -> float | None:
        values = list(RunMetric.objects.filter(run=run, name=name).values_list("value", flat=True))
        return round(sum(values) / len(values), 4) if values else None

    return {
        "window_s": round(time.time() - started, 1),
        "usable_actions_per_min": round(60.0 * usable / window_s, 2),
        "usable_actions": usable,
        "stale_steps_frac": mean("efficiency/stale_steps_frac"),
        "all_actions": sum(every.values_list("num_steps", flat=True)),
        "episodes": every.filter(status="completed").count(),
        "updates": Run.objects.get(pk=run.pk).updates_done,
        "env_utilization": mean("efficiency/env_utilization"),
        "trainer_idle_frac": mean("efficiency/trainer_idle_frac"),
        "weight_sync_s": mean("efficiency/weight_sync_s"),
        "update_s": mean("efficiency/update_s"),
    }


def drive_rollout(quick: bool) -> dict[str, Any]:
    from django.test.utils import override_settings

    from rl_control.engine.stack import LocalStack

    envs = 4 if quick else 8
    window_s = 120.0 if quick else 300.0
    pause_ms = 500 if quick else 1000
    step_cap = max(budget for _, budget in WORKLOAD)
    workdir = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    db = settings.DATABASES["default"]
    stack = LocalStack(workdir, f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT']}/{db['NAME']}",
                       settings_module="webapp.settings.dev", envs=envs, slot_timeout_s=120.0,
                       updates_per_chunk=1000)  # fmt: skip
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model

    config = FlywheelPolicyConfig(flywheel_version="0")
    if ROLLOUT_MAX_THOUGHT is not None:
        config.max_thought = ROLLOUT_MAX_THOUGHT
    checkpoint = _start_checkpoint(workdir, new_model(config, seed=0))
    stack.start()
    load_before = os.getloadavg()[0]
    try:
        with override_settings(**stack.settings_overrides()):
            from webapp.fleet import services as fleet

            fleet.registry.cache_clear()
            out = {}
            for mode in ("async", "sync"):
                pool = _pool(f"bench-rollout-{mode}", list(WORKLOAD), pause_ms)
                out[mode] = _measure_mode(mode, pool, checkpoint, envs, window_s, step_cap)
    finally:
        stack.stop()
    a, s = out["async"]["usable_actions_per_min"], out["sync"]["usable_actions_per_min"]
    return {
        "quick": quick,
        "envs": envs,
        "window_s": window_s,
        "workload": dict(WORKLOAD),
        "transition_pause_ms": pause_ms,
        "algorithm": "ppo",
        "async_staleness_bound": ASYNC_STALENESS,
        "max_thought_tokens": ROLLOUT_MAX_THOUGHT,
        "async": out["async"],
        "sync": out["sync"],
        "ratio": round(a / s, 3) if s else None,
        "goal_ratio": 2.5,
        "goal_async_util": 0.9,
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }


def main(argv: list[str]) -> int:
    import django

    django.setup()
    kind, quick = argv[0], "--quick" in argv
    figures = drive_rollout(quick) if kind == "rollout" else drive_learn(quick)
    print(json.dumps(figures))
    return 0


def drive_learn(quick: bool) -> dict[str, Any]:
    from rl_control.engine.learn import learn_benchmark

    return learn_benchmark(quick=quick, start_checkpoint=_start_checkpoint, pool=_pool, user=_user,
                           tasks=LEARN_TASKS)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
