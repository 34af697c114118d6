"""Named starting points for a run (the launch form lists them): data over the run config's defaults.

Each preset is (algorithm, mode, overrides of the defaults), fitted to the start model by
`EMBEDDED_FIT`; `preset_get` returns the full config, validated by the run config's model
(workers.rl.run_config), so a form shows every value that will be used, not only the ones that differ.
The form's labels, help and choices come from that model's JSON schema, not from here.

    ppo-uitars2    seed 000 §2.5: PPO, clip-higher 0.2 / 0.28, decoupled GAE (λ_critic = 1.0),
                   length-adaptive λ_policy with α = 0.05, value pretraining before PPO
    grpo-dart      seed 002 §3–4, A.4: step-wise GRPO, lr 1e-6, β_KL 0.1, truncated IS C = 1,
                   top-80 % entropy steps, dynamic N from 8, experience pool
    bepa           seed 003 §4, App.: GRPO N = 8, 15 steps, lr 1e-6, clip 0.2 / 0.3, no KL,
                   4 epochs, per-task cache of one success injected when all N fail
    grpo-entropulse seed 001 §3.3: step-wise GRPO with β_KL 0.1 that alternates RL with SFT phases on
                   its own successes when the reward plateaus while entropy does not recover
    sync-baseline  the coupled baseline: every environment waits for the slowest rollout of the
                   batch and the trainer for the whole batch (no streaming pool), GRPO, no injection
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from workers.rl.run_config import deep_merge, run_config_build


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    description: str
    algorithm: str
    mode: str
    overrides: dict[str, Any]


# Step-wise GRPO as DART (seed 002 A.4) and ComputerRL (seed 001 §3.3) both run it, with a dynamic
# rollout count N from 8 down to 2.
_STEPWISE_GRPO = {"lr": 1e-6, "beta_kl": 0.1, "clip_low": 0.2, "clip_high": 0.28, "rollouts_per_task": 8}
_DYNAMIC_N = {"rollouts_max": 8, "rollouts_min": 2}

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="ppo-uitars2",
            title="PPO (UI-TARS-2)",
            description="PPO with clip-higher, decoupled and length-adaptive GAE, value pretraining "
            "(seed 000 §2.5.4).",
            algorithm="ppo",
            mode="async",
            overrides={
                "ppo": {
                    "clip_low": 0.2,
                    "clip_high": 0.28,
                    "lambda_critic": 1.0,
                    "lambda_policy": None,  # length-adaptive
                    "length_adaptive_alpha": 0.05,
                    # bounded so the first policy update comes well within the 200-update budget
                    "value_pretrain_max_updates": 20,
                },
                "curation": {"injection": "none", "staleness_bound": 1},
                "env": {"context_screenshots": 5},
            },
        ),
        Preset(
            name="grpo-dart",
            title="Step-wise GRPO (DART)",
            description="Step-wise GRPO with truncated IS, entropy step filter, dynamic N and an "
            "experience pool (seed 002 §3–4).",
            algorithm="grpo",
            mode="async",
            overrides={
                "grpo": {**_STEPWISE_GRPO, "is_cap": 1.0, "entropy_keep_fraction": 0.8},
                "curation": {
                    **_DYNAMIC_N,
                    "success_threshold": 0.6,
                    "step_cap": 30,
                    "injection": "experience_pool",
                },
            },
        ),
        Preset(
            name="bepa",
            title="GRPO + BEPA cache",
            description="GRPO whose all-failed groups get the task's cached success as rollout #1 "
            "(seed 003 §4).",
            algorithm="grpo",
            mode="async",
            overrides={
                "grpo": {
                    "lr": 1e-6,
                    "beta_kl": 0.0,
                    "clip_low": 0.2,
                    "clip_high": 0.3,
                    "epochs": 4,
                    "rollouts_per_task": 8,
                    "entropy_keep_fraction": 1.0,
                    "temperature": 1.0,
                },
                "curation": {"rollouts_max": 8, "rollouts_min": 8, "step_cap": 15, "injection": "bepa_cache"},
            },
        ),
        Preset(
            name="grpo-entropulse",
            title="Step-wise GRPO + Entropulse (ComputerRL)",
            description="Step-level GRPO with a KL reference; when the reward plateaus while entropy "
            "does not recover, an SFT phase on the run's own successes, then RL again with the "
            "reference reset (seed 001 §3.3). The charts shade each SFT phase.",
            algorithm="grpo",
            mode="async",
            overrides={
                "grpo": dict(_STEPWISE_GRPO),
                "curation": {
                    **_DYNAMIC_N,
                    "injection": "none",
                    "plateau_window": 10,
                    "plateau_reward_min_gain": 0.01,
                    "plateau_entropy_max_rel_change": 0.0,
                },
                "entropulse": {
                    "enabled": True,
                    "sft_steps": 50,
                    "sft_lr": 1e-5,
                    "successes": 64,
                    "max_phases": 4,
                },
            },
        ),
        Preset(
            name="sync-baseline",
            title="Synchronous baseline",
            description="Coupled rollout/train loop with a batch barrier: the comparison point for the "
            "asynchronous pipeline.",
            algorithm="grpo",
            mode="sync",
            overrides={
                "grpo": {"rollouts_per_task": 8},
                "curation": {"rollouts_max": 8, "rollouts_min": 8, "injection": "none", "staleness_bound": 0},
            },
        ),
    ]
}


StartProfile = Literal["embedded", "hf_vlm", "endpoint"]
START_PROFILES: tuple[str, ...] = ("embedded", "hf_vlm", "endpoint")
START_PROFILE_TITLES = {
    "embedded": "the embedded model (the starter)",
    "hf_vlm": "a Hugging Face vision-language model",
    "endpoint": "an external endpoint (vLLM)",
}

# The presets' values are the papers', for multi-billion-parameter VLMs (hf_vlm, endpoint). The
# embedded model (a few million parameters, thought capped at 0) learns under the settings of
# `bench learn` (docs/benchmarks.md, learn: lr 5e-4, temperature 0.5 with a near-greedy thought, no
# KL, weight averaging 0.95, groups of 4, 6 steps per episode, 16 episodes per update).
# Measured with the per-preset journey (tests/e2e/test_e2e_preset_defaults.py; benchmarks/HISTORY.md,
# "Preset defaults on the starter"): `make up` has 2 rollout processes and 1 single-threaded policy
# server, so 8 environment slots only queue for them while booting 8 browsers on 2 cores, and the first
# trained update's CPU grows with its batch. 2 slots and 8-episode batches (two groups of 4), and one
# critic warm-up update for PPO: a trained version in 41-176 s at load 11-18 (before: 216 s, 375 s).
_EMBEDDED_ENV = {"parallel_envs": 2}
EMBEDDED_FIT: dict[str, dict[str, Any]] = {
    "grpo": {
        # one pass over each batch, as in `bench learn`: BEPA's 4 epochs at 5e-4 took the starter from
        # 49 % to 19 % success in its first update (`bench presets`, HISTORY.md, issue 34)
        # and the lr warms up over 10 trained updates: every preset's first update at the full 5e-4 cut
        # the starter's success (grpo-entropulse 62 % → 12 %, then ~2 % for good: no injection to
        # bring a success back; `bench presets`, HISTORY.md, issue 34)
        "grpo": {"lr": 5e-4, "beta_kl": 0.0, "temperature": 0.5, "thought_temperature": 0.05,
                 "train_thought": False, "weight_ema": 0.95, "rollouts_per_task": 4, "epochs": 1,
                 "lr_warmup_updates": 10},
        "curation": {"rollouts_max": 4, "rollouts_min": 2, "step_cap": 6, "min_batch_trajectories": 8},
        "entropulse": {"sft_lr": 1e-3},  # the starter's own SFT learning rate
        "env": _EMBEDDED_ENV,
    },
    "ppo": {
        # the critic warm-up ends after one update: explained variance of sparse rewards on a small
        # model stays far below the paper's 0.8 (measured ≈ 0 over 24 updates), and each warm-up
        # update cost ~40 s before the first policy update (5 of them: 375 s to a trained version)
        # λ_policy 1 (Monte Carlo advantages, return − V): the starter's episodes are 5–60 action tokens,
        # where the length-adaptive λ = 1 − 1/(0.05·l) is 0–0.67, so advantages were mostly TD errors
        # of a critic one warm-up update old; PPO took the starter from 42 % to ~10 % success within
        # three updates (`bench presets`, HISTORY.md, issue 34)
        "ppo": {"lr_policy": 5e-4, "lr_value": 1e-3, "weight_ema": 0.95, "value_pretrain_max_updates": 1,
                "value_pretrain_target_ev": 0.3, "value_pretrain_patience": 3, "lambda_policy": 1.0,
                "lr_warmup_updates": 10},
        "curation": {"step_cap": 6, "min_batch_trajectories": 8},
        "env": _EMBEDDED_ENV,
    },
}  # fmt: skip


def preset_overrides(name: str, profile: str = "hf_vlm") -> dict[str, Any]:
    """The overrides of preset `name` for a run starting from a model of `profile`: the paper's
    values for large models, fitted to the embedded model (EMBEDDED_FIT) for it. A preset with a
    fixed group size (rollouts_min = rollouts_max), or a GRPO preset that injects no successes, keeps
    its groups fixed at the fitted size."""
    preset = PRESETS[name]
    if profile != "embedded":
        return dict(preset.overrides)
    fit = EMBEDDED_FIT[preset.algorithm]
    out = deep_merge(preset.overrides, fit)
    fixed = preset.overrides.get("curation", {})
    # GRPO with nothing injected keeps its groups whole too: grpo-entropulse with groups of 2 to 4
    # collapsed on the starter (seed 93117 twice: 45 % to 1-6 %, entropy 0.04 to 5 nats), with groups
    # fixed at 4 it rose on three seeds (`bench presets`, HISTORY.md, issue 34)
    uninjected = preset.algorithm == "grpo" and fixed.get("injection") == "none"
    if uninjected or ("rollouts_max" in fixed and fixed.get("rollouts_min") == fixed["rollouts_max"]):
        out["curation"] = {**out["curation"], "rollouts_min": out["curation"]["rollouts_max"]}
    return out


def preset_get(name: str, profile: str = "hf_vlm") -> dict[str, Any]:
    """{name, title, description, algorithm, mode, start_profile, config (full, for a start model of
    `profile`), notes (per field, what this deployment adds to its help)}; KeyError when unknown."""
    preset = PRESETS[name]
    config = run_config_build(algorithm=preset.algorithm, config=preset_overrides(name, profile))
    return {
        "start_profile": profile,
        "name": preset.name,
        "title": preset.title,
        "description": preset.description,
        "algorithm": preset.algorithm,
        "mode": preset.mode,
        "config": config,
        "notes": {},
    }


def preset_list(profile: str = "hf_vlm") -> list[dict[str, Any]]:
    return [preset_get(name, profile) for name in PRESETS]
