"""Session directories must be reachable by a sandbox's own uid (bwrap resolves its bind sources as
that uid), as the default ones, made in /tmp, are. pytest's tmp_path lies under
/tmp/pytest-of-root, which pytest keeps at mode 0700 (and resets when another run starts), so the
env tests get their tmp_path from /tmp directly."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="flywheel-envtest-"))
    path.chmod(0o711)  # others may traverse, not list
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def run_together() -> Callable[[list[Callable[[], object]]], list[BaseException]]:
    """Start every call in a thread of its own at once, wait for all, and return what they raised."""

    def run(calls: list[Callable[[], object]]) -> list[BaseException]:
        errors: list[BaseException] = []

        def one(call: Callable[[], object]) -> None:
            try:
                call()
            except BaseException as exc:  # collected for the caller's assertion
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(call,)) for call in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    return run
