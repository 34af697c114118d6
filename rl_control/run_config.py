"""The full hyperparameter set of an RL run, validated section by section (SPEC §8).

A run config is a JSON object with these sections; every section is a dataclass with one line of
help per field (the launch form renders it, see `presets.field_help`):

    env       EnvSettings        environment kind, parallel environments, screenshots in context
    serving   ServingSettings    the run's own policy servers, or external endpoints (vLLM)
    budget    BudgetSettings     when the run finishes on its own: updates, episodes, minutes
    alerts    AlertSettings      thresholds of the run alerts (SPEC §9)
    ppo|grpo  PPOConfig / GRPOConfig (workers.rl.config) — only the section of the run's algorithm
    curation  CurationConfig     dynamic N, step limit, staleness bound, pool / BEPA cache / replay
    reward    RewardConfig       format, length and repetition shaping
    entropulse EntropulseSettings RL ↔ SFT alternation when training plateaus (seed 001 §3.3)
    judge     JudgeSettings      LLM judge / outcome reward model for tasks without a verifier
    vlm       VLMSettings        HF vision-language policies only: LoRA rank, response length
    seed      int                seeds policy sampling and task order
    task_ids  list[int]          explicit task list; empty = every enabled task of the run's pool

`run_config_build` fills defaults, rejects unknown keys and returns the normalised dict, or raises
`RunConfigError` whose `errors` map "section.field" to a list of messages (the API's 400 body).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# `_Config` gives the dict round-trip and per-field type checks that the algorithm configs use;
# the run-level sections below are a second use of it, so it is shared rather than copied.
from workers.rl.config import ConfigError, CurationConfig, GRPOConfig, PPOConfig, RewardConfig, _Config

Algorithm = Literal["ppo", "grpo"]
EnvKindName = Literal["desktop", "browser", "game", "phone", "terminal", "mixed"]
MIXED_KIND = "mixed"  # env.kind of a run over tasks of several kinds: each rollout leases its task's kind


def env_kind_for(kinds: list[str]) -> str | None:
    """env.kind for tasks of these environment kinds: their one kind, "mixed" for several, None for none."""
    distinct = sorted(set(kinds))
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else MIXED_KIND


@dataclass
class EnvSettings(_Config):
    """Where rollouts run (SPEC §3)."""

    kind: EnvKindName = "browser"  # environment kind every rollout uses; "mixed": each its task's own kind
    parallel_envs: int = 8  # environments rolling out at once; each starts its next episode when one ends
    context_screenshots: int = 5  # last screenshots kept in the policy context (seed 000: 5, seed 004: 3)
    # One seed per group: the group baseline compares actions on one starting state, as GRPO's group
    # of answers to one prompt does (measured on bench learn: +15.0 vs +1.7 points with a seed each).
    shared_group_seed: bool = True  # the rollouts of a group play the same task instance
    priority: int = 1  # weight of its share of rollout workers and trainer among running runs

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if not 1 <= self.parallel_envs <= 512:
            e["parallel_envs"] = "must be in [1, 512]"
        if not 1 <= self.priority <= 10:
            e["priority"] = "must be in [1, 10]"
        if not 1 <= self.context_screenshots <= 16:
            e["context_screenshots"] = "must be in [1, 16]"
        return e


@dataclass
class BudgetSettings(_Config):
    """When a run finishes on its own: the first limit reached ends it (null = no limit)."""

    max_updates: int | None = 200  # trainer updates (policy versions) before the run finishes
    max_episodes: int | None = None  # finished rollouts before the run finishes
    max_minutes: float | None = 60.0  # wall-clock minutes of running (pauses excluded) before it finishes

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        for name in ("max_updates", "max_episodes", "max_minutes"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                e[name] = "must be > 0 or null"
        if not e and self.max_updates is None and self.max_episodes is None and self.max_minutes is None:
            e["max_updates"] = "set at least one of max_updates, max_episodes, max_minutes"
        return e


@dataclass
class AlertSettings(_Config):
    """Alert thresholds (SPEC §9); the staleness alert uses curation.staleness_bound."""

    entropy_min: float = 0.05  # policy/entropy below this (nats per token) = entropy collapse
    entropy_max: float = 5.0  # policy/entropy above this (nats per token) = entropy blow-up
    ev_drop: float = 0.3  # value/explained_variance this far below its best of the window = EV drop
    divergence_min: float = 0.05  # reward mean up and verified success down, each by ≥ this over the window
    env_crash_rate_max: float = 0.2  # fleet/crash_rate (crashed ÷ started episodes) above this = crash spike
    window: int = 20  # recorded steps looked back over for drops and trends
    cooldown_steps: int = 50  # an alert kind fires again only this many training steps after it last fired

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if not self.entropy_min >= 0:
            e["entropy_min"] = "must be ≥ 0"
        if not self.entropy_max > self.entropy_min:
            e["entropy_max"] = "must be > entropy_min"
        if not self.ev_drop > 0:
            e["ev_drop"] = "must be > 0"
        if not self.divergence_min > 0:
            e["divergence_min"] = "must be > 0"
        if not 0 < self.env_crash_rate_max <= 1:
            e["env_crash_rate_max"] = "must be in (0, 1]"
        if self.window < 4:
            e["window"] = "must be ≥ 4 (two halves of at least two points)"
        if self.cooldown_steps < 0:
            e["cooldown_steps"] = "must be ≥ 0"
        return e


@dataclass
class EntropulseSettings(_Config):
    """Entropulse (seed 001 §3.3): when the reward plateaus while entropy does not recover (the
    curation.plateau_* thresholds), a short SFT phase on the run's own successful rollouts restores
    entropy; then RL goes on with the KL reference reset to the new policy."""

    enabled: bool = False  # alternate RL with SFT phases on the run's successes when training plateaus
    sft_steps: int = 50  # gradient steps of one SFT phase
    sft_lr: float = 1e-5  # learning rate of the SFT phase
    sft_batch_size: int = 8  # examples per SFT gradient step
    successes: int = 64  # most recent successful rollouts of the run one SFT phase trains on
    max_phases: int = 4  # SFT phases at most in one run

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if not 1 <= self.sft_steps <= 10_000:
            e["sft_steps"] = "must be in [1, 10000]"
        if not 0 < self.sft_lr <= 1:
            e["sft_lr"] = "must be in (0, 1]"
        if not 1 <= self.sft_batch_size <= 512:
            e["sft_batch_size"] = "must be in [1, 512]"
        if not 1 <= self.successes <= 10_000:
            e["successes"] = "must be in [1, 10000]"
        if not 0 <= self.max_phases <= 100:
            e["max_phases"] = "must be in [0, 100]"
        return e


JudgeUse = Literal["no_verifier", "always"]


@dataclass
class JudgeSettings(_Config):
    """The LLM judge / generative outcome reward model (seed 000 §2.5, seed 004): reads the
    instruction, every thought and action and the last screenshots, and says success or failure."""

    url: str = ""  # OpenAI-compatible judge server (…/v1); empty = no judge, the verifier alone scores
    model: str = "judge"  # model name the judge server serves
    use: JudgeUse = "no_verifier"  # judge the tasks that have no verifier, or every episode
    max_screenshots: int = 3  # last screenshots the judge sees (seed 004: 3)

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        url = self.url.strip()
        if url and (
            not url.startswith(("http://", "https://")) or len(url) > 500 or any(c.isspace() for c in url)
        ):
            e["url"] = "must be an http(s) URL"
        if not self.model.strip() or len(self.model) > 200:
            e["model"] = "must be a model name (1–200 characters)"
        if not 0 <= self.max_screenshots <= 16:
            e["max_screenshots"] = "must be in [0, 16]"
        return e


EndpointApi = Literal["flywheel", "vllm_lora"]


@dataclass
class ServingSettings(_Config):
    """Where the run's policy is served (rl_control.engine.serving)."""

    # Empty: the engine starts the run's own embedded policy servers; else the run samples from these
    # OpenAI-compatible servers (vLLM …), which must accept the install's POLICY_WEIGHTS_SECRET.
    endpoints: str = ""  # external policy server URLs (…/v1, comma-separated); empty = its own servers
    servers: int = 1  # embedded policy servers the run starts for itself (rollout slots share them)
    # How new weights reach external endpoints: our server's /v1/load_weights, or stock vLLM's runtime
    # LoRA loading (/v1/load_lora_adapter; an HF VLM run with vlm.lora_rank > 0)
    endpoint_api: EndpointApi = "flywheel"  # how new weights reach external endpoints: flywheel or vllm_lora

    def urls(self) -> list[str]:
        return [u.strip() for u in self.endpoints.replace("\n", ",").split(",") if u.strip()]

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if len(self.endpoints) > 4000:
            e["endpoints"] = "too long"
        elif bad := [
            u
            for u in self.urls()
            if not u.startswith(("http://", "https://")) or any(c.isspace() or ord(c) < 32 for c in u)
        ]:
            e["endpoints"] = f"not an http(s) URL: {bad[0][:200]!r}"
        if not 1 <= self.servers <= 16:
            e["servers"] = "must be in [1, 16]"
        return e


