"""Session directories must be reachable by a sandbox's own uid (bwrap resolves its bind sources as
that uid), as the default ones, made in /tmp, are. pytest's tmp_path lies under
/tmp/pytest-of-root, which pytest keeps at mode 0700 (and resets when another run starts), so the
env tests get their tmp_path from /tmp directly."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="flywheel-envtest-"))
    path.chmod(0o711)  # others may traverse, not list
    yield path
    shutil.rmtree(path, ignore_errors=True)
