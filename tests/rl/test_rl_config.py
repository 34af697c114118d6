"""Configs carry the papers' defaults, report per-field errors and round-trip through JSON."""

import json

import pytest

from workers.rl.config import ConfigError, CurationConfig, GRPOConfig, PPOConfig, RewardConfig

ALL = [PPOConfig, GRPOConfig, CurationConfig, RewardConfig]


def test_paper_defaults() -> None:
    ppo, grpo, cur = PPOConfig(), GRPOConfig(), CurationConfig()
    assert (ppo.clip_low, ppo.clip_high, ppo.lambda_critic, ppo.length_adaptive_alpha, ppo.gamma) == (
        0.2, 0.28, 1.0, 0.05, 1.0,
    )  # fmt: skip
    assert (grpo.lr, grpo.beta_kl, grpo.is_cap, grpo.entropy_keep_fraction, grpo.rollouts_per_task) == (
        1e-6, 0.1, 1.0, 0.8, 8,
    )  # fmt: skip
    assert (cur.rollouts_max, cur.success_threshold, cur.step_cap, cur.replay_per_task, cur.staleness_bound) == (
        8, 0.6, 30, 8, 1,
    )  # fmt: skip


@pytest.mark.parametrize("cls", ALL)
def test_defaults_are_valid_and_round_trip(cls: type) -> None:
    config = cls()
    assert config.validate() == {}
    assert cls.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_validate_reports_each_bad_field() -> None:
    errors = GRPOConfig(lr=0.0, clip_low=1.5, entropy_keep_fraction=0.0, rollouts_per_task=1).validate()
    assert set(errors) == {"lr", "clip_low", "entropy_keep_fraction", "rollouts_per_task"}
    assert "≥ 2" in errors["rollouts_per_task"]
    assert set(RewardConfig(length_soft_limit=30, length_hard_limit=30).validate()) == {"length_hard_limit"}
    assert set(CurationConfig(rollouts_min=4, rollouts_max=3).validate()) == {"rollouts_max"}
    assert set(PPOConfig(lambda_policy=1.5, value_clip=-1.0).validate()) == {"lambda_policy", "value_clip"}


def test_validate_reports_wrong_types_without_crashing() -> None:
    config = PPOConfig()
    config.epochs = "3"  # type: ignore[assignment]
    config.gamma = float("nan")
    errors = config.validate()
    assert set(errors) == {"epochs"}  # type errors first; range checks need well-typed fields
    config.epochs = 3
    assert set(config.validate()) == {"gamma"}


def test_from_dict() -> None:
    grpo = GRPOConfig.from_dict({"beta_kl": 0, "rollouts_per_task": 16})
    assert grpo.beta_kl == 0.0 and isinstance(grpo.beta_kl, float) and grpo.rollouts_per_task == 16
    with pytest.raises(ConfigError) as info:
        GRPOConfig.from_dict({"lr": "fast", "kl_estimator": "k9", "epochs": True, "bogus": 1})
    assert set(info.value.errors) == {"lr", "kl_estimator", "epochs", "bogus"}
    assert info.value.errors["bogus"] == "unknown field"
    with pytest.raises(ConfigError) as info:
        CurationConfig.from_dict({"success_threshold": 1.0})
    assert set(info.value.errors) == {"success_threshold"}
    assert PPOConfig.from_dict({"lambda_policy": 0.95}).lambda_policy == 0.95