@dataclass
class VLMSettings(_Config):
    """Settings that apply when the start checkpoint is a Hugging Face vision-language model
    (Qwen2.5-VL family, workers.policy.hf_vlm); the embedded model ignores them."""

    lora_rank: int = 8  # LoRA rank on the language model's projections; 0 = full fine-tuning
    lora_alpha: int = 16  # LoRA scaling numerator (the update is scaled by alpha / rank)
    max_tokens: int = 64  # most tokens of one sampled response (thought + action)

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if not 0 <= self.lora_rank <= 256:
            e["lora_rank"] = "must be in [0, 256]"
        if not 1 <= self.lora_alpha <= 1024:
            e["lora_alpha"] = "must be in [1, 1024]"
        if not 1 <= self.max_tokens <= 4096:
            e["max_tokens"] = "must be in [1, 4096]"
        return e


SECTIONS: dict[str, type[_Config]] = {
    "env": EnvSettings,
    "serving": ServingSettings,
    "budget": BudgetSettings,
    "alerts": AlertSettings,
    "ppo": PPOConfig,
    "grpo": GRPOConfig,
    "curation": CurationConfig,
    "reward": RewardConfig,
    "entropulse": EntropulseSettings,
    "judge": JudgeSettings,
    "vlm": VLMSettings,
}
ALGORITHM_SECTIONS: dict[str, str] = {"ppo": "ppo", "grpo": "grpo"}
SCALARS = ("seed", "task_ids")


