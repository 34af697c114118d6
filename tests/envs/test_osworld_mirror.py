"""`manage.py osworld_mirror`: the files OSWorld's task files download, fetched into the mirror
(`<host>/<path>`), after which the task is supported from it; against a real HTTP server on the
loopback (sessions themselves never fetch anything)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from workers.envs import osworld
from workers.envs.osworld.files import assuming_mirrored
from workers.envs.osworld.mirror import examples_urls, task_urls


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "web"
    (root / "files").mkdir(parents=True)
    (root / "files" / "sheet.csv").write_text("a,b\n1,2\n")
    (root / "files" / "gold.csv").write_text("a,b\n1,3\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _task(base: str, extra: str = "") -> dict:
    return {
        "id": "mirror-1",
        "instruction": "x",
        "config": [
            {
                "type": "download",
                "parameters": {
                    "files": [{"url": f"{base}/files/sheet.csv", "path": "/home/user/s.csv"}]
                    + ([{"url": extra, "path": "/home/user/x"}] if extra else [])
                },
            }
        ],
        "evaluator": {
            "func": "exact_match",
            "result": {"type": "vm_file", "path": "/home/user/s.csv", "dest": "s.csv"},
            "expected": {"type": "cloud_file", "path": f"{base}/files/gold.csv", "dest": "gold.csv"},
        },
    }


def test_mirror_fills_and_the_task_becomes_supported(tmp_path: Path, web: str, monkeypatch) -> None:
    examples = tmp_path / "examples" / "os"
    examples.mkdir(parents=True)
    task = _task(web)
    (examples / "mirror-1.json").write_text(json.dumps(task))
    assert task_urls(task) == [f"{web}/files/sheet.csv", f"{web}/files/gold.csv"]
    assert examples_urls(tmp_path / "examples") == task_urls(task)
    # Without the files: unsupported, needs the network; with a filled mirror assumed: supported.
    assert any("needs the network" in p for p in osworld.check_supported(task, "desktop"))
    with assuming_mirrored():
        assert osworld.check_supported(task, "desktop") == []

    mirror = tmp_path / "mirror"
    call_command("osworld_mirror", examples=str(tmp_path / "examples"), dest=str(mirror))
    assert (mirror / "127.0.0.1" / "files" / "gold.csv").read_text() == "a,b\n1,3\n"
    monkeypatch.setenv("OSWORLD_MIRROR_DIR", str(mirror))
    assert osworld.check_supported(task, "desktop") == []
    # A second run keeps what is there.
    call_command("osworld_mirror", examples=str(tmp_path / "examples"), dest=str(mirror))


def test_mirror_reports_failures_and_leaves_no_partial_file(tmp_path: Path, web: str) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "t.json").write_text(json.dumps(_task(web, extra=f"{web}/files/missing.bin")))
    mirror = tmp_path / "mirror"
    with pytest.raises(CommandError, match="1 file"):
        call_command("osworld_mirror", examples=str(examples), dest=str(mirror))
    assert (mirror / "127.0.0.1" / "files" / "sheet.csv").is_file()  # the others were fetched
    assert sorted(p.name for p in (mirror / "127.0.0.1" / "files").iterdir()) == ["gold.csv", "sheet.csv"]


def test_live_web_pages_are_not_files_to_mirror() -> None:
    task = {
        "id": "t",
        "instruction": "x",
        "config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://live.example/"]}}],
        "evaluator": {"func": "infeasible"},
    }
    assert task_urls(task) == []
    with assuming_mirrored():
        assert any("live site" in p for p in osworld.check_supported(task, "desktop"))
