"""Presets that fit the start model (issue 34 item 1): a preset's defaults depend on what the run
starts from — the embedded starter gets the settings `bench learn` shows it learns under, an HF
vision-language checkpoint or an external endpoint the papers' — through the presets API the launch
form reads and through run creation; PPO's critic warm-up ends within the update budget."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from rl_control.models import Run
from rl_control.presets import EMBEDDED_FIT, PRESETS, preset_get, preset_overrides
from rl_control.services import RunConfigError
from rl_control.services.runs import run_config_check
from webapp.store.models import Checkpoint
from workers.rl.run_config import run_config_build


def test_the_embedded_starter_gets_the_settings_rl_learns_under() -> None:
    before = copy.deepcopy(EMBEDDED_FIT)
    for name, preset in PRESETS.items():
        small = preset_get(name, "embedded")["config"]
        large = preset_get(name, "hf_vlm")["config"]
        assert preset_get(name, "endpoint")["config"] == large
        assert run_config_build(algorithm=preset.algorithm, config=small) == small
        assert small["curation"]["step_cap"] == 6 and large["curation"]["step_cap"] in (15, 30)
        # two slots for make up's two rollout processes, batches of two groups of 4 (journey-measured)
        assert (small["env"]["parallel_envs"], small["curation"]["min_batch_trajectories"]) == (2, 8)
        assert large["env"]["parallel_envs"] == 8
        if preset.algorithm == "grpo":
            g = small["grpo"]
            assert (g["lr"], g["temperature"], g["thought_temperature"], g["beta_kl"], g["weight_ema"]) == (
                5e-4, 0.5, 0.05, 0.0, 0.95,
            )  # fmt: skip
            assert large["grpo"]["lr"] == 1e-6
            # a fixed group stays fixed (BEPA, the synchronous baseline), a dynamic one stays dynamic
            # unless nothing is injected into its groups (Entropulse: fixed on the starter)
            fixed = large["curation"]["rollouts_min"] == large["curation"]["rollouts_max"]
            fixed = fixed or large["curation"]["injection"] == "none"
            assert (small["curation"]["rollouts_min"] == small["curation"]["rollouts_max"]) == fixed
            assert small["curation"]["rollouts_max"] == small["grpo"]["rollouts_per_task"] == 4
        else:
            assert small["ppo"]["lr_policy"] == 5e-4 and large["ppo"]["lr_policy"] == 1e-6
    assert preset_get("bepa", "embedded")["config"]["curation"]["injection"] == "bepa_cache"  # its own kept
    assert EMBEDDED_FIT == before  # resolving never edits the table
    assert preset_overrides("grpo-dart", "hf_vlm") == PRESETS["grpo-dart"].overrides


def test_ppo_critic_warmup_ends_within_the_update_budget() -> None:
    for profile in ("embedded", "hf_vlm"):
        config = preset_get("ppo-uitars2", profile)["config"]
        assert config["ppo"]["value_pretrain_max_updates"] * 10 <= config["budget"]["max_updates"]
    with pytest.raises(RunConfigError) as err:
        run_config_check(
            algorithm="ppo",
            config={"ppo": {"value_pretrain_max_updates": 500}, "budget": {"max_updates": 200}},
        )
    assert (
        "the policy would never train (at most 199" in err.value.errors["ppo.value_pretrain_max_updates"][0]
    )
    ok = {"ppo": {"value_pretrain_max_updates": 500}, "budget": {"max_updates": None, "max_minutes": 10}}
    assert run_config_build(algorithm="ppo", config=ok)["ppo"]["value_pretrain_max_updates"] == 500


@pytest.fixture
def vlm(tmp_path: Path) -> Checkpoint:
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path / "vlm", seed=0, version="0")
    return Checkpoint.objects.create(version="tiny-vlm", path=str(path))


@pytest.fixture
def embedded(tmp_path: Path) -> Checkpoint:
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    path = tmp_path / "emb"
    new_model(FlywheelPolicyConfig(flywheel_version="0"), seed=0).save_pretrained(path)
    FlywheelTokenizer().save_pretrained(path)
    return Checkpoint.objects.create(version="emb-1", path=str(path))


def _dart(presets: list[dict]) -> dict:
    return next(p for p in presets if p["name"] == "grpo-dart")


@pytest.mark.django_db
def test_the_form_and_run_creation_take_the_start_models_defaults(api, pool, vlm, embedded) -> None:
    from webapp.flywheel.services.promotion import checkpoint_promote

    client = api("researcher")
    fresh = _dart(client.get("/api/rl/presets/").json())  # nothing promoted: a fresh embedded model
    assert fresh["start_profile"] == "embedded" and fresh["config"]["grpo"]["lr"] == 5e-4
    large = _dart(client.get("/api/rl/presets/", {"start_checkpoint": "tiny-vlm"}).json())
    assert large["start_profile"] == "hf_vlm" and large["config"]["grpo"]["lr"] == 1e-6
    assert large["config"]["curation"]["step_cap"] == 30
    assert (
        _dart(client.get("/api/rl/presets/", {"start_checkpoint": "emb-1"}).json())["start_profile"]
        == "embedded"
    )
    assert client.get("/api/rl/presets/", {"start_checkpoint": "nope"}).status_code == 400

    body = {"name": "r", "preset": "grpo-dart", "pool": pool.pk}
    run = client.post("/api/rl/runs/", {**body, "start_checkpoint": "tiny-vlm"}, format="json").json()
    assert run["config"]["grpo"]["lr"] == 1e-6 and run["config"]["grpo"]["temperature"] == 1.0
    run = client.post("/api/rl/runs/", {**body, "start_checkpoint": "emb-1"}, format="json").json()
    assert run["config"]["grpo"]["lr"] == 5e-4 and run["config"]["curation"]["step_cap"] == 6
    # what the form sends over the defaults wins
    run = client.post(
        "/api/rl/runs/",
        {**body, "start_checkpoint": "emb-1", "config": {"grpo": {"lr": 1e-4}}},
        format="json",
    ).json()
    assert run["config"]["grpo"]["lr"] == 1e-4 and run["config"]["grpo"]["temperature"] == 0.5
    # external endpoints: the paper's values
    run = client.post(
        "/api/rl/runs/", {**body, "config": {"serving": {"endpoints": "http://vllm:8000/v1"}}}, format="json"
    ).json()
    assert run["config"]["grpo"]["lr"] == 1e-6
    # the checkpoint promoted to RL start decides both the form's and a new run's defaults
    checkpoint_promote(checkpoint=vlm, targets=["rl_start"])
    assert _dart(client.get("/api/rl/presets/").json())["start_profile"] == "hf_vlm"
    assert client.post("/api/rl/runs/", body, format="json").json()["config"]["grpo"]["lr"] == 1e-6
    assert Run.objects.count() == 5
