"""The starter model's registration (webapp.store.checkpoints.checkpoint_install_starter) and its
cache key; the training itself runs in `make up` (tests/test_smoke_stack.py, tests/e2e)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webapp.store.checkpoints import checkpoint_dir, checkpoint_install_starter, checkpoint_success_note
from webapp.store.models import Checkpoint
from workers.policy.starter import STARTER_RECIPE, recipe_hash

pytestmark = pytest.mark.django_db


def _trained(tmp_path: Path) -> Path:
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    source = tmp_path / "cache" / f"starter-{recipe_hash()}"
    new_model(FlywheelPolicyConfig(flywheel_version="trained-elsewhere"), seed=0).save_pretrained(source)
    FlywheelTokenizer().save_pretrained(source)
    return source


def test_the_starter_is_copied_into_media_with_its_measured_success(tmp_path: Path) -> None:
    source = _trained(tmp_path)
    figures = {"recipe": STARTER_RECIPE, "examples": 31, "success_mean": 0.375, "eval_episodes": 40,
               "success_per_task": {"click-test": 1.0, "enter-text": 0.0}}  # fmt: skip
    checkpoint = checkpoint_install_starter(source=source, figures=figures, pool="demo-miniwob")
    assert checkpoint.version == source.name and not Path(checkpoint.path).is_absolute()
    assert (checkpoint_dir(checkpoint) / "model.safetensors").is_file()  # a copy, not the cache
    config = json.loads((checkpoint_dir(checkpoint) / "config.json").read_text())
    assert config["flywheel_version"] == checkpoint.version  # what the policy server reports
    assert checkpoint.metrics["success"] == 0.375 and checkpoint.metrics["success_pool"] == "demo-miniwob"
    assert checkpoint_success_note(checkpoint) == "38 % success on demo-miniwob (40 episodes)"
    assert "scripted-expert" in checkpoint.notes and "demo-miniwob" in checkpoint.notes
    # idempotent: a second install registers nothing new
    assert checkpoint_install_starter(source=source, figures=figures, pool="demo-miniwob") == checkpoint
    assert Checkpoint.objects.filter(version=source.name).count() == 1
    assert checkpoint_success_note(None) == "" and checkpoint_success_note(Checkpoint(version="x")) == ""


def test_the_cache_key_follows_the_recipe() -> None:
    assert recipe_hash() == recipe_hash(dict(STARTER_RECIPE))
    assert recipe_hash({**STARTER_RECIPE, "sft_steps": STARTER_RECIPE["sft_steps"] + 1}) != recipe_hash()
