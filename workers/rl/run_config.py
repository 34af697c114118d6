"""The full hyperparameter set of an RL run: one typed model from the API to the trainer (SPEC §8).

A run config is a JSON object with these sections, each a pydantic model (`workers.rl.config.Section`:
unknown keys, wrong types, NaN and out-of-range values refused), each field with its form label
(`title`), one line of help and its bounds:

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

`run_config_build` fills the defaults of a (partial) config and returns the normalised dict, or
raises pydantic's `ValidationError`. `run_config_schema` is the JSON schema of each algorithm's run
config, which the launch form is drawn from (its fields, labels, help, choices, defaults; `x-basic`:
the fields shown before "Advanced", `x-mirrored`: a field the form copies from another).
Stored configs that miss a field added later validate with that field's default.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, JsonValue, model_validator

from workers.rl.config import (
    COUNT_MAX,
    SEED_MAX,
    CurationConfig,
    GRPOConfig,
    PPOConfig,
    RewardConfig,
    Section,
    field_error,
)

EnvKindName = Literal["desktop", "browser", "game", "phone", "terminal", "mixed"]
MIXED_KIND = "mixed"  # env.kind of a run over tasks of several kinds: each rollout leases its task's kind
JudgeUse = Literal["no_verifier", "always"]
EndpointApi = Literal["flywheel", "vllm_lora"]


def env_kind_for(kinds: list[str]) -> str | None:
    """env.kind for tasks of these environment kinds: their one kind, "mixed" for several, None for none."""
    distinct = sorted(set(kinds))
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else MIXED_KIND


def _is_http_url(url: str) -> bool:
    return url.startswith(("http://", "https://")) and not any(c.isspace() or ord(c) < 32 for c in url)


def _http_url_or_empty(url: str) -> str:
    if url.strip() and not _is_http_url(url.strip()):
        raise ValueError("must be an http(s) URL")
    return url


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank")
    return text


def _url_list(text: str) -> str:
    bad = [u for u in split_urls(text) if not _is_http_url(u)]
    if bad:
        raise ValueError(f"not an http(s) URL: {bad[0][:200]!r}")
    return text


def split_urls(text: str) -> list[str]:
    """The URLs of a comma- or line-separated list."""
    return [u.strip() for u in text.replace("\n", ",").split(",") if u.strip()]


def _unique(ids: list[int]) -> list[int]:
    if len(set(ids)) != len(ids):
        raise ValueError("lists a task twice")
    return ids


class EnvSettings(Section):
    """Where rollouts run (SPEC §3)."""

    model_config = ConfigDict(title="Environments")

    kind: EnvKindName = Field(default="browser", title="Environment kind")
    """environment kind every rollout uses; "mixed": each its task's own kind"""
    parallel_envs: int = Field(default=8, ge=1, le=512, title="Environments in parallel")
    """environments rolling out at once; each starts its next episode when one ends"""
    context_screenshots: int = Field(default=5, ge=1, le=16, title="Screenshots the policy sees")
    """last screenshots kept in the policy context (seed 000: 5, seed 004: 3)"""
    # One seed per group: the group baseline compares actions on one starting state, as GRPO's group
    # of answers to one prompt does (measured on bench learn: +15.0 vs +1.7 points with a seed each).
    shared_group_seed: bool = Field(default=True, title="Same task instance for a whole group")
    """the rollouts of a group play the same task instance"""
    priority: int = Field(default=1, ge=1, le=10, title="Share of workers among running runs (weight)")
    """weight of its share of rollout workers and trainer among running runs"""


class ServingSettings(Section):
    """Where the run's policy is served (rl_control.engine.serving)."""

    model_config = ConfigDict(title="Policy serving")

    # Empty: the engine starts the run's own embedded policy servers; else the run samples from these
    # OpenAI-compatible servers (vLLM …), which must accept the install's POLICY_WEIGHTS_SECRET.
    endpoints: Annotated[str, AfterValidator(_url_list)] = Field(
        default="", max_length=4000, title="Policy endpoints (external servers)"
    )
    """external policy server URLs (…/v1, comma-separated); empty = its own servers"""
    servers: int = Field(default=1, ge=1, le=16, title="Policy servers to start for the run")
    """embedded policy servers the run starts for itself (rollout slots share them)"""
    # How new weights reach external endpoints: our server's /v1/load_weights, or stock vLLM's runtime
    # LoRA loading (/v1/load_lora_adapter; an HF VLM run with vlm.lora_rank > 0)
    endpoint_api: EndpointApi = Field(default="flywheel", title="How new weights reach the endpoints")
    """how new weights reach external endpoints: flywheel or vllm_lora"""

    def urls(self) -> list[str]:
        return split_urls(self.endpoints)


