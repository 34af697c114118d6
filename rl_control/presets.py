"""Named starting points for a run (the launch form lists them) and one-line help per config field.

Each preset is (algorithm, mode, overrides of the defaults); `preset_get` returns the full,
validated config so a form shows every value that will be used, not only the ones that differ.

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

import inspect
import re
import types
import typing
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, Literal

from rl_control.run_config import SECTIONS, deep_merge, run_config_build


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
EMBEDDED_FIT: dict[str, dict[str, Any]] = {
    "grpo": {
        "grpo": {"lr": 5e-4, "beta_kl": 0.0, "temperature": 0.5, "thought_temperature": 0.05,
                 "train_thought": False, "weight_ema": 0.95, "rollouts_per_task": 4},
        "curation": {"rollouts_max": 4, "rollouts_min": 2, "step_cap": 6, "min_batch_trajectories": 16},
        "entropulse": {"sft_lr": 1e-3},  # the starter's own SFT learning rate
    },
    "ppo": {
        # the critic warm-up ends after a few updates: explained variance of sparse rewards on a
        # small model stays far below the paper's 0.8 (measured ≈ 0 over 24 updates)
        "ppo": {"lr_policy": 5e-4, "lr_value": 1e-3, "weight_ema": 0.95, "value_pretrain_max_updates": 5,
                "value_pretrain_target_ev": 0.3, "value_pretrain_patience": 3},
        "curation": {"step_cap": 6, "min_batch_trajectories": 16},
    },
}  # fmt: skip


def preset_overrides(name: str, profile: str = "hf_vlm") -> dict[str, Any]:
    """The overrides of preset `name` for a run starting from a model of `profile`: the paper's
    values for large models, fitted to the embedded model (EMBEDDED_FIT) for it. A preset with a
    fixed group size (rollouts_min = rollouts_max) keeps it fixed at the fitted size."""
    preset = PRESETS[name]
    if profile != "embedded":
        return dict(preset.overrides)
    fit = EMBEDDED_FIT[preset.algorithm]
    out = deep_merge(preset.overrides, fit)
    fixed = preset.overrides.get("curation", {})
    if "rollouts_max" in fixed and fixed.get("rollouts_min") == fixed["rollouts_max"]:
        out["curation"] = {**out["curation"], "rollouts_min": out["curation"]["rollouts_max"]}
    return out


# The launch form's label of every field, in words (a test checks every field has one). The help
# line (`field_help`) says more; the config key itself is never shown as a label.
FIELD_LABELS: dict[str, str] = {
    "seed": "Random seed",
    "task_ids": "Only these tasks (ids)",
    "env.kind": "Environment kind",
    "env.parallel_envs": "Environments in parallel",
    "env.context_screenshots": "Screenshots the policy sees",
    "env.shared_group_seed": "Same task instance for a whole group",
    "env.priority": "Share of workers among running runs (weight)",
    "serving.endpoints": "Policy endpoints (external servers)",
    "serving.servers": "Policy servers to start for the run",
    "serving.endpoint_api": "How new weights reach the endpoints",
    "budget.max_updates": "Stop after this many updates",
    "budget.max_episodes": "Stop after this many episodes",
    "budget.max_minutes": "Stop after this many minutes",
    "alerts.entropy_min": "Entropy collapse below",
    "alerts.entropy_max": "Entropy blow-up above",
    "alerts.ev_drop": "Explained-variance drop of",
    "alerts.divergence_min": "Reward vs. success divergence of",
    "alerts.env_crash_rate_max": "Environment crash rate above",
    "alerts.window": "Steps looked back over",
    "alerts.cooldown_steps": "Steps before the same alert fires again",
    "entropulse.enabled": "Alternate RL with SFT phases (Entropulse)",
    "entropulse.sft_steps": "SFT steps per phase",
    "entropulse.sft_lr": "SFT learning rate",
    "entropulse.sft_batch_size": "SFT batch size",
    "entropulse.successes": "Successes the SFT phase trains on",
    "entropulse.max_phases": "SFT phases at most",
    "vlm.lora_rank": "LoRA rank (0 = full fine-tuning)",
    "vlm.lora_alpha": "LoRA scale",
    "vlm.max_tokens": "Longest answer in tokens",
    "judge.url": "Judge endpoint (OpenAI-compatible)",
    "judge.model": "Judge model name",
    "judge.use": "When the judge scores an episode",
    "judge.max_screenshots": "Screenshots the judge sees",
    "ppo.lr_policy": "Policy learning rate",
    "ppo.lr_value": "Critic learning rate",
    "ppo.gamma": "Discount",
    "ppo.lambda_critic": "GAE lambda for the critic",
    "ppo.lambda_policy": "GAE lambda for the policy (empty = length-adaptive)",
    "ppo.length_adaptive_alpha": "Length-adaptive lambda alpha",
    "ppo.clip_low": "Clip range below 1",
    "ppo.clip_high": "Clip range above 1",
    "ppo.value_clip": "Value clip",
    "ppo.value_loss_coef": "Value loss weight",
    "ppo.entropy_coef": "Entropy bonus weight",
    "ppo.loss_agg": "Loss averaging",
    "ppo.epochs": "Passes over each batch",
    "ppo.minibatch_size": "Trajectories per gradient step",
    "ppo.max_grad_norm": "Gradient norm clip",
    "ppo.value_pretrain_max_updates": "Critic warm-up: at most this many updates",
    "ppo.value_pretrain_target_ev": "Critic warm-up: stop at explained variance",
    "ppo.value_pretrain_patience": "Critic warm-up: patience in updates",
    "ppo.is_cap": "Importance-weight cap for stale steps",
    "ppo.lr_schedule": "Learning-rate schedule",
    "ppo.lr_decay_start": "Start annealing at budget fraction",
    "ppo.weight_ema": "Weight averaging decay (0 = off)",
    "grpo.lr": "Policy learning rate",
    "grpo.beta_kl": "KL penalty weight",
    "grpo.kl_estimator": "KL estimator",
    "grpo.clip_low": "Clip range below 1",
    "grpo.clip_high": "Clip range above 1",
    "grpo.is_cap": "Importance-weight cap",
    "grpo.is_level": "Importance weights per",
    "grpo.entropy_keep_fraction": "Share of high-entropy steps trained on",
    "grpo.rollouts_per_task": "Group size (rollouts per task)",
    "grpo.adv_eps": "Smallest group spread that carries signal",
    "grpo.loss_agg": "Loss averaging",
    "grpo.epochs": "Passes over each batch",
    "grpo.minibatch_size": "Steps per gradient step",
    "grpo.max_grad_norm": "Gradient norm clip",
    "grpo.temperature": "Sampling temperature",
    "grpo.thought_temperature": "Thought sampling temperature (empty = same)",
    "grpo.train_thought": "Train on the thought tokens too",
    "grpo.lr_schedule": "Learning-rate schedule",
    "grpo.lr_decay_start": "Start annealing at budget fraction",
    "grpo.weight_ema": "Weight averaging decay (0 = off)",
    "curation.rollouts_max": "Group size (rollouts per task)",
    "curation.rollouts_min": "Smallest group for easy tasks",
    "curation.success_threshold": "Shrink groups above success rate",
    "curation.success_window": "Recent outcomes per task counted",
    "curation.success_min_reward": "Reward that counts as a success",
    "curation.step_cap": "Step limit per episode",
    "curation.injection": "Fill all-failed groups from",
    "curation.experience_pool_per_task": "Experience pool: successes kept per task",
    "curation.replay_per_task": "Replay buffer: successes kept per task",
    "curation.staleness_bound": "Train on steps at most this many versions old",
    "curation.min_batch_trajectories": "Train once this many episodes wait",
    "curation.plateau_window": "Plateau detection: updates per window",
    "curation.plateau_reward_min_gain": "Plateau: reward gain below",
    "curation.plateau_entropy_max_rel_change": "Plateau: entropy change at most",
    "curation.seed": "Seed of pool and cache picks",
    "reward.task_weight": "Task reward weight",
    "reward.format_weight": "Unparsable output penalty",
    "reward.length_weight": "Overlong episode penalty",
    "reward.length_soft_limit": "Steps before the length penalty starts",
    "reward.length_hard_limit": "Steps at the full length penalty",
    "reward.repetition_weight": "Repeated action penalty",
    "reward.cycle_min": "Shortest repeated cycle",
    "reward.cycle_max": "Longest repeated cycle",
}

# The launch form's basic section; everything else is folded under "Advanced". The group size is
# one question (curation.rollouts_max: dynamic N starts there); the form writes the same number into
# grpo.rollouts_per_task, which sizes a synchronous batch.
BASIC_FIELDS: tuple[str, ...] = (
    "env.parallel_envs",
    "curation.rollouts_max",
    "budget.max_updates",
    "budget.max_minutes",
    "budget.max_episodes",
    "serving.endpoints",
    "entropulse.enabled",
    "judge.url",
)
MIRRORED_FIELDS: dict[str, str] = {"grpo.rollouts_per_task": "curation.rollouts_max"}


def preset_get(name: str, profile: str = "hf_vlm") -> dict[str, Any]:
    """{name, title, description, algorithm, mode, start_profile, config (full, for a start model of
    `profile`), help, choices, labels, basic, mirrored}; KeyError when unknown."""
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
        "help": {key: text for key, text in field_help().items() if key.split(".")[0] in config},
        "choices": {key: values for key, values in field_choices().items() if key.split(".")[0] in config},
        "labels": {key: text for key, text in FIELD_LABELS.items() if key.split(".")[0] in config},
        "basic": [key for key in BASIC_FIELDS if key.split(".")[0] in config],
        "mirrored": {k: v for k, v in MIRRORED_FIELDS.items() if k.split(".")[0] in config},
    }


def preset_list(profile: str = "hf_vlm") -> list[dict[str, Any]]:
    return [preset_get(name, profile) for name in PRESETS]


_FIELD_COMMENT = re.compile(r"^\s+(\w+):[^#\n]*#\s*(.+)$")


@cache
def field_help() -> dict[str, str]:
    """ "section.field" → one-line help, read from the `# …` comment on each dataclass field.

    The comments are the single source of the help text (STYLE: one line of doc per field);
    a test checks that every field of every section has one.
    """
    out: dict[str, str] = {
        "seed": "seed for policy sampling and task order (the same seed replays the same choices)",
        "task_ids": "explicit task list; empty = every enabled task of the run's pool",
    }
    for section, cls in SECTIONS.items():
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        for line in inspect.getsource(cls).splitlines():
            match = _FIELD_COMMENT.match(line)
            if match and match.group(1) in names:
                out[f"{section}.{match.group(1)}"] = match.group(2).strip()
    return out


@cache
def field_choices() -> dict[str, list[Any]]:
    """ "section.field" → the allowed values of every field typed as a Literal (the launch form offers
    them as a list; `None` is among them when the field is optional)."""
    out: dict[str, list[Any]] = {}
    for section, cls in SECTIONS.items():
        for name, hint in typing.get_type_hints(cls).items():
            arms = (
                typing.get_args(hint)
                if typing.get_origin(hint) in (types.UnionType, typing.Union)
                else (hint,)
            )
            values = [v for arm in arms if typing.get_origin(arm) is Literal for v in typing.get_args(arm)]
            if values:
                out[f"{section}.{name}"] = values + [None for arm in arms if arm is type(None)]
    return out
