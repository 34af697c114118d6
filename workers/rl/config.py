"""Hyperparameters for PPO, step-wise GRPO, data curation and reward shaping (SPEC §8).

One pydantic model per concern; each field has its form label (`title`), one line of doc (the string
under it, its `description`) and its bounds. Defaults are the papers': seed 000 = UI-TARS-2 §2.5.4,
seed 001 = ComputerRL §3, seed 002 = DART §3–4 and A.4, seed 003 = BEPA §4, seed 004 = MAI-UI §2.3.3.

Every section refuses unknown keys, values of the wrong type (no "3" for 3, no true for 1), NaN and
infinity; a built section is frozen, so a config that exists is valid. `errors_by_field` turns a
`ValidationError` into {"section.field": [messages]} (the API's 400 body). The run-level sections
and the run config itself are in `workers.rl.run_config`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]
KlEstimator = Literal["k1", "k2", "k3"]
IsLevel = Literal["token", "sequence"]
LrSchedule = Literal["constant", "linear", "cosine"]
# experience_pool: seed 002 §4.2; bepa_cache: seed 003 LEVEL-2; replay: seed 004 §2.3.3
InjectionMode = Literal["none", "experience_pool", "bepa_cache", "replay"]
Algorithm = Literal["ppo", "grpo"]

COUNT_MAX = 1_000_000  # upper bound of every count (updates, steps, windows): far above any real run
SEED_MAX = 2**32 - 1  # numpy's seeds are 32-bit


class Section(BaseModel):
    """Base of every config section (see the module docstring)."""

    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, frozen=True, use_attribute_docstrings=True
    )


def field_error(field: str, message: str) -> PydanticCustomError:
    """The error of a check across fields, reported at `field` (a dotted path below the model)."""
    return PydanticCustomError("cross_field", message, {"field": field})


def errors_by_field(exc: ValidationError) -> dict[str, list[str]]:
    """{"section.field": [messages]} of every problem in `exc` ("config" for the whole object)."""
    out: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False, include_input=False):
        loc, ctx = [str(part) for part in error["loc"]], error.get("ctx") or {}
        if error["type"] == "cross_field":
            loc.append(str(ctx["field"]))
        # a check's own ValueError reads as its message, without pydantic's "Value error, " before it
        message = str(ctx["error"]) if error["type"] == "value_error" else error["msg"]
        out.setdefault(".".join(loc) if loc else "config", []).append(message)
    return out


def warmup_scale(warmup_updates: int, steps_done: int) -> float:
    """Learning-rate multiplier of the update after `steps_done` trained ones: (steps_done + 1) /
    warmup_updates until it reaches 1; 1 when the warm-up is off (0). Adam's first steps move every
    weight by about the learning rate whatever the gradient's size (its second-moment estimate is one
    gradient old), which a small model's policy does not survive at RL's learning rates."""
    if warmup_updates <= 0:
        return 1.0
    return min(1.0, (steps_done + 1) / warmup_updates)


def lr_scale(schedule: LrSchedule, decay_start: float, progress: float) -> float:
    """Learning-rate multiplier at `progress` (fraction of the run's budget spent, clamped to [0, 1]).

    "constant" is 1 throughout; "linear" and "cosine" hold 1 until `decay_start` and then anneal to 0
    at the end of the budget (CleanRL's PPO anneals linearly from the start; a later start keeps the
    early, fast phase and only calms the last updates, whose weights are the ones kept)."""
    if schedule == "constant":
        return 1.0
    p = min(1.0, max(0.0, progress))
    if p <= decay_start:
        return 1.0
    t = (p - decay_start) / (1.0 - decay_start)
    return 1.0 - t if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * t))


class PPOConfig(Section):
    """PPO with clip-higher, decoupled and length-adaptive GAE, value pretraining (seed 000 §2.5.4)."""

    model_config = ConfigDict(title="PPO")

    lr_policy: float = Field(default=1e-6, gt=0, le=1, title="Policy learning rate")
    """policy learning rate (seed 000 gives none; the GRPO value of seed 002 A.4)"""
    lr_value: float = Field(default=1e-5, gt=0, le=1, title="Critic learning rate")
    """critic learning rate (verl's critic default)"""
    gamma: float = Field(default=1.0, ge=0, le=1, title="Discount")
    """discount; 1.0 because rewards are sparse outcome rewards"""
    lambda_critic: float = Field(default=1.0, ge=0, le=1, title="GAE lambda for the critic")
    """GAE λ for value targets: 1.0 = Monte Carlo, no decay over long sequences"""
    lambda_policy: float | None = Field(
        default=None, ge=0, le=1, title="GAE lambda for the policy (empty = length-adaptive)"
    )
    """fixed GAE λ for policy advantages; None = length-adaptive"""
    length_adaptive_alpha: float = Field(default=0.05, gt=0, title="Length-adaptive lambda alpha")
    """α in λ_policy = 1 − 1/(α·l) (seed 000)"""
    clip_low: float = Field(default=0.2, gt=0, lt=1, title="Clip range below 1")
    """ε_low: ratio may fall to 1 − ε_low before clipping"""
    clip_high: float = Field(default=0.28, gt=0, title="Clip range above 1")
    """ε_high: ratio may rise to 1 + ε_high before clipping (clip-higher)"""
    value_clip: float | None = Field(default=0.5, gt=0, title="Value clip")
    """clip the value update to ±this around the old value; None = off"""
    value_loss_coef: float = Field(default=0.5, ge=0, title="Value loss weight")
    """weight of the value loss when actor and critic share a backbone"""
    entropy_coef: float = Field(default=0.0, ge=0, title="Entropy bonus weight")
    """entropy bonus weight (0: clip-higher already keeps entropy up)"""
    loss_agg: LossAggregation = Field(default="token-mean", title="Loss averaging")
    """how token losses are averaged into one scalar"""
    epochs: int = Field(default=1, ge=1, le=1000, title="Passes over each batch")
    """optimisation passes over each batch"""
    minibatch_size: int = Field(default=8, ge=1, le=COUNT_MAX, title="Trajectories per gradient step")
    """trajectories per gradient step"""
    max_grad_norm: float = Field(default=1.0, gt=0, title="Gradient norm clip")
    """global gradient-norm clip"""
    value_pretrain_max_updates: int = Field(
        default=20, ge=0, le=COUNT_MAX, title="Critic warm-up: at most this many updates"
    )
    """value pretraining: hard stop in updates (≤ the budget)"""
    value_pretrain_target_ev: float = Field(
        default=0.8, le=1, title="Critic warm-up: stop at explained variance"
    )
    """value pretraining stops once explained variance ≥ this"""
    value_pretrain_patience: int = Field(
        default=20, ge=1, le=COUNT_MAX, title="Critic warm-up: patience in updates"
    )
    """… and value loss has not improved for this many updates"""
    is_cap: float | None = Field(default=1.0, gt=0, title="Importance-weight cap for stale steps")
    """truncated IS min(π_train_old / π_rollout, C) for stale steps; null = off"""
    lr_schedule: LrSchedule = Field(default="constant", title="Learning-rate schedule")
    """both lrs: constant, or linear / cosine to 0 at the budget's end"""
    lr_decay_start: float = Field(default=0.0, ge=0, lt=1, title="Start annealing at budget fraction")
    """budget fraction after which linear / cosine annealing starts"""
    lr_warmup_updates: int = Field(default=0, ge=0, le=COUNT_MAX, title="Learning-rate warm-up in updates")
    """the lr(s) rise linearly over the first this many trained updates; 0 = off"""
    # Weight averaging (Polyak / EMA; Nikishin et al. 2018, "Improving stability in deep RL with weight
    # averaging"): after every update θ̄ ← d·θ̄ + (1 − d)·θ. Rollouts keep the online weights θ.
    weight_ema: float = Field(default=0.0, ge=0, lt=1, title="Weight averaging decay (0 = off)")
    """d of an averaged copy saved beside each checkpoint (`…-ema`); 0 = off"""


class GRPOConfig(Section):
    """Step-wise GRPO with clip-higher, truncated IS and entropy step filter (seed 002 Eq. 1–2, A.4)."""

    model_config = ConfigDict(title="Step-wise GRPO")

    lr: float = Field(default=1e-6, gt=0, le=1, title="Policy learning rate")
    """policy learning rate"""
    beta_kl: float = Field(default=0.1, ge=0, title="KL penalty weight")
    """weight of KL(π_θ ‖ π_ref); 0 drops the reference model"""
    kl_estimator: KlEstimator = Field(default="k3", title="KL estimator")
    """per-token KL estimator (k1 = log-ratio, k3 = unbiased, ≥ 0)"""
    clip_low: float = Field(default=0.2, gt=0, lt=1, title="Clip range below 1")
    """ε_low"""
    clip_high: float = Field(default=0.28, gt=0, title="Clip range above 1")
    """ε_high (clip-higher)"""
    is_cap: float = Field(default=1.0, gt=0, title="Importance-weight cap")
    """C in the truncated IS weight min(π_train_old / π_rollout, C)"""
    is_level: IsLevel = Field(default="token", title="Importance weights per")
    """truncated IS per token, or one weight per step (product over tokens)"""
    entropy_keep_fraction: float = Field(
        default=0.8, gt=0, le=1, title="Share of high-entropy steps trained on"
    )
    """keep the steps in the top 80 % of mean token entropy per group"""
    # a group of one has no baseline
    rollouts_per_task: int = Field(default=8, ge=2, le=1024, title="Group size (rollouts per task)")
    """N: trajectories sampled per task (the GRPO group)"""
    adv_eps: float = Field(default=1e-6, gt=0, title="Smallest group spread that carries signal")
    """ε guarding the group std; a group with std < ε carries no signal"""
    loss_agg: LossAggregation = Field(default="token-mean", title="Loss averaging")
    """seed 001/004 average over all tokens of the group"""
    epochs: int = Field(default=1, ge=1, le=1000, title="Passes over each batch")
    """optimisation passes over each batch"""
    minibatch_size: int = Field(default=8, ge=1, le=COUNT_MAX, title="Steps per gradient step")
    """steps per gradient step"""
    max_grad_norm: float = Field(default=1.0, gt=0, title="Gradient norm clip")
    """global gradient-norm clip"""
    temperature: float = Field(default=1.0, gt=0, title="Sampling temperature")
    """rollout sampling temperature (seed 002 A.4)"""
    thought_temperature: float | None = Field(
        default=None, ge=1e-3, le=10, title="Thought sampling temperature (empty = same)"
    )
    """the thought's own sampling temperature; null = temperature"""
    train_thought: bool = Field(default=True, title="Train on the thought tokens too")
    """thought tokens carry policy loss; false = only the action's tokens train"""
    lr_schedule: LrSchedule = Field(default="constant", title="Learning-rate schedule")
    """constant, or linear / cosine to 0 at the end of the budget"""
    lr_decay_start: float = Field(default=0.0, ge=0, lt=1, title="Start annealing at budget fraction")
    """budget fraction after which linear / cosine annealing starts"""
    lr_warmup_updates: int = Field(default=0, ge=0, le=COUNT_MAX, title="Learning-rate warm-up in updates")
    """the lr rises linearly over the first this many trained updates; 0 = off"""
    weight_ema: float = Field(default=0.0, ge=0, lt=1, title="Weight averaging decay (0 = off)")
    """d of an averaged copy saved beside each checkpoint (`…-ema`); 0 = off"""
    anchor_weight: float = Field(default=0.0, ge=0, le=10, title="Step credit from repeated states (0 = off)")
    """ω of GiGPO: a step's advantage gains ω × its return against its group's steps on the same state"""
    anchor_gamma: float = Field(default=0.95, gt=0, le=1, title="Discount of the step credit")
    """γ of the discounted returns the step credit compares (a shorter way to success counts more)"""


class CurationConfig(Section):
    """Which rollouts are sampled and trained on (seed 002 §4, seed 003 §4, seed 004 §2.3.3, seed 001 §3.3)."""

    model_config = ConfigDict(title="Curation")

    rollouts_max: int = Field(default=8, ge=2, le=1024, title="Group size (rollouts per task)")
    """N for tasks at or below the success threshold (seed 002: 8)"""
    rollouts_min: int = Field(default=2, ge=2, le=1024, title="Smallest group for easy tasks")
    """N for a task that always succeeds; ≥ 2 so a group keeps a baseline"""
    success_threshold: float = Field(default=0.6, ge=0, lt=1, title="Shrink groups above success rate")
    """above this recent success rate N is lowered (seed 002 §4.1)"""
    success_window: int = Field(default=16, ge=1, le=COUNT_MAX, title="Recent outcomes per task counted")
    """recent outcomes per task the success rate is computed over"""
    success_min_reward: float = Field(default=0.5, title="Reward that counts as a success")
    """a trajectory whose task reward is ≥ this counts as a success"""
    step_cap: int = Field(default=30, ge=1, le=10_000, title="Step limit per episode")
    """global step limit; per-task limit = longest success so far, at most this"""
    injection: InjectionMode = Field(default="experience_pool", title="Fill all-failed groups from")
    """store that fills a group where all N failed (none = off)"""
    experience_pool_per_task: int = Field(
        default=16, ge=1, le=COUNT_MAX, title="Experience pool: successes kept per task"
    )
    """successes kept per task in the experience pool (oldest dropped)"""
    replay_per_task: int = Field(
        default=8, ge=1, le=COUNT_MAX, title="Replay buffer: successes kept per task"
    )
    """MAI-UI replay buffer: most recent successes kept per task"""
    staleness_bound: int = Field(
        default=1, ge=0, le=COUNT_MAX, title="Train on steps at most this many versions old"
    )
    """a step is trained on only if its policy version is ≥ current − this"""
    min_batch_trajectories: int = Field(
        default=8, ge=1, le=COUNT_MAX, title="Train once this many episodes wait"
    )
    """the trainer steps once this many completed trajectories wait"""
    plateau_window: int = Field(default=20, ge=2, le=COUNT_MAX, title="Plateau detection: updates per window")
    """Entropulse: updates per window compared for a plateau"""
    plateau_reward_min_gain: float = Field(default=0.01, title="Plateau: reward gain below")
    """reward gain between windows below this = stagnating"""
    plateau_entropy_max_rel_change: float = Field(default=0.0, title="Plateau: entropy change at most")
    """entropy relative change ≤ this = not recovering"""
    seed: int = Field(default=0, ge=0, le=SEED_MAX, title="Seed of pool and cache picks")
    """seed for the random picks of pool and cache"""

    @model_validator(mode="after")
    def _group_sizes(self) -> Self:
        if self.rollouts_max < self.rollouts_min:
            raise field_error("rollouts_max", "must be ≥ rollouts_min")
        return self


class RewardConfig(Section):
    """Shaping added to the verifier's task reward (seed 000 §2.5.4, seed 004 §2.3.3); weight 0 = off."""

    model_config = ConfigDict(title="Reward shaping")

    task_weight: float = Field(default=1.0, ge=0, title="Task reward weight")
    """weight of the verifier / judge outcome reward"""
    format_weight: float = Field(default=0.0, ge=0, title="Unparsable output penalty")
    """penalty weight × fraction of steps whose output did not parse"""
    length_weight: float = Field(default=0.0, ge=0, title="Overlong episode penalty")
    """penalty weight × overlong fraction (see length_soft_limit)"""
    length_soft_limit: int = Field(
        default=20, ge=0, le=COUNT_MAX, title="Steps before the length penalty starts"
    )
    """steps allowed without penalty"""
    length_hard_limit: int = Field(default=30, ge=1, le=COUNT_MAX, title="Steps at the full length penalty")
    """penalty reaches its full weight here (seed 002: 30 steps)"""
    repetition_weight: float = Field(default=0.1, ge=0, title="Repeated action penalty")
    """penalty weight × fraction of steps that repeat or loop (seed 004)"""
    cycle_min: int = Field(default=3, ge=2, le=1000, title="Shortest repeated cycle")
    """shortest action cycle penalised (seed 004: 3–5)"""
    cycle_max: int = Field(default=5, ge=2, le=1000, title="Longest repeated cycle")
    """longest action cycle penalised"""

    @model_validator(mode="after")
    def _limits(self) -> Self:
        if self.length_hard_limit <= self.length_soft_limit:
            raise field_error("length_hard_limit", "must be > length_soft_limit")
        if self.cycle_max < self.cycle_min:
            raise field_error("cycle_max", "must be ≥ cycle_min")
        return self


class RLConfig(Section):
    """Everything the token-level trainer needs: the algorithm, its section, curation and rewards.

    `from_run_config` reads a run's config (`workers.rl.run_config`), which holds only the section of
    the run's algorithm; the other one keeps its defaults.
    """

    algorithm: Algorithm = "ppo"
    ppo: PPOConfig = Field(default_factory=PPOConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    curation: CurationConfig = Field(default_factory=CurationConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    """seeds minibatch order (and, in the engine, task order and sampling)"""

    @property
    def section(self) -> PPOConfig | GRPOConfig:
        """The config section of the run's algorithm."""
        return self.ppo if self.algorithm == "ppo" else self.grpo

    @property
    def temperature(self) -> float:
        """Sampling temperature the rollout log-probs are under; the trainer scores with the same."""
        return self.grpo.temperature if self.algorithm == "grpo" else 1.0

    @property
    def thought_temperature(self) -> float | None:
        """The thought's sampling temperature (None = `temperature`); the trainer scores with it too."""
        return self.grpo.thought_temperature if self.algorithm == "grpo" else None

    @property
    def train_thought(self) -> bool:
        """Whether the thought's tokens carry policy loss (GRPO may leave them out; PPO always trains them)."""
        return self.grpo.train_thought if self.algorithm == "grpo" else True

    @classmethod
    def from_run_config(cls, algorithm: str, run_config: Mapping[str, Any]) -> Self:
        """From a run's `algorithm` and its config (the run-level sections are not the trainer's)."""
        picked = {k: run_config[k] for k in ("ppo", "grpo", "curation", "reward", "seed") if k in run_config}
        return cls.model_validate({"algorithm": algorithm, **picked})
