"""RL math and data curation as pure torch / Python (SPEC §8, §9). No Django here (tests/test_layers.py).

- `config`: PPOConfig, GRPOConfig, CurationConfig, RewardConfig with per-field validation.
- `advantages`: GAE (decoupled, length-adaptive λ) and step-wise GRPO group advantages.
- `losses`: clip-higher PPO / GRPO losses, value loss, truncated IS, KL, entropy, step filter.
- `stats`: explained variance, correlations, CIs, histograms, min/max downsampling for dashboards.
- `curation`: dynamic rollout N, step limits, experience pool, BEPA cache, replay, curriculum, plateau.
- `curator`: GroupCurator applying all curation rules to one finished rollout group; staleness.
- `rewards`: format / length / repetition shaping around the verifier's outcome.
- `merge`: θ = Σ α_k θ_k over state dicts. `value_pretrain`: when critic pretraining has converged.
- `trainer`: PolicyTrainer (PPO / step-wise GRPO updates of the embedded model, value pretraining,
  Entropulse, save / resume), StepSample / TrajectorySample, step_sample_from. Import it from
  `workers.rl.trainer` directly: it loads torch models, which this package's light users do not need.
"""

from workers.rl.advantages import (
    GroupAdvantages,
    broadcast_trajectory_rewards,
    decoupled_gae,
    gae,
    length_adaptive_lambda,
    stepwise_grpo_advantages,
)
from workers.rl.config import ConfigError, CurationConfig, GRPOConfig, PPOConfig, RewardConfig
from workers.rl.curation import (
    BepaCache,
    DynamicRolloutCount,
    ExperiencePool,
    Injection,
    PlateauDetector,
    ReplayBuffer,
    StepLimit,
    curriculum_bucket,
    rollouts_for_success_rate,
)
from workers.rl.curator import GroupCurator, GroupPlan, RolloutOutcome, staleness, within_staleness_bound
from workers.rl.losses import (
    GrpoLossStats,
    PolicyLossStats,
    aggregate_loss,
    entropy_from_logits,
    entropy_step_filter,
    grpo_loss,
    kl_penalty,
    masked_mean,
    ppo_policy_loss,
    step_mean_entropy,
    truncated_is_weight,
    value_loss,
)
from workers.rl.merge import merge_state_dicts
from workers.rl.rewards import (
    RewardBreakdown,
    format_reward,
    length_penalty,
    repetition_penalty,
    total_reward,
)
from workers.rl.stats import (
    MeanCI,
    downsample_minmax,
    explained_variance,
    histogram,
    mean_ci95,
    value_reward_correlation,
)
from workers.rl.value_pretrain import ValuePretrainMonitor

__all__ = [
    "BepaCache",
    "ConfigError",
    "CurationConfig",
    "DynamicRolloutCount",
    "ExperiencePool",
    "GRPOConfig",
    "GroupAdvantages",
    "GroupCurator",
    "GroupPlan",
    "GrpoLossStats",
    "Injection",
    "MeanCI",
    "PPOConfig",
    "PlateauDetector",
    "PolicyLossStats",
    "ReplayBuffer",
    "RewardBreakdown",
    "RewardConfig",
    "RolloutOutcome",
    "StepLimit",
    "ValuePretrainMonitor",
    "aggregate_loss",
    "broadcast_trajectory_rewards",
    "curriculum_bucket",
    "decoupled_gae",
    "downsample_minmax",
    "entropy_from_logits",
    "entropy_step_filter",
    "explained_variance",
    "format_reward",
    "gae",
    "grpo_loss",
    "histogram",
    "kl_penalty",
    "length_adaptive_lambda",
    "length_penalty",
    "masked_mean",
    "mean_ci95",
    "merge_state_dicts",
    "ppo_policy_loss",
    "repetition_penalty",
    "rollouts_for_success_rate",
    "staleness",
    "step_mean_entropy",
    "stepwise_grpo_advantages",
    "total_reward",
    "truncated_is_weight",
    "value_loss",
    "value_reward_correlation",
    "within_staleness_bound",
]
