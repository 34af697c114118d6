"""What the launch form needs from the server: a label in words for every field, the basic section,
the group size asked once; every bad field named in a 400 (nothing created); a fork keeps its preset."""

from __future__ import annotations

from dataclasses import fields

import pytest

from rl_control.models import Run
from rl_control.presets import BASIC_FIELDS, FIELD_LABELS, MIRRORED_FIELDS, field_help, preset_get
from rl_control.run_config import SECTIONS


def test_every_field_has_a_label_in_words() -> None:
    keys = ["seed", "task_ids"] + [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)]  # type: ignore[arg-type]
    for key in keys:
        label = FIELD_LABELS.get(key)
        assert label, f"{key} has no label"
        last = key.split(".")[-1]
        assert "_" not in label and label != last and label[0].isupper(), f"{key}: {label!r} is not in words"
    assert set(field_help()) <= set(FIELD_LABELS)


def test_presets_carry_labels_basic_section_and_the_group_size_once(api) -> None:
    presets = {p["name"]: p for p in api("researcher").get("/api/rl/presets/").json()}
    dart, ppo = presets["grpo-dart"], presets["ppo-uitars2"]
    assert dart["labels"]["grpo.beta_kl"] == "KL penalty weight" and "ppo.gamma" not in dart["labels"]
    assert dart["basic"][:2] == ["env.parallel_envs", "curation.rollouts_max"]
    assert {"budget.max_updates", "entropulse.enabled", "judge.url"} <= set(dart["basic"])
    assert all(k in BASIC_FIELDS for k in dart["basic"])
    assert dart["mirrored"] == {"grpo.rollouts_per_task": "curation.rollouts_max"} == MIRRORED_FIELDS
    assert ppo["mirrored"] == {}  # PPO has no group
    # The two group-size fields of every GRPO preset agree, so asking once loses nothing.
    for p in presets.values():
        if p["algorithm"] == "grpo":
            assert p["config"]["grpo"]["rollouts_per_task"] == p["config"]["curation"]["rollouts_max"], p[
                "name"
            ]
    assert preset_get("bepa")["labels"]["alerts.entropy_min"] == "Entropy collapse below"


def test_bad_fields_come_back_named_and_nothing_is_created(api, pool) -> None:
    body = {
        "name": "x", "preset": "grpo-dart", "pool": pool.pk,
        "config": {
            "env": {"parallel_envs": 0},
            "curation": {"rollouts_max": 1},
            "judge": {"url": "file:///etc/passwd", "max_screenshots": 99},
            "entropulse": {"enabled": "yes", "sft_steps": -3},
            "alerts": {"entropy_min": -1},
            "bogus": {},
        },
    }  # fmt: skip
    response = api("researcher").post("/api/rl/runs/", body, format="json")
    assert response.status_code == 400
    errors = response.json()
    for key in ("env.parallel_envs", "judge.url", "judge.max_screenshots", "entropulse.enabled",
                "alerts.entropy_min", "bogus"):  # fmt: skip
        assert key in errors and all(isinstance(m, str) for m in errors[key]), key
    assert "curation.rollouts_min" in errors or "curation.rollouts_max" in errors
    assert Run.objects.count() == 0


def test_judge_and_entropulse_settings_are_kept(api, pool) -> None:
    body = {"name": "judged", "preset": "grpo-dart", "pool": pool.pk,
            "config": {"judge": {"url": "http://127.0.0.1:9/v1", "use": "always"}, "entropulse": {"enabled": True}}}  # fmt: skip
    created = api("researcher").post("/api/rl/runs/", body, format="json")
    assert created.status_code == 201, created.content
    config = created.json()["config"]
    assert config["judge"]["url"] == "http://127.0.0.1:9/v1" and config["judge"]["use"] == "always"
    assert config["entropulse"]["enabled"] is True and config["entropulse"]["sft_steps"] == 50


@pytest.mark.parametrize("preset", ["grpo-dart", "ppo-uitars2"])
def test_a_fork_keeps_its_preset_name(api, make_run, preset) -> None:
    run = make_run(preset=preset)
    response = api("researcher").post(f"/api/rl/runs/{run.pk}/fork/", {"name": "child"}, format="json")
    assert response.status_code == 201, response.content
    child = response.json()
    assert child["preset"] == preset and child["parent"] == run.pk and child["config"] == run.config
