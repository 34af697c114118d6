"""Run config: defaults, per-field errors keyed "section.field", presets with the papers' values; a
config stored before a field existed still loads; each preset's defaults are the ones main had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_control.presets import PRESETS, START_PROFILES, preset_get, preset_list
from rl_control.services import RunConfigError
from rl_control.services.runs import run_config_check
from workers.rl.run_config import deep_merge, run_config_build

# Every preset's full config for every start model, and the defaults of each algorithm, as the
# hand-written config layers produced them before the config became one pydantic model.
BEFORE = json.loads((Path(__file__).parent / "preset_defaults.json").read_text())


def test_defaults_fill_every_section_of_the_algorithm() -> None:
    config = run_config_build(algorithm="ppo", config={})
    assert list(config) == [
        "env", "serving", "budget", "alerts", "ppo", "curation", "reward", "entropulse", "judge", "vlm",
        "seed", "task_ids",
    ]  # fmt: skip
    assert config["ppo"]["clip_high"] == 0.28 and config["budget"]["max_updates"] == 200
    assert "grpo" not in config


def test_each_presets_defaults_are_unchanged() -> None:
    for algorithm in ("ppo", "grpo"):
        assert run_config_build(algorithm=algorithm, config={}) == BEFORE["defaults"][algorithm]
    assert len(BEFORE["presets"]) == len(PRESETS) * len(START_PROFILES)
    for name in PRESETS:
        for profile in START_PROFILES:
            preset = preset_get(name, profile)
            before = BEFORE["presets"][f"{name}/{profile}"]
            assert (preset["algorithm"], preset["mode"]) == (before["algorithm"], before["mode"])
            # compared as JSON text: a float that became an integer (0.0 → 0) would show
            assert json.dumps(preset["config"], sort_keys=True) == json.dumps(
                before["config"], sort_keys=True
            )


def test_a_config_stored_before_later_fields_existed_still_loads() -> None:
    # a run config as stored by an early version: no serving, judge, entropulse, vlm sections, and
    # fields added since (env.shared_group_seed, env.priority, grpo.train_thought …) missing
    old = {"env": {"kind": "browser", "parallel_envs": 4, "context_screenshots": 5},
           "budget": {"max_updates": 50, "max_episodes": None, "max_minutes": 30.0},
           "grpo": {"lr": 1e-6, "beta_kl": 0.1, "rollouts_per_task": 8},
           "curation": {"rollouts_max": 8, "rollouts_min": 2, "step_cap": 30}, "seed": 3, "task_ids": []}  # fmt: skip
    config = run_config_build(algorithm="grpo", config=old)
    assert config["env"]["parallel_envs"] == 4 and config["env"]["shared_group_seed"] is True
    assert config["grpo"]["train_thought"] is True and config["serving"]["endpoints"] == ""
    assert config["vlm"] == BEFORE["defaults"]["grpo"]["vlm"] and config["seed"] == 3


def test_overrides_merge_into_defaults() -> None:
    config = run_config_build(algorithm="grpo", config={"grpo": {"beta_kl": 0}, "seed": 7})
    assert config["grpo"]["beta_kl"] == 0.0 and config["grpo"]["lr"] == 1e-6 and config["seed"] == 7


def test_every_problem_is_reported_at_once_keyed_by_section_and_field() -> None:
    with pytest.raises(RunConfigError) as err:
        run_config_check(
            algorithm="grpo",
            config={
                "grpo": {"clip_low": 1.5, "bogus": 1},
                "ppo": {},
                "env": {"parallel_envs": 0},
                "budget": {"max_updates": None, "max_episodes": None, "max_minutes": None},
                "extra": 1,
                "seed": -1,
                "task_ids": [1, 1],
            },
        )
    errors = err.value.errors
    assert errors["grpo.clip_low"] == ["Input should be less than 1"]
    assert errors["grpo.bogus"] == ["Extra inputs are not permitted"]
    assert errors["ppo"] == ["only for algorithm ppo; this run uses grpo"]
    assert errors["env.parallel_envs"] == ["Input should be greater than or equal to 1"]
    assert errors["budget.max_updates"] == ["set at least one of max_updates, max_episodes, max_minutes"]
    assert errors["extra"] == ["Extra inputs are not permitted"]
    assert errors["seed"] == ["Input should be greater than or equal to 0"]
    assert errors["task_ids"] == ["lists a task twice"]
    assert len(errors) == 8 and all(isinstance(v, list) and v for v in errors.values())


def test_wrong_types_hostile_values_and_unknown_algorithm() -> None:
    with pytest.raises(RunConfigError) as err:
        run_config_check(
            algorithm="grpo",
            config={
                "curation": {"injection": "magic", "step_cap": 10**40},
                "env": "browser",
                "grpo": {"lr": "1e-3", "epochs": True, "temperature": {"a": [1, {"b": None}]}},
                "judge": {"url": "file:///etc/passwd", "model": " "},
                "task_ids": [1, "2", -3, 2**70],
            },
        )
    errors = err.value.errors
    assert "curation.injection" in errors and "curation.step_cap" in errors
    assert errors["env"] == ["Input should be a valid dictionary or instance of EnvSettings"]
    assert {"grpo.lr", "grpo.epochs", "grpo.temperature"} <= set(errors)
    assert errors["judge.url"] == ["must be an http(s) URL"] and errors["judge.model"] == [
        "must not be blank"
    ]
    assert {"task_ids.1", "task_ids.2", "task_ids.3"} <= set(errors)
    for config in ([], "x", None):
        with pytest.raises(RunConfigError) as err:
            run_config_check(algorithm="grpo", config=config)
        assert err.value.errors == {"config": ["must be a JSON object"]}
    with pytest.raises(RunConfigError) as err:
        run_config_check(algorithm="dqn", config={})
    assert list(err.value.errors) == ["algorithm"]


def test_deep_merge_replaces_leaves_and_merges_dicts() -> None:
    assert deep_merge({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"c": 3}, "d": [2]}) == {
        "a": {"b": 1, "c": 3},
        "d": [2],
    }


def test_presets_carry_the_papers_hyperparameters() -> None:
    ppo = preset_get("ppo-uitars2")
    assert (ppo["algorithm"], ppo["mode"]) == ("ppo", "async")
    p = ppo["config"]["ppo"]
    assert (p["clip_low"], p["clip_high"], p["lambda_critic"], p["lambda_policy"]) == (0.2, 0.28, 1.0, None)
    assert p["length_adaptive_alpha"] == 0.05 and p["value_pretrain_max_updates"] > 0

    dart = preset_get("grpo-dart")["config"]
    g = dart["grpo"]
    assert (g["lr"], g["beta_kl"], g["is_cap"], g["entropy_keep_fraction"]) == (1e-6, 0.1, 1.0, 0.8)
    assert dart["curation"]["rollouts_max"] == 8 and dart["curation"]["injection"] == "experience_pool"

    bepa = preset_get("bepa")["config"]
    assert bepa["curation"]["injection"] == "bepa_cache" and bepa["grpo"]["beta_kl"] == 0.0
    assert bepa["curation"]["step_cap"] == 15 and bepa["grpo"]["clip_high"] == 0.3

    sync = preset_get("sync-baseline")
    assert sync["mode"] == "sync" and sync["config"]["curation"]["injection"] == "none"


def test_every_preset_is_a_valid_full_config() -> None:
    for profile in START_PROFILES:
        listed = preset_list(profile)
        assert [p["name"] for p in listed] == list(PRESETS)
        for preset in listed:
            assert (
                run_config_build(algorithm=preset["algorithm"], config=preset["config"]) == preset["config"]
            )


def test_serving_endpoints_are_http_urls() -> None:
    config = run_config_build(
        algorithm="grpo", config={"serving": {"endpoints": " http://gpu1:8000/v1 ,https://x/v1"}}
    )
    assert config["serving"] == {
        "endpoints": " http://gpu1:8000/v1 ,https://x/v1",
        "servers": 1,
        "endpoint_api": "flywheel",
    }
    for bad in ("file:///etc/passwd", "gpu1:8000", "http://a/v1,javascript:alert(1)", "http://a/v1" * 400):
        with pytest.raises(RunConfigError) as err:
            run_config_check(algorithm="grpo", config={"serving": {"endpoints": bad}})
        assert "serving.endpoints" in err.value.errors
    with pytest.raises(RunConfigError) as err:
        run_config_check(algorithm="grpo", config={"serving": {"servers": 0}})
    assert "serving.servers" in err.value.errors
