"""Configs carry the papers' defaults, refuse bad values per field and round-trip through JSON."""

import json

import pytest
from pydantic import ValidationError

from workers.rl.config import CurationConfig, GRPOConfig, PPOConfig, RewardConfig, RLConfig, errors_by_field

ALL = [PPOConfig, GRPOConfig, CurationConfig, RewardConfig, RLConfig]


def _errors(cls: type, data: dict) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(data)
    return errors_by_field(info.value)


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
def test_defaults_round_trip_through_json(cls: type) -> None:
    config = cls()
    assert cls.model_validate(json.loads(json.dumps(config.model_dump()))) == config


def test_each_bad_field_is_named() -> None:
    errors = _errors(
        GRPOConfig, {"lr": 0.0, "clip_low": 1.5, "entropy_keep_fraction": 0.0, "rollouts_per_task": 1}
    )
    assert set(errors) == {"lr", "clip_low", "entropy_keep_fraction", "rollouts_per_task"}
    assert errors["rollouts_per_task"] == ["Input should be greater than or equal to 2"]
    assert _errors(PPOConfig, {"lambda_policy": 1.5, "value_clip": -1.0}).keys() == {
        "lambda_policy",
        "value_clip",
    }


def test_checks_across_fields_are_reported_at_the_field() -> None:
    assert _errors(RewardConfig, {"length_soft_limit": 30, "length_hard_limit": 30}) == {
        "length_hard_limit": ["must be > length_soft_limit"]
    }
    assert _errors(RewardConfig, {"cycle_min": 4, "cycle_max": 3}) == {"cycle_max": ["must be ≥ cycle_min"]}
    assert _errors(CurationConfig, {"rollouts_min": 4, "rollouts_max": 3}) == {
        "rollouts_max": ["must be ≥ rollouts_min"]
    }
    errors = _errors(RLConfig, {"curation": {"rollouts_min": 4, "rollouts_max": 3}})
    assert errors == {"curation.rollouts_max": ["must be ≥ rollouts_min"]}


def test_wrong_types_unknown_fields_and_non_finite_numbers_are_refused() -> None:
    errors = _errors(
        GRPOConfig, {"lr": "fast", "kl_estimator": "k9", "epochs": True, "bogus": 1, "beta_kl": "0"}
    )
    assert set(errors) == {"lr", "kl_estimator", "epochs", "bogus", "beta_kl"}
    assert errors["bogus"] == ["Extra inputs are not permitted"]
    assert set(_errors(PPOConfig, {"gamma": float("nan"), "clip_high": float("inf")})) == {
        "gamma",
        "clip_high",
    }
    assert set(_errors(PPOConfig, {"epochs": 2.0, "minibatch_size": 10**30, "lr_value": 10**400})) == {
        "epochs", "minibatch_size", "lr_value",
    }  # fmt: skip
    assert set(_errors(CurationConfig, {"success_threshold": 1.0})) == {"success_threshold"}
    assert set(_errors(RLConfig, {"algorithm": "dqn", "grpo": {"lr": 0}, "reward": []})) == {
        "algorithm", "grpo.lr", "reward",
    }  # fmt: skip


def test_numbers_are_kept_as_their_field_type_and_configs_are_frozen() -> None:
    grpo = GRPOConfig.model_validate({"beta_kl": 0, "rollouts_per_task": 16})
    assert grpo.beta_kl == 0.0 and isinstance(grpo.beta_kl, float) and grpo.rollouts_per_task == 16
    assert PPOConfig.model_validate({"lambda_policy": 0.95}).lambda_policy == 0.95
    with pytest.raises(ValidationError):
        grpo.lr = 0.5  # type: ignore[misc]  # a built config stays valid: it cannot be changed


def test_the_trainer_reads_its_sections_from_a_run_config() -> None:
    config = RLConfig.from_run_config(
        "grpo", {"grpo": {"beta_kl": 0.0}, "seed": 3, "env": {"kind": "browser"}}
    )
    assert (config.algorithm, config.grpo.beta_kl, config.seed, config.section) == (
        "grpo",
        0.0,
        3,
        config.grpo,
    )
    assert config.ppo == PPOConfig()  # the other algorithm's section keeps its defaults
