"""`bench learn` (issue 7 item 7): does RL through the real engine improve a weak SFT policy?

1. Scripted-expert demonstrations on a few seeds of each MiniWoB++ task (workers.policy.expert).
2. A deliberately limited SFT of a fresh embedded model on them (few optimizer steps).
3. Success rate on held-out seeds (workers.policy.evaluate, greedy) — the "before".
4. An RL run (step-wise GRPO with experience-pool injection, async) from that checkpoint through the
   real engine: Celery rollout and trainer workers, env host with Chromium, policy server.
5. Success rate of the newest RL weights on the same held-out seeds — the "after", per task.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings


def learn_benchmark(
    *,
    quick: bool,
    start_checkpoint: Callable[[Path, Any], Any],
    pool: Callable[[str, list[tuple[str, int | None]]], Any],
    user: Callable[[], Any],
    tasks: list[str],
) -> dict[str, Any]:
    from django.test.utils import override_settings

    from rl_control import services
    from rl_control.engine.stack import LocalStack, wait_for
    from rl_control.models import EngineState, Run, RunMetric
    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.evaluate import evaluate
    from workers.policy.expert import collect_demonstrations
    from workers.policy.sft import sft_train

    workdir = Path(tempfile.mkdtemp(prefix="bench-learn-"))
    demo_seeds = range(0, 2 if quick else 3)
    held_out = range(5000, 5000 + (4 if quick else 15))
    sft_steps = 40 if quick else 120
    rl_minutes = 4.0 if quick else 25.0
    envs = 2
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    examples = collect_demonstrations(tasks, demo_seeds)
    timings["demos_s"] = time.perf_counter() - t0
    model = new_model(seed=0)
    t0 = time.perf_counter()
    sft = sft_train(model, examples, workdir / "sft", steps=sft_steps, lr=1e-3, batch_size=16, seed=0)
    timings["sft_s"] = time.perf_counter() - t0
    model.eval()
    t0 = time.perf_counter()
    before = evaluate(EmbeddedPolicy(model, seed=0), tasks, held_out)
    timings["eval_before_s"] = time.perf_counter() - t0

    checkpoint = start_checkpoint(workdir, model)
    db = settings.DATABASES["default"]
    stack = LocalStack(workdir / "stack", f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT']}/{db['NAME']}",
                       settings_module="webapp.settings.dev", envs=envs, slot_timeout_s=120.0,
                       updates_per_chunk=20)  # fmt: skip
    stack.start(Path(checkpoint.path))
    try:
        with override_settings(**stack.settings_overrides()):
            from webapp.fleet import services as fleet

            fleet.registry.cache_clear()
            run = services.run_create(
                user=user(), name="bench-learn", preset="grpo-dart", pool=pool("bench-learn", [(t, None) for t in tasks]),
                start_checkpoint=checkpoint,
                config={
                    "env": {"parallel_envs": envs},
                    "grpo": {"rollouts_per_task": 4, "lr": 2e-5, "beta_kl": 0.0, "temperature": 1.0},
                    "curation": {"rollouts_max": 4, "rollouts_min": 2, "step_cap": 6, "min_batch_trajectories": 8,
                                 "injection": "experience_pool"},
                    "budget": {"max_updates": 10_000, "max_minutes": rl_minutes},
                },
            )  # fmt: skip
            services.run_launch(run=run)
            t0 = time.perf_counter()
            deadline = time.monotonic() + rl_minutes * 60.0 + 120.0
            while time.monotonic() < deadline:
                run.refresh_from_db()
                if run.status != "running":
                    break
                services.run_enforce_budget(run=run)  # no beat here: the bench enforces max_minutes itself
                time.sleep(5.0)
            run.refresh_from_db()
            if run.status == "running":
                services.run_stop(run=run)
            timings["rl_s"] = time.perf_counter() - t0
            wait_for("the trainer to stop", lambda: EngineState.objects.get(run=run).trainer_dir or True, 60)
            state = EngineState.objects.get(run=run)
            final = Run.objects.get(pk=run.pk)
            rewards = list(RunMetric.objects.filter(run=run, name="outcome/success_rate").order_by("step")
                           .values_list("value", flat=True))  # fmt: skip
    finally:
        stack.stop()
    after_policy = (
        EmbeddedPolicy.from_pretrained(state.trainer_dir, seed=0)
        if state.trainer_dir
        else EmbeddedPolicy(model, seed=0)
    )
    t0 = time.perf_counter()
    after = evaluate(after_policy, tasks, held_out)
    timings["eval_after_s"] = time.perf_counter() - t0
    third = max(1, len(rewards) // 3)
    return {
        "quick": quick,
        "tasks": tasks,
        "demo_seeds": list(demo_seeds),
        "held_out_seeds": [held_out.start, held_out.stop - 1],
        "sft_steps": sft_steps,
        "sft_examples": len(examples),
        "sft_loss_last": sft.get("loss_last"),
        "before_mean": round(before.mean, 4),
        "after_mean": round(after.mean, 4),
        "gain_points": round(100.0 * (after.mean - before.mean), 1),
        "goal_gain_points": 20.0,
        "before_per_task": {k: round(v, 3) for k, v in before.per_task.items()},
        "after_per_task": {k: round(v, 3) for k, v in after.per_task.items()},
        "rl_updates": final.updates_done,
        "rl_policy_version": final.policy_version,
        "rl_episodes": final.episodes_done,
        "rl_status": final.status,
        "rl_error": final.error,
        "train_success_first_third": round(sum(rewards[:third]) / third, 3) if rewards else None,
        "train_success_last_third": round(sum(rewards[-third:]) / third, 3) if rewards else None,
        "rl_minutes_budget": rl_minutes,
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }
