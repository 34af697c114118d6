"""Hyperparameters for PPO, step-wise GRPO, data curation and reward shaping (SPEC §8).

One dataclass per concern, one line of doc per field, defaults taken from the papers:
seed 000 = UI-TARS-2 §2.5.4, seed 001 = ComputerRL §3, seed 002 = DART §3–4 and A.4,
seed 003 = BEPA §4, seed 004 = MAI-UI §2.3.3.

`validate()` returns ``{field: message}`` (empty when valid) so the API can report per-field errors;
`from_dict()` additionally rejects unknown fields and wrong types, raising `ConfigError`.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Self, get_args, get_origin

LossAggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]
KlEstimator = Literal["k1", "k2", "k3"]
IsLevel = Literal["token", "sequence"]
LrSchedule = Literal["constant", "linear", "cosine"]
# experience_pool: seed 002 §4.2; bepa_cache: seed 003 LEVEL-2; replay: seed 004 §2.3.3
InjectionMode = Literal["none", "experience_pool", "bepa_cache", "replay"]


class ConfigError(ValueError):
    """A config could not be built; `errors` maps each offending field to a readable message."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {msg}" for name, msg in sorted(errors.items())))
        self.errors = errors


def _type_error(value: Any, hint: Any) -> str | None:
    """Return why `value` does not fit the annotation `hint`, or None when it fits."""
    origin = get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        errors = [_type_error(value, arm) for arm in get_args(hint)]
        return None if any(e is None for e in errors) else f"expected {hint}, got {value!r}"
    if origin is Literal:
        allowed = get_args(hint)
        return None if value in allowed else f"must be one of {list(allowed)}, got {value!r}"
    if hint is type(None):
        return None if value is None else "expected null"
    # bool is a subclass of int: refuse it where a number is expected, it is almost always a mistake.
    if hint is bool:
        return None if isinstance(value, bool) else f"expected a boolean, got {value!r}"
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"expected an integer, got {value!r}"
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else f"expected a number, got {value!r}"
    if hint is str:
        return None if isinstance(value, str) else f"expected a string, got {value!r}"
    raise TypeError(f"config field annotation {hint!r} is not supported")


class _Config:
    """Shared dict round-trip for the config dataclasses below."""

    def validate(self) -> dict[str, str]:
        """Return ``{field: message}`` for every invalid field; empty when the config is usable."""
        hints = typing.get_type_hints(type(self))
        errors: dict[str, str] = {}
        for f in fields(self):  # type: ignore[arg-type]
            problem = _type_error(getattr(self, f.name), hints[f.name])
            if problem:
                errors[f.name] = problem
        # Range checks compare values, so they only run once every field has the right type.
        return errors or self._value_errors()

    def _value_errors(self) -> dict[str, str]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        return data

    @classmethod
    def from_dict(cls, data: typing.Mapping[str, Any]) -> Self:
        """Build from a JSON-like mapping; missing fields take defaults. Raises `ConfigError`."""
        hints = typing.get_type_hints(cls)
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        errors = {key: "unknown field" for key in data if key not in names}
        kwargs = {key: value for key, value in data.items() if key in names}
        for key, value in kwargs.items():
            # JSON has one number type: store integers given for float fields as floats.
            if hints[key] is float and isinstance(value, int) and not isinstance(value, bool):
                kwargs[key] = float(value)
        config = cls(**kwargs)
        errors.update(config.validate())
        if errors:
            raise ConfigError(errors)
        return config


def _check(errors: dict[str, str], name: str, ok: bool, message: str) -> None:
    if not ok and name not in errors:
        errors[name] = message


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _unit(x: float) -> bool:
    return _finite(x) and 0.0 <= x <= 1.0


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


def _shared_errors(e: dict[str, str], decay_start: float, weight_ema: float) -> None:
    """Checks of the fields PPO and GRPO both have (lr schedule, weight averaging)."""
    _check(e, "lr_decay_start", _finite(decay_start) and 0.0 <= decay_start < 1.0, "must be in [0, 1)")
    _check(e, "weight_ema", _finite(weight_ema) and 0.0 <= weight_ema < 1.0, "must be in [0, 1)")


@dataclass
class PPOConfig(_Config):
    """PPO with clip-higher, decoupled and length-adaptive GAE, value pretraining (seed 000 §2.5.4)."""

    lr_policy: float = 1e-6  # policy learning rate (seed 000 gives none; the GRPO value of seed 002 A.4)
    lr_value: float = 1e-5  # critic learning rate (verl's critic default)
    gamma: float = 1.0  # discount; 1.0 because rewards are sparse outcome rewards
    lambda_critic: float = 1.0  # GAE λ for value targets: 1.0 = Monte Carlo, no decay over long sequences
    lambda_policy: float | None = None  # fixed GAE λ for policy advantages; None = length-adaptive
    length_adaptive_alpha: float = 0.05  # α in λ_policy = 1 − 1/(α·l) (seed 000)
    clip_low: float = 0.2  # ε_low: ratio may fall to 1 − ε_low before clipping
    clip_high: float = 0.28  # ε_high: ratio may rise to 1 + ε_high before clipping (clip-higher)
    value_clip: float | None = 0.5  # clip the value update to ±this around the old value; None = off
    value_loss_coef: float = 0.5  # weight of the value loss when actor and critic share a backbone
    entropy_coef: float = 0.0  # entropy bonus weight (0: clip-higher already keeps entropy up)
    loss_agg: LossAggregation = "token-mean"  # how token losses are averaged into one scalar
    epochs: int = 1  # optimisation passes over each batch
    minibatch_size: int = 8  # trajectories per gradient step
    max_grad_norm: float = 1.0  # global gradient-norm clip
    value_pretrain_max_updates: int = 20  # value pretraining: hard stop in updates (≤ the budget)
    value_pretrain_target_ev: float = 0.8  # value pretraining stops once explained variance ≥ this
    value_pretrain_patience: int = 20  # … and value loss has not improved for this many updates
    is_cap: float | None = 1.0  # truncated IS min(π_train_old / π_rollout, C) for stale steps; null = off
    lr_schedule: LrSchedule = "constant"  # both lrs: constant, or linear / cosine to 0 at the budget's end
    lr_decay_start: float = 0.0  # budget fraction after which linear / cosine annealing starts
    # Weight averaging (Polyak / EMA; Nikishin et al. 2018, "Improving stability in deep RL with weight
    # averaging"): after every update θ̄ ← d·θ̄ + (1 − d)·θ. Rollouts keep the online weights θ.
    weight_ema: float = 0.0  # d of an averaged copy saved beside each checkpoint (`…-ema`); 0 = off

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        for name in ("lr_policy", "lr_value"):
            value = getattr(self, name)
            _check(e, name, _finite(value) and 0.0 < value <= 1.0, "must be in (0, 1]")
        _check(e, "gamma", _unit(self.gamma), "must be in [0, 1]")
        _check(e, "lambda_critic", _unit(self.lambda_critic), "must be in [0, 1]")
        if self.lambda_policy is not None:
            _check(e, "lambda_policy", _unit(self.lambda_policy), "must be in [0, 1] or null")
        _check(
            e,
            "length_adaptive_alpha",
            _finite(self.length_adaptive_alpha) and self.length_adaptive_alpha > 0,
            "must be > 0",
        )
        _check(e, "clip_low", _finite(self.clip_low) and 0.0 < self.clip_low < 1.0, "must be in (0, 1)")
        _check(e, "clip_high", _finite(self.clip_high) and self.clip_high > 0.0, "must be > 0")
        if self.value_clip is not None:
            _check(e, "value_clip", _finite(self.value_clip) and self.value_clip > 0, "must be > 0 or null")
        _check(
            e, "value_loss_coef", _finite(self.value_loss_coef) and self.value_loss_coef >= 0, "must be ≥ 0"
        )
        _check(e, "entropy_coef", _finite(self.entropy_coef) and self.entropy_coef >= 0, "must be ≥ 0")
        _check(e, "epochs", self.epochs >= 1, "must be ≥ 1")
        _check(e, "minibatch_size", self.minibatch_size >= 1, "must be ≥ 1")
        _check(e, "max_grad_norm", _finite(self.max_grad_norm) and self.max_grad_norm > 0, "must be > 0")
        _check(e, "value_pretrain_max_updates", self.value_pretrain_max_updates >= 0, "must be ≥ 0")
        _check(
            e,
            "value_pretrain_target_ev",
            _finite(self.value_pretrain_target_ev) and self.value_pretrain_target_ev <= 1.0,
            "must be ≤ 1",
        )
        _check(e, "value_pretrain_patience", self.value_pretrain_patience >= 1, "must be ≥ 1")
        if self.is_cap is not None:
            _check(e, "is_cap", _finite(self.is_cap) and self.is_cap > 0, "must be > 0 or null")
        _shared_errors(e, self.lr_decay_start, self.weight_ema)
        return e


@dataclass
class GRPOConfig(_Config):
    """Step-wise GRPO with clip-higher, truncated IS and entropy step filter (seed 002 Eq. 1–2, A.4)."""

    lr: float = 1e-6  # policy learning rate
    beta_kl: float = 0.1  # weight of KL(π_θ ‖ π_ref); 0 drops the reference model
    kl_estimator: KlEstimator = "k3"  # per-token KL estimator (k1 = log-ratio, k3 = unbiased, ≥ 0)
    clip_low: float = 0.2  # ε_low
    clip_high: float = 0.28  # ε_high (clip-higher)
    is_cap: float = 1.0  # C in the truncated IS weight min(π_train_old / π_rollout, C)
    is_level: IsLevel = "token"  # truncated IS per token, or one weight per step (product over tokens)
    entropy_keep_fraction: float = 0.8  # keep the steps in the top 80 % of mean token entropy per group
    rollouts_per_task: int = 8  # N: trajectories sampled per task (the GRPO group)
    adv_eps: float = 1e-6  # ε guarding the group std; a group with std < ε carries no signal
    loss_agg: LossAggregation = "token-mean"  # seed 001/004 average over all tokens of the group
    epochs: int = 1  # optimisation passes over each batch
    minibatch_size: int = 8  # steps per gradient step
    max_grad_norm: float = 1.0  # global gradient-norm clip
    temperature: float = 1.0  # rollout sampling temperature (seed 002 A.4)
    thought_temperature: float | None = None  # the thought's own sampling temperature; null = temperature
    train_thought: bool = True  # thought tokens carry policy loss; false = only the action's tokens train
    lr_schedule: LrSchedule = "constant"  # constant, or linear / cosine to 0 at the end of the budget
    lr_decay_start: float = 0.0  # budget fraction after which linear / cosine annealing starts
    weight_ema: float = 0.0  # d of an averaged copy saved beside each checkpoint (`…-ema`); 0 = off

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        _check(e, "lr", _finite(self.lr) and 0.0 < self.lr <= 1.0, "must be in (0, 1]")
        _check(e, "beta_kl", _finite(self.beta_kl) and self.beta_kl >= 0, "must be ≥ 0")
        _check(e, "clip_low", _finite(self.clip_low) and 0.0 < self.clip_low < 1.0, "must be in (0, 1)")
        _check(e, "clip_high", _finite(self.clip_high) and self.clip_high > 0.0, "must be > 0")
        _check(e, "is_cap", _finite(self.is_cap) and self.is_cap > 0, "must be > 0")
        keep = self.entropy_keep_fraction
        _check(e, "entropy_keep_fraction", _finite(keep) and 0.0 < keep <= 1.0, "must be in (0, 1]")
        _check(
            e,
            "rollouts_per_task",
            self.rollouts_per_task >= 2,
            "must be ≥ 2 (a group of one has no baseline)",
        )
        _check(e, "adv_eps", _finite(self.adv_eps) and self.adv_eps > 0, "must be > 0")
        _check(e, "epochs", self.epochs >= 1, "must be ≥ 1")
        _check(e, "minibatch_size", self.minibatch_size >= 1, "must be ≥ 1")
        _check(e, "max_grad_norm", _finite(self.max_grad_norm) and self.max_grad_norm > 0, "must be > 0")
        _check(e, "temperature", _finite(self.temperature) and self.temperature > 0, "must be > 0")
        if self.thought_temperature is not None:
            ok = _finite(self.thought_temperature) and 1e-3 <= self.thought_temperature <= 10.0
            _check(e, "thought_temperature", ok, "must be in [0.001, 10] or null")
        _shared_errors(e, self.lr_decay_start, self.weight_ema)
        return e


@dataclass
class CurationConfig(_Config):
    """Which rollouts are sampled and trained on (seed 002 §4, seed 003 §4, seed 004 §2.3.3, seed 001 §3.3)."""

    rollouts_max: int = 8  # N for tasks at or below the success threshold (seed 002: 8)
    rollouts_min: int = 2  # N for a task that always succeeds; ≥ 2 so a group keeps a baseline
    success_threshold: float = 0.6  # above this recent success rate N is lowered (seed 002 §4.1)
    success_window: int = 16  # recent outcomes per task the success rate is computed over
    success_min_reward: float = 0.5  # a trajectory whose task reward is ≥ this counts as a success
    step_cap: int = 30  # global step limit; per-task limit = longest success so far, at most this
    injection: InjectionMode = "experience_pool"  # store that fills a group where all N failed (none = off)
    experience_pool_per_task: int = 16  # successes kept per task in the experience pool (oldest dropped)
    replay_per_task: int = 8  # MAI-UI replay buffer: most recent successes kept per task
    staleness_bound: int = 1  # a step is trained on only if its policy version is ≥ current − this
    min_batch_trajectories: int = 8  # the trainer steps once this many completed trajectories wait
    plateau_window: int = 20  # Entropulse: updates per window compared for a plateau
    plateau_reward_min_gain: float = 0.01  # reward gain between windows below this = stagnating
    plateau_entropy_max_rel_change: float = 0.0  # entropy relative change ≤ this = not recovering
    seed: int = 0  # seed for the random picks of pool and cache

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        _check(e, "rollouts_min", self.rollouts_min >= 2, "must be ≥ 2")
        _check(e, "rollouts_max", self.rollouts_max >= self.rollouts_min, "must be ≥ rollouts_min")
        _check(
            e,
            "success_threshold",
            _unit(self.success_threshold) and self.success_threshold < 1.0,
            "must be in [0, 1)",
        )
        _check(e, "success_window", self.success_window >= 1, "must be ≥ 1")
        _check(e, "success_min_reward", _finite(self.success_min_reward), "must be a finite number")
        _check(e, "step_cap", self.step_cap >= 1, "must be ≥ 1")
        _check(e, "experience_pool_per_task", self.experience_pool_per_task >= 1, "must be ≥ 1")
        _check(e, "replay_per_task", self.replay_per_task >= 1, "must be ≥ 1")
        _check(e, "staleness_bound", self.staleness_bound >= 0, "must be ≥ 0")
        _check(e, "min_batch_trajectories", self.min_batch_trajectories >= 1, "must be ≥ 1")
        _check(e, "plateau_window", self.plateau_window >= 2, "must be ≥ 2")
        _check(e, "plateau_reward_min_gain", _finite(self.plateau_reward_min_gain), "must be a finite number")
        _check(
            e,
            "plateau_entropy_max_rel_change",
            _finite(self.plateau_entropy_max_rel_change),
            "must be a finite number",
        )
        _check(e, "seed", self.seed >= 0, "must be ≥ 0")
        return e