class RunConfigError(ValueError):
    """Invalid run input; `errors` maps "section.field" (or a top-level key) to messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {key: list(messages) for key, messages in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(self.errors.items())))


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `overrides` applied: nested dicts merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def run_config_build(*, algorithm: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise `config` for `algorithm`: defaults filled in, every field checked.

    Returns a JSON-ready dict with every section present. Raises `RunConfigError` listing every
    problem at once (unknown keys, wrong types, out-of-range values, the other algorithm's section).
    """
    if algorithm not in ALGORITHM_SECTIONS:
        raise RunConfigError({"algorithm": [f"must be one of {sorted(ALGORITHM_SECTIONS)}"]})
    if not isinstance(config, Mapping):
        raise RunConfigError({"config": ["must be a JSON object"]})
    own = ALGORITHM_SECTIONS[algorithm]
    skipped = {s for s in ALGORITHM_SECTIONS.values() if s != own}
    errors: dict[str, list[str]] = {}
    out: dict[str, Any] = {}
    for key in config:
        if key in skipped:
            errors[key] = [f"only for algorithm {key}; this run uses {algorithm}"]
        elif key not in SECTIONS and key not in SCALARS:
            errors[key] = ["unknown section"]
    for name, cls in SECTIONS.items():
        if name in skipped:
            continue
        given = config.get(name, {})
        if not isinstance(given, Mapping):
            errors[name] = ["must be a JSON object"]
            continue
        try:
            out[name] = cls.from_dict(deep_merge(cls().to_dict(), given)).to_dict()
        except ConfigError as exc:
            for field, message in exc.errors.items():
                errors[f"{name}.{field}"] = [message]
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        errors["seed"] = ["must be an integer ≥ 0"]
    out["seed"] = seed
    task_ids = config.get("task_ids", [])
    if not isinstance(task_ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in task_ids
    ):
        errors["task_ids"] = ["must be a list of task ids"]
    elif len(set(task_ids)) != len(task_ids):
        errors["task_ids"] = ["lists a task twice"]
    out["task_ids"] = task_ids
    if not errors:
        errors.update(_budget_errors(algorithm, out))
    if errors:
        raise RunConfigError(errors)
    return out


def _budget_errors(algorithm: str, config: Mapping[str, Any]) -> dict[str, list[str]]:
    """PPO's critic warm-up must end within the update budget, or the policy never trains."""
    max_updates = config["budget"]["max_updates"]
    if algorithm != "ppo" or max_updates is None:
        return {}
    warmup = config["ppo"]["value_pretrain_max_updates"]
    if warmup < max_updates:
        return {}
    return {
        "ppo.value_pretrain_max_updates": [
            f"the critic warm-up may take {warmup} updates, the budget stops the run after {max_updates}: "
            f"the policy would never train (at most {max_updates - 1}; the preset takes a tenth)"
        ]
    }