class BudgetSettings(Section):
    """When a run finishes on its own: the first limit reached ends it (null = no limit)."""

    model_config = ConfigDict(title="Budget")

    max_updates: int | None = Field(default=200, gt=0, le=COUNT_MAX, title="Stop after this many updates")
    """trainer updates (policy versions) before the run finishes"""
    max_episodes: int | None = Field(default=None, gt=0, le=10**9, title="Stop after this many episodes")
    """finished rollouts before the run finishes"""
    max_minutes: float | None = Field(default=60.0, gt=0, le=10**7, title="Stop after this many minutes")
    """wall-clock minutes of running (pauses excluded) before it finishes"""

    @model_validator(mode="after")
    def _some_limit(self) -> Self:
        if self.max_updates is None and self.max_episodes is None and self.max_minutes is None:
            raise field_error("max_updates", "set at least one of max_updates, max_episodes, max_minutes")
        return self


class AlertSettings(Section):
    """Alert thresholds (SPEC §9); the staleness alert uses curation.staleness_bound."""

    model_config = ConfigDict(title="Alert thresholds")

    entropy_min: float = Field(default=0.05, ge=0, title="Entropy collapse below")
    """policy/entropy below this (nats per token) = entropy collapse"""
    entropy_max: float = Field(default=5.0, title="Entropy blow-up above")
    """policy/entropy above this (nats per token) = entropy blow-up"""
    ev_drop: float = Field(default=0.3, gt=0, title="Explained-variance drop of")
    """value/explained_variance this far below its best of the window = EV drop"""
    divergence_min: float = Field(default=0.05, gt=0, title="Reward vs. success divergence of")
    """reward mean up and verified success down, each by ≥ this over the window"""
    env_crash_rate_max: float = Field(default=0.2, gt=0, le=1, title="Environment crash rate above")
    """fleet/crash_rate (crashed ÷ started episodes) above this = crash spike"""
    # two halves of at least two points
    window: int = Field(default=20, ge=4, le=COUNT_MAX, title="Steps looked back over")
    """recorded steps looked back over for drops and trends"""
    cooldown_steps: int = Field(
        default=50, ge=0, le=COUNT_MAX, title="Steps before the same alert fires again"
    )
    """an alert kind fires again only this many training steps after it last fired"""

    @model_validator(mode="after")
    def _entropy_band(self) -> Self:
        if self.entropy_max <= self.entropy_min:
            raise field_error("entropy_max", "must be > entropy_min")
        return self


class EntropulseSettings(Section):
    """Entropulse (seed 001 §3.3): when the reward plateaus while entropy does not recover (the
    curation.plateau_* thresholds), a short SFT phase on the run's own successful rollouts restores
    entropy; then RL goes on with the KL reference reset to the new policy."""

    model_config = ConfigDict(title="Entropulse (RL ↔ SFT)")

    enabled: bool = Field(default=False, title="Alternate RL with SFT phases (Entropulse)")
    """alternate RL with SFT phases on the run's successes when training plateaus"""
    sft_steps: int = Field(default=50, ge=1, le=10_000, title="SFT steps per phase")
    """gradient steps of one SFT phase"""
    sft_lr: float = Field(default=1e-5, gt=0, le=1, title="SFT learning rate")
    """learning rate of the SFT phase"""
    sft_batch_size: int = Field(default=8, ge=1, le=512, title="SFT batch size")
    """examples per SFT gradient step"""
    successes: int = Field(default=64, ge=1, le=10_000, title="Successes the SFT phase trains on")
    """most recent successful rollouts of the run one SFT phase trains on"""
    max_phases: int = Field(default=4, ge=0, le=100, title="SFT phases at most")
    """SFT phases at most in one run"""


class JudgeSettings(Section):
    """The LLM judge / generative outcome reward model (seed 000 §2.5, seed 004): reads the
    instruction, every thought and action and the last screenshots, and says success or failure."""

    model_config = ConfigDict(title="LLM judge")

    url: Annotated[str, AfterValidator(_http_url_or_empty)] = Field(
        default="", max_length=500, title="Judge endpoint (OpenAI-compatible)"
    )
    """OpenAI-compatible judge server (…/v1); empty = no judge, the verifier alone scores"""
    model: Annotated[str, AfterValidator(_not_blank)] = Field(
        default="judge", max_length=200, title="Judge model name"
    )
    """model name the judge server serves"""
    use: JudgeUse = Field(default="no_verifier", title="When the judge scores an episode")
    """judge the tasks that have no verifier, or every episode"""
    max_screenshots: int = Field(default=3, ge=0, le=16, title="Screenshots the judge sees")
    """last screenshots the judge sees (seed 004: 3)"""


