"""`bench learn` (issue 7 item 7): does RL through the real engine improve a weak SFT policy?

1. Scripted-expert demonstrations on a few seeds of each MiniWoB++ task (workers.policy.expert),
   with the expert's thoughts by default (action-only with FLYWHEEL_LEARN_DEMO_THOUGHTS=0).
2. A deliberately limited SFT of a fresh embedded model on them (few optimizer steps); its thought
   is then capped at 0 tokens (FLYWHEEL_LEARN_MAX_THOUGHT), so every policy of the bench acts directly.
3. Success rate on held-out seeds (workers.policy.evaluate, greedy) — the "before".
4. An RL run (step-wise GRPO with experience-pool injection, async) from that checkpoint through the
   real engine: Celery rollout and trainer workers, env host with Chromium, policy server.
5. Success rate of the run's newest averaged weights (grpo.weight_ema) on the same held-out seeds —
   the "after", per task — and, beside it, of the newest online weights.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from rl_control.engine.bench import optional_env

# Rollout temperature, learning rate and staleness bound of the RL phase. At T = 1.0 a weak SFT model
# samples mostly noise (measured: training success 9 % while greedy success was 23 %; at T = 0.5,
# 28 %), so the groups carry little signal; lr 2e-5 and 1e-4 left greedy success unchanged after
# 71 / 61 updates; a staleness bound of 1 version dropped 40 % of the rollouts.
LEARN_TEMPERATURE = float(os.environ.get("FLYWHEEL_LEARN_TEMPERATURE", "0.5"))
# A deliberately short SFT cannot learn the expert's thoughts: the 120-step start writes 20-90 random
# bytes when its thought is sampled (even at T = 0.2), and 96 × "e" (the cap) when the thought is
# sampled near-greedily. RL then trains actions after a thought of noise; sampled at the action's
# temperature and trained, that gave +1.7 (before the next-number pointer). The bench samples the
# thought near-greedily (grpo.thought_temperature 0.05) as context only (grpo.train_thought false;
# trained at 0.05, its 1/T-scaled gradient collapsed the policy in 7 updates): with the pointer,
# measured 28.3 → 39.2 % (+10.8) in 30 min, and 30.0 → 39.2 % (+9.2) with 3 environments.
# FLYWHEEL_LEARN_THOUGHT_TEMPERATURE="" samples the thought at the action's temperature instead.
LEARN_THOUGHT_TEMPERATURE = optional_env("FLYWHEEL_LEARN_THOUGHT_TEMPERATURE", "0.05", float)
# Action-only demonstrations (empty thoughts, FLYWHEEL_LEARN_DEMO_THOUGHTS=0) give a start that
# solves click-test and focus-text at once (33-36 % after 10-70 steps) and writes no thought, but RL
# from it at the same settings collapsed: training success 0.69 → 0.02 in 12 updates (3 envs,
# measured 2026-11-25; the entropy rose 0.5 → 1.7, rollouts typed random text). Off by default.
LEARN_DEMO_THOUGHTS = os.environ.get("FLYWHEEL_LEARN_DEMO_THOUGHTS", "1") == "1"
# The thought cap (tokens) written into the start checkpoint's config, which the policy server, the
# trainer and the evaluation all read their grammar from; "" keeps the model's own (96). The short
# SFT's thought does not inform its action (measured on the 120-step start, greedy, 15 held-out
# seeds: 29.2 % with its thought, 28.3 % with the thought capped at 0 tokens) and took ~90 % of the
# policy server's decoding; capped at 0, RL spends that time on more episodes and updates (measured
# with the instruction-match features: ~130 episodes/min and 229 updates in 30 min on 2 envs, against
# ~94 and 144 with the thought; 35.0 → 70.8 %, +35.8). With the cap at 0 the thought settings above
# have nothing to act on.
LEARN_MAX_THOUGHT = optional_env("FLYWHEEL_LEARN_MAX_THOUGHT", "0", int)
LEARN_LR = float(os.environ.get("FLYWHEEL_LEARN_LR", "5e-4"))
LEARN_STALENESS = int(os.environ.get("FLYWHEEL_LEARN_STALENESS", "2"))
# Greedy success of the RL weights swings ±15 points between neighbouring updates at a constant lr
# (measured on the checkpoints of one run: 27, 20, 26, 46, 48, 31 % at updates 40…230). Annealing
# the lr linearly over the second half calms that, but on a machine that manages only ~140 updates
# in the budget it also halves the learning that is left (measured: 28.3 → 25.0 %), so the bench
# keeps the lr constant unless FLYWHEEL_LEARN_LR_SCHEDULE says otherwise.
LEARN_LR_SCHEDULE = os.environ.get("FLYWHEEL_LEARN_LR_SCHEDULE", "constant")
LEARN_LR_DECAY_START = float(os.environ.get("FLYWHEEL_LEARN_LR_DECAY_START", "0.5"))
# The "after" policy is the run's averaged weights (grpo.weight_ema): against that swing, an EMA over
# ~20 updates is evaluated instead of whichever update happened to come last. The online weights
# are evaluated too and reported beside it (measured on two runs: averaged 30.0 / 25.0 %, online
# 31.7 / 23.3 %: no steadier than the last update yet, with ~120-170 updates in the budget).
LEARN_WEIGHT_EMA = float(os.environ.get("FLYWHEEL_LEARN_WEIGHT_EMA", "0.95"))
# Parallel environments of the RL phase (each a Chromium page on this machine's 2 cores); 3 gave
# ~121 episodes/min and 173 updates against 2's ~94 and 144, for the same gain (+9.2 vs +10.8).
LEARN_ENVS = int(os.environ.get("FLYWHEEL_LEARN_ENVS", "2"))


def learn_benchmark(
    *,
    quick: bool,
    start_checkpoint: Callable[[Path, Any], Any],
    pool: Callable[[str, list[tuple[str, int | None]]], Any],
    user: Callable[[], Any],
    tasks: list[str],
) -> dict[str, Any]:
    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.evaluate import evaluate
    from workers.policy.expert import collect_demonstrations
    from workers.policy.sft import sft_train
    from workers.rl.trainer import EMA_DIR

    workdir = Path(tempfile.mkdtemp(prefix="bench-learn-"))
    demo_seeds = range(0, 2 if quick else 3)
    held_out = range(5000, 5000 + (4 if quick else 15))
    # Action-only demonstrations learn in fewer steps (held-out 33-36 % after 10-70 steps, docs).
    sft_steps = (40 if quick else 120) if LEARN_DEMO_THOUGHTS else 40
    rl_minutes = 4.0 if quick else 30.0
    envs = LEARN_ENVS
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    examples = collect_demonstrations(tasks, demo_seeds, thoughts=LEARN_DEMO_THOUGHTS)
    timings["demos_s"] = time.perf_counter() - t0
    model = new_model(seed=0)
    t0 = time.perf_counter()
    sft = sft_train(model, examples, workdir / "sft", steps=sft_steps, lr=1e-3, batch_size=16, seed=0)
    timings["sft_s"] = time.perf_counter() - t0
    if LEARN_MAX_THOUGHT is not None:
        model.config.max_thought = LEARN_MAX_THOUGHT
    model.eval()
    t0 = time.perf_counter()
    before = evaluate(EmbeddedPolicy(model, seed=0), tasks, held_out)
    timings["eval_before_s"] = time.perf_counter() - t0

    checkpoint = start_checkpoint(workdir, model)
    bench_pool = pool("bench-learn", [(t, None) for t in tasks])
    # The same demonstrations, stored (as the flywheel stores annotations): they pre-populate the
    # run's experience pool (seed 002 §4.2), injected when every rollout of a task fails.
    stored = _store_demonstrations(bench_pool, demo_seeds)
    t0 = time.perf_counter()
    rl = rl_phase(
        checkpoint=checkpoint, pool=bench_pool, user=user(),
        workdir=workdir / "stack", minutes=rl_minutes, envs=envs, name="bench-learn",
        preset="grpo-dart", config={
            "grpo": {"rollouts_per_task": 4, "lr": LEARN_LR, "beta_kl": 0.0, "temperature": LEARN_TEMPERATURE,
                     "thought_temperature": LEARN_THOUGHT_TEMPERATURE,
                     "train_thought": LEARN_THOUGHT_TEMPERATURE is None,
                     "lr_schedule": LEARN_LR_SCHEDULE, "lr_decay_start": LEARN_LR_DECAY_START,
                     "weight_ema": LEARN_WEIGHT_EMA},
            "curation": {"rollouts_max": 4, "rollouts_min": 2, "step_cap": 6, "min_batch_trajectories": 16,
                         "staleness_bound": LEARN_STALENESS, "injection": "experience_pool"},
        },
    )  # fmt: skip
    timings["rl_s"] = time.perf_counter() - t0
    final, rewards = rl["run"], rl["success_rates"]
    online_dir = Path(rl["trainer_dir"]) if rl["trainer_dir"] else None
    averaged_dir = online_dir / EMA_DIR if online_dir and (online_dir / EMA_DIR).is_dir() else None
    t0 = time.perf_counter()
    online = evaluate(
        EmbeddedPolicy.from_pretrained(online_dir, seed=0) if online_dir else EmbeddedPolicy(model, seed=0),
        tasks, held_out,
    )  # fmt: skip
    after = (
        evaluate(EmbeddedPolicy.from_pretrained(averaged_dir, seed=0), tasks, held_out)
        if averaged_dir
        else online
    )
    timings["eval_after_s"] = time.perf_counter() - t0
    third = max(1, len(rewards) // 3)
    return {
        "quick": quick,
        "tasks": tasks,
        "demo_seeds": list(demo_seeds),
        "held_out_seeds": [held_out.start, held_out.stop - 1],
        "sft_steps": sft_steps,
        "sft_examples": len(examples),
        "stored_demonstrations": stored,
        "sft_loss_last": sft.get("loss_last"),
        "before_mean": round(before.mean, 4),
        "after_mean": round(after.mean, 4),
        "gain_points": round(100.0 * (after.mean - before.mean), 1),
        "goal_gain_points": 20.0,
        "before_per_task": {k: round(v, 3) for k, v in before.per_task.items()},
        "after_per_task": {k: round(v, 3) for k, v in after.per_task.items()},
        "after_weights": "averaged (EMA)" if averaged_dir else "online",
        "after_online_mean": round(online.mean, 4),
        "gain_points_online": round(100.0 * (online.mean - before.mean), 1),
        "after_online_per_task": {k: round(v, 3) for k, v in online.per_task.items()},
        "demo_thoughts": LEARN_DEMO_THOUGHTS,
        "max_thought_tokens": LEARN_MAX_THOUGHT,
        "rl_temperature": LEARN_TEMPERATURE,
        "rl_thought_temperature": LEARN_THOUGHT_TEMPERATURE,
        "rl_lr": LEARN_LR,
        "rl_staleness_bound": LEARN_STALENESS,
        "rl_weight_ema": LEARN_WEIGHT_EMA,
        "rl_envs": envs,
        "rl_lr_schedule": LEARN_LR_SCHEDULE
        if LEARN_LR_SCHEDULE == "constant"
        else f"{LEARN_LR_SCHEDULE} from {LEARN_LR_DECAY_START:g} of the budget",
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


def _store_demonstrations(pool: Any, seeds: range) -> int:
    """Scripted-expert episodes of every task of `pool` on `seeds`, stored as labelled annotation
    stand-ins (webapp.flywheel.services.sampling.record_expert_episode) with thoughts as the SFT
    demonstrations have them; returns how many succeeded."""
    from webapp.flywheel.services.sampling import record_expert_episode
    from workers.envs.browser.miniwob import MiniWoBEnv

    # A capped thought cannot hold the expert's: store action-only episodes then (the trainer
    # encodes a stored step with the start checkpoint's grammar and drops what exceeds it).
    store_thoughts = LEARN_DEMO_THOUGHTS and LEARN_MAX_THOUGHT is None
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
    from rl_control.engine.stack import LocalStack
    from rl_control.models import EngineState, Run, RunMetric
    from webapp.fleet import services as fleet
    from webapp.store.models import Checkpoint

    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT']}/{db['NAME']}"
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
            services.run_launch(run=run)
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
