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
  Entropulse, save / resume).
- `samples`: StepSample / TrajectorySample (what the trainer trains on), step_sample_from,
  sft_examples_from.

Import from the modules themselves: this package re-exports nothing, so that a light user (the web
process reading `stats` for dashboards) does not load torch through it.
"""