class VLMSettings(Section):
    """Settings that apply when the start checkpoint is a Hugging Face vision-language model
    (Qwen2.5-VL family, workers.policy.hf_vlm); the embedded model ignores them."""

    model_config = ConfigDict(title="Vision-language start model (LoRA)")

    lora_rank: int = Field(default=8, ge=0, le=256, title="LoRA rank (0 = full fine-tuning)")
    """LoRA rank on the language model's projections; 0 = full fine-tuning"""
    lora_alpha: int = Field(default=16, ge=1, le=1024, title="LoRA scale")
    """LoRA scaling numerator (the update is scaled by alpha / rank)"""
    max_tokens: int = Field(default=64, ge=1, le=4096, title="Longest answer in tokens")
    """most tokens of one sampled response (thought + action)"""


# Pydantic orders fields along the reversed MRO: a run config class lists `_Head` before its
# algorithm's section before `_Tail`, so every config (and the form) reads env … alerts, ppo|grpo,
# curation … task_ids.
class _Head(Section):
    env: EnvSettings = Field(default_factory=EnvSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)


class _PPO(Section):
    ppo: PPOConfig = Field(default_factory=PPOConfig)


class _GRPO(Section):
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)


TaskId = Annotated[int, Field(gt=0, le=2**63 - 1)]


class _Tail(Section):
    curation: CurationConfig = Field(default_factory=CurationConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    entropulse: EntropulseSettings = Field(default_factory=EntropulseSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    vlm: VLMSettings = Field(default_factory=VLMSettings)
    seed: int = Field(default=0, ge=0, le=SEED_MAX, title="Random seed")
    """seed for policy sampling and task order (the same seed replays the same choices)"""
    task_ids: Annotated[list[TaskId], AfterValidator(_unique)] = Field(
        default=[], max_length=100_000, title="Only these tasks (ids)"
    )
    """explicit task list; empty = every enabled task of the run's pool"""


# The launch form's basic section, in this order; everything else is folded under "Advanced". The
# group size is one question (curation.rollouts_max: dynamic N starts there); the form writes the same
# number into grpo.rollouts_per_task, which sizes a synchronous batch. PPO trains single rollouts.
_BASIC: list[JsonValue] = ["env.parallel_envs", "curation.rollouts_max", "budget.max_updates", "budget.max_minutes",
          "budget.max_episodes", "serving.endpoints", "entropulse.enabled", "judge.url"]  # fmt: skip


class PPORunConfig(_Tail, _PPO, _Head):
    """A PPO run's config."""

    model_config = ConfigDict(
        title="Run", json_schema_extra={"x-basic": [k for k in _BASIC if k != "curation.rollouts_max"]}
    )

    @model_validator(mode="after")
    def _warmup_within_budget(self) -> Self:
        """PPO's critic warm-up must end within the update budget, or the policy never trains."""
        budget, warmup = self.budget.max_updates, self.ppo.value_pretrain_max_updates
        if budget is not None and warmup >= budget:
            raise field_error(
                "ppo.value_pretrain_max_updates",
                f"the critic warm-up may take {warmup} updates, the budget stops the run after {budget}: "
                f"the policy would never train (at most {budget - 1}; the preset takes a tenth)",
            )
        return self


class GRPORunConfig(_Tail, _GRPO, _Head):
    """A step-wise GRPO run's config."""

    model_config = ConfigDict(
        title="Run",
        json_schema_extra={
            "x-basic": _BASIC,
            "x-mirrored": {"grpo.rollouts_per_task": "curation.rollouts_max"},
        },
    )


RunConfig = PPORunConfig | GRPORunConfig
RUN_CONFIGS: dict[str, type[PPORunConfig] | type[GRPORunConfig]] = {
    "ppo": PPORunConfig,
    "grpo": GRPORunConfig,
}


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
    """`config` (any subset of the sections; `algorithm` one of RUN_CONFIGS) validated, with every
    default filled in: a JSON-ready dict. Raises `ValidationError` listing every problem at once."""
    return RUN_CONFIGS[algorithm].model_validate(config).model_dump(mode="json")


def run_config_schema() -> dict[str, Any]:
    """{algorithm: JSON schema of its run config} (a copy: callers may change it)."""
    return copy.deepcopy(_schemas())


@cache
def _schemas() -> dict[str, Any]:
    # ~0.1 s to generate, the same for the life of the process
    return {name: cls.model_json_schema() for name, cls in RUN_CONFIGS.items()}