@dataclass
class RewardConfig(_Config):
    """Shaping added to the verifier's task reward (seed 000 §2.5.4, seed 004 §2.3.3); weight 0 = off."""

    task_weight: float = 1.0  # weight of the verifier / judge outcome reward
    format_weight: float = 0.0  # penalty weight × fraction of steps whose output did not parse
    length_weight: float = 0.0  # penalty weight × overlong fraction (see length_soft_limit)
    length_soft_limit: int = 20  # steps allowed without penalty
    length_hard_limit: int = 30  # penalty reaches its full weight here (seed 002: 30 steps)
    repetition_weight: float = 0.1  # penalty weight × fraction of steps that repeat or loop (seed 004)
    cycle_min: int = 3  # shortest action cycle penalised (seed 004: 3–5)
    cycle_max: int = 5  # longest action cycle penalised

    def _value_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        for name in ("task_weight", "format_weight", "length_weight", "repetition_weight"):
            value = getattr(self, name)
            _check(e, name, _finite(value) and value >= 0, "must be ≥ 0")
        _check(e, "length_soft_limit", self.length_soft_limit >= 0, "must be ≥ 0")
        _check(
            e,
            "length_hard_limit",
            self.length_hard_limit > self.length_soft_limit,
            "must be > length_soft_limit",
        )
        _check(e, "cycle_min", self.cycle_min >= 2, "must be ≥ 2")
        _check(e, "cycle_max", self.cycle_max >= self.cycle_min, "must be ≥ cycle_min")
        return e


Algorithm = Literal["ppo", "grpo"]


@dataclass
class RLConfig:
    """Everything the token-level trainer needs: the algorithm, its section, curation and rewards.

    `from_run_config` reads the normalised dict of `rl_control.run_config.run_config_build` (which
    holds only the section of the run's algorithm; the other one keeps its defaults).
    """

    algorithm: Algorithm = "ppo"
    ppo: PPOConfig = field(default_factory=PPOConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    curation: CurationConfig = field(default_factory=CurationConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    seed: int = 0  # seeds minibatch order (and, in the engine, task order and sampling)

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

    def validate(self) -> dict[str, str]:
        """``{"section.field": message}`` over every section; empty when usable."""
        errors: dict[str, str] = {}
        if self.algorithm not in get_args(Algorithm):
            errors["algorithm"] = f"must be one of {list(get_args(Algorithm))}"
        for name in ("ppo", "grpo", "curation", "reward"):
            for key, message in getattr(self, name).validate().items():
                errors[f"{name}.{key}"] = message
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            errors["seed"] = "must be an integer ≥ 0"
        return errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "ppo": self.ppo.to_dict(),
            "grpo": self.grpo.to_dict(),
            "curation": self.curation.to_dict(),
            "reward": self.reward.to_dict(),
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: typing.Mapping[str, Any]) -> Self:
        """Inverse of `to_dict`; missing sections take defaults. Raises `ConfigError`."""
        known = {"algorithm", "ppo", "grpo", "curation", "reward", "seed"}
        errors = {key: "unknown field" for key in data if key not in known}
        if data.get("algorithm", "ppo") not in get_args(Algorithm):
            errors["algorithm"] = f"must be one of {list(get_args(Algorithm))}"
        sections: dict[str, Any] = {}
        for name, section_cls in (
            ("ppo", PPOConfig),
            ("grpo", GRPOConfig),
            ("curation", CurationConfig),
            ("reward", RewardConfig),
        ):
            try:
                sections[name] = section_cls.from_dict(data.get(name) or {})
            except ConfigError as exc:
                errors.update({f"{name}.{k}": v for k, v in exc.errors.items()})
        if errors:
            raise ConfigError(errors)
        config = cls(algorithm=data.get("algorithm", "ppo"), seed=data.get("seed", 0), **sections)
        problems = config.validate()
        if problems:
            raise ConfigError(problems)
        return config

    @classmethod
    def from_run_config(cls, algorithm: str, run_config: typing.Mapping[str, Any]) -> Self:
        """From a run's `algorithm` and its normalised config (extra run-level sections are ignored)."""
        picked = {k: run_config[k] for k in ("ppo", "grpo", "curation", "reward", "seed") if k in run_config}
        return cls.from_dict({"algorithm": algorithm, **picked})
