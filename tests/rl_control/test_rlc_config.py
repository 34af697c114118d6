"""Run config: defaults, per-field errors keyed "section.field", presets with the papers' values, help."""

from __future__ import annotations

from dataclasses import fields

import pytest

from rl_control.presets import PRESETS, field_choices, field_help, preset_get, preset_list
from rl_control.run_config import SECTIONS, RunConfigError, deep_merge, run_config_build


def test_defaults_fill_every_section_of_the_algorithm() -> None:
    config = run_config_build(algorithm="ppo", config={})
    assert set(config) == {
        "env",
        "serving",
        "budget",
        "alerts",
        "ppo",
        "curation",
        "reward",
        "entropulse",
        "judge",
        "vlm",
        "seed",
        "task_ids",
    }
    assert config["ppo"]["clip_high"] == 0.28 and config["budget"]["max_updates"] == 200
    assert "grpo" not in config


def test_overrides_merge_into_defaults() -> None:
    config = run_config_build(algorithm="grpo", config={"grpo": {"beta_kl": 0}, "seed": 7})
    assert config["grpo"]["beta_kl"] == 0.0 and config["grpo"]["lr"] == 1e-6 and config["seed"] == 7


def test_every_problem_is_reported_at_once_keyed_by_section_and_field() -> None:
    with pytest.raises(RunConfigError) as err:
        run_config_build(
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
    assert errors["grpo.clip_low"] == ["must be in (0, 1)"]
    assert errors["grpo.bogus"] == ["unknown field"]
    assert errors["ppo"] == ["only for algorithm ppo; this run uses grpo"]
    assert errors["env.parallel_envs"] == ["must be in [1, 512]"]
    assert "at least one" in errors["budget.max_updates"][0]
    assert errors["extra"] == ["unknown section"]
    assert errors["seed"] == ["must be an integer ≥ 0"]
    assert errors["task_ids"] == ["lists a task twice"]
    assert all(isinstance(v, list) and v for v in errors.values())


def test_wrong_types_and_unknown_algorithm() -> None:
    with pytest.raises(RunConfigError) as err:
        run_config_build(algorithm="grpo", config={"curation": {"injection": "magic"}, "env": "browser"})
    assert "must be one of" in err.value.errors["curation.injection"][0]
    assert err.value.errors["env"] == ["must be a JSON object"]
    with pytest.raises(RunConfigError) as err:
        run_config_build(algorithm="dqn", config={})
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
    listed = preset_list()
    assert [p["name"] for p in listed] == list(PRESETS)
    for preset in listed:
        assert run_config_build(algorithm=preset["algorithm"], config=preset["config"]) == preset["config"]


def test_every_field_has_one_line_of_help() -> None:
    help_text = field_help()
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            text = help_text.get(f"{section}.{f.name}")
            assert text and "\n" not in text, f"{section}.{f.name} has no help"
    shown = preset_get("grpo-dart")["help"]
    assert "grpo.beta_kl" in shown and "ppo.lambda_critic" not in shown and "seed" in shown


def test_fixed_set_fields_list_their_choices_and_each_choice_validates() -> None:
    choices = field_choices()
    assert choices["grpo.lr_schedule"] == ["constant", "linear", "cosine"]
    assert choices["curation.injection"] == ["none", "experience_pool", "bepa_cache", "replay"]
    assert "grpo.lr" not in choices and "env.shared_group_seed" not in choices
    dart = preset_get("grpo-dart")
    assert set(dart["choices"]) == {k for k in choices if k.split(".")[0] in dart["config"]}
    for key, values in dart["choices"].items():
        section, name = key.split(".")
        assert dart["config"][section][name] in values
        for value in values:
            config = run_config_build(algorithm="grpo", config={section: {name: value}})
            assert config[section][name] == value


def test_serving_endpoints_are_http_urls() -> None:
    config = run_config_build(
        algorithm="grpo", config={"serving": {"endpoints": " http://gpu1:8000/v1 ,https://x/v1"}}
    )
    assert config["serving"] == {
        "endpoints": " http://gpu1:8000/v1 ,https://x/v1",
        "servers": 1,
        "endpoint_api": "flywheel",
    }
    for bad in ("file:///etc/passwd", "gpu1:8000", "http://a/v1,javascript:alert(1)"):
        with pytest.raises(RunConfigError) as err:
            run_config_build(algorithm="grpo", config={"serving": {"endpoints": bad}})
        assert "serving.endpoints" in err.value.errors
    with pytest.raises(RunConfigError) as err:
        run_config_build(algorithm="grpo", config={"serving": {"servers": 0}})
    assert "serving.servers" in err.value.errors
