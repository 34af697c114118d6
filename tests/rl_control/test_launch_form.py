"""What the launch form needs from the server: the run config's JSON schema (a label in words and a
line of help for every field, the choices of every fixed-set field, the basic section, the group size
asked once); every bad field named in a 400 (nothing created, hostile input included); a fork keeps
its preset."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rl_control.models import Run
from workers.rl.run_config import run_config_build


def schema_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"section.field" (or a top-level key): its JSON schema}, as the form reads them."""
    out: dict[str, dict[str, Any]] = {}
    for name, prop in schema["properties"].items():
        if "$ref" not in prop:
            out[name] = prop
            continue
        section = schema["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
        out.update({f"{name}.{field}": spec for field, spec in section["properties"].items()})
    return out


def choices_of(spec: dict[str, Any]) -> list[Any] | None:
    """The values a fixed-set field takes (None among them when it may be null), else None."""
    arms = spec.get("anyOf", [spec])
    values = [v for arm in arms for v in arm.get("enum", [])]
    return values + [None for arm in arms if arm.get("type") == "null"] if values else None


@pytest.fixture
def schema(api) -> dict[str, Any]:
    response = api("researcher").get("/api/rl/config-schema/")
    assert response.status_code == 200
    return response.json()


def test_every_field_has_a_label_in_words_and_one_line_of_help(schema) -> None:
    for algorithm, fields in ((a, schema_fields(s)) for a, s in schema.items()):
        assert set(run_config_build(algorithm=algorithm, config={})) == {k.split(".")[0] for k in fields}
        for key, spec in fields.items():
            label, text = spec.get("title"), spec.get("description")
            last = key.split(".")[-1]
            assert label and "_" not in label and label != last and label[0].isupper(), f"{key}: {label!r}"
            assert text and "\n" not in text, f"{key} has no help"
    grpo = schema_fields(schema["grpo"])
    assert grpo["grpo.beta_kl"]["title"] == "KL penalty weight" and "ppo.gamma" not in grpo
    assert grpo["grpo.is_cap"]["description"].startswith("C in the truncated IS weight")
    assert grpo["alerts.entropy_min"]["title"] == "Entropy collapse below"
    assert schema["grpo"]["$defs"]["GRPOConfig"]["title"] == "Step-wise GRPO"  # the Advanced section's title


def test_fixed_set_fields_list_their_choices_and_each_choice_validates(schema) -> None:
    for algorithm in ("ppo", "grpo"):
        defaults = run_config_build(algorithm=algorithm, config={})
        choices = {k: c for k, spec in schema_fields(schema[algorithm]).items() if (c := choices_of(spec))}
        for key, values in choices.items():
            section, name = key.split(".")
            assert defaults[section][name] in values
            for value in values:
                assert (
                    run_config_build(algorithm=algorithm, config={section: {name: value}})[section][name]
                    == value
                )
    choices = {k: choices_of(spec) for k, spec in schema_fields(schema["grpo"]).items()}
    assert choices["grpo.lr_schedule"] == ["constant", "linear", "cosine"]
    assert choices["curation.injection"] == ["none", "experience_pool", "bepa_cache", "replay"]
    assert choices["grpo.lr"] is None and choices["env.shared_group_seed"] is None


def test_the_basic_section_and_the_group_size_asked_once(api, schema) -> None:
    grpo, ppo = schema["grpo"], schema["ppo"]
    assert grpo["x-basic"][:2] == ["env.parallel_envs", "curation.rollouts_max"]
    assert {"budget.max_updates", "entropulse.enabled", "judge.url"} <= set(grpo["x-basic"])
    assert set(grpo["x-basic"]) <= set(schema_fields(grpo)) and set(ppo["x-basic"]) <= set(schema_fields(ppo))
    assert grpo["x-mirrored"] == {"grpo.rollouts_per_task": "curation.rollouts_max"}
    assert "x-mirrored" not in ppo and "curation.rollouts_max" not in ppo["x-basic"]  # PPO has no group
    # The two group-size fields of every GRPO preset agree, so asking once loses nothing.
    presets = api("researcher").get("/api/rl/presets/").json()
    for p in presets:
        assert set(p) == {
            "name",
            "title",
            "description",
            "algorithm",
            "mode",
            "start_profile",
            "config",
            "notes",
        }
        if p["algorithm"] == "grpo":
            assert p["config"]["grpo"]["rollouts_per_task"] == p["config"]["curation"]["rollouts_max"], p[
                "name"
            ]


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


@pytest.mark.parametrize(
    "config",
    [
        {"grpo": {"lr": 10**400}},  # an integer no float holds
        {"grpo": {"lr": "NaN"}, "budget": {"max_minutes": "1e999"}},  # infinity once parsed (see below)
        {"curation": {"step_cap": 2**64}, "seed": 2**80, "task_ids": [2**70]},
        {"env": [], "judge": None, "alerts": "high", "vlm": 3},
        {"grpo": {"temperature": {"nested": [{"junk": [1, 2, {"x": None}]}]}}},
        {"grpo": {"__class__": {}, "lr": True}, "": {}, "task_ids": "1,2"},
        {"env": {"kind": {"$gt": ""}}, "serving": {"endpoints": ["http://a/v1"]}},
    ],
)
def test_hostile_config_is_a_400_naming_the_field(api, pool, config) -> None:
    body = {"name": "x", "preset": "grpo-dart", "pool": pool.pk, "config": config}
    raw = json.dumps(body).replace('"1e999"', "1e999")  # a JSON number that parses to infinity
    response = api("researcher").post("/api/rl/runs/", raw, content_type="application/json")
    assert response.status_code == 400, response.content
    errors = response.json()
    for key in config:
        assert any(k == key or k.startswith(f"{key}.") for k in errors), (key, errors)
    assert all(isinstance(m, str) for messages in errors.values() for m in messages)
    assert Run.objects.count() == 0


def test_hostile_config_in_a_fork_is_a_400(api, make_run) -> None:
    run = make_run()
    body = {"name": "child", "config": {"grpo": {"epochs": 10**30, "bogus": 1}, "env": {"priority": "1"}}}
    response = api("researcher").post(f"/api/rl/runs/{run.pk}/fork/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"grpo.epochs", "grpo.bogus", "env.priority"}
