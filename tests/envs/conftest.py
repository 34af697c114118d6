"""Session directories under pytest's tmp_path must be reachable by the sandbox's own uid, as the
default ones (made in /tmp) are: let others traverse (not list) tmp_path and its parents."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _traversable_tmp_path(request: pytest.FixtureRequest) -> None:
    if "tmp_path" not in request.fixturenames:
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    for path in (tmp_path, *tmp_path.parents):
        if path in (Path("/tmp"), Path("/")):
            break
        mode = stat.S_IMODE(path.stat().st_mode)
        os.chmod(path, mode | stat.S_IXOTH | stat.S_IXGRP)
