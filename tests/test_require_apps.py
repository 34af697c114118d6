"""The CI switch that turns a skip for a missing OSWorld application into a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = """
import pytest

@pytest.mark.skipif(True, reason="make osworld-apps DOMAINS=libreoffice")
def test_needs_an_app():
    pass

@pytest.mark.skipif(True, reason="make osworld-apps DOMAINS=gimp")
def test_needs_gimp():
    pass

@pytest.mark.skipif(True, reason="make osworld-apps installs pyautogui")
def test_needs_the_os_set():
    pass
"""


def _run(tmp_path: Path, required: str | None) -> str:
    """pytest on SAMPLE with the plugin, FLYWHEEL_REQUIRE_OSWORLD_APPS=`required` (unset: None)."""
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "FLYWHEEL_REQUIRE_OSWORLD_APPS"}
    if required is not None:
        env["FLYWHEEL_REQUIRE_OSWORLD_APPS"] = required
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", os.devnull, "-p", "tests.plugins.require_apps", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    return result.stdout


def test_a_skip_for_a_missing_app_fails_when_ci_requires_the_apps(tmp_path: Path) -> None:
    out = _run(tmp_path, "libreoffice chrome os")
    assert "1 skipped, 2 errors" in out, out  # a skip at set-up reports as an error: CI fails
    assert "FLYWHEEL_REQUIRE_OSWORLD_APPS names 'libreoffice', yet the test skipped" in out
    assert "FLYWHEEL_REQUIRE_OSWORLD_APPS names 'os', yet the test skipped" in out


def test_without_the_switch_it_is_a_skip(tmp_path: Path) -> None:
    assert "3 skipped" in _run(tmp_path, None)
