"""TerminalEnv: real sandboxed shells (the session's bwrap box), limits, API actions."""

from __future__ import annotations

import io
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from workers.actions.types import Action
from workers.envs.base import Environment, TaskSpec
from workers.envs.sandbox import Limits, Sandbox, SandboxError, sandbox_available
from workers.envs.terminal import TerminalConfig, TerminalEnv
from workers.envs.terminal.api_actions import ApiRegistry, register_api_action
from workers.envs.terminal.paths import PathOutsideSession, confine

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root")
TASK = TaskSpec(task_id="t", instruction="work in the shell", kind="terminal", source="test")


@pytest.fixture
def term(tmp_path: Path) -> Iterator[TerminalEnv]:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path / "s", limits=Limits(timeout_s=3, max_output=4000)))
    env.reset(TASK)
    yield env
    env.close()


def _run(env: TerminalEnv, command: str) -> dict:
    result = env.step(Action("type", text=command + "\n"))
    assert "error" not in result.info, result.info
    return result.info["commands"][-1]


def test_commands_run_in_session_dir_and_keep_cwd(term: TerminalEnv) -> None:
    assert isinstance(term, Environment)
    assert _run(term, "mkdir -p work && cd work && echo hi > f.txt")["returncode"] == 0
    assert (term.session_dir / "work" / "f.txt").read_text() == "hi\n"
    _run(term, "pwd > where.txt")
    assert (term.session_dir / "work" / "where.txt").read_text() == "/home/session/work\n"
    obs = term.observe()
    assert obs.terminal_output is not None and "session:~/work$ pwd > where.txt" in obs.terminal_output
    assert Image.open(io.BytesIO(obs.screenshot)).size == (1280, 800)


def test_typing_without_newline_waits_for_enter(term: TerminalEnv) -> None:
    term.step(Action("type", text="echo later > l.txt"))
    assert not (term.session_dir / "l.txt").exists()
    assert term.observe().terminal_output.endswith("echo later > l.txt")  # type: ignore[union-attr]
    term.step(Action("hotkey", keys=("enter",)))
    assert (term.session_dir / "l.txt").read_text() == "later\n"
    term.step(Action("type", text="echo never > n.txt"))
    term.step(Action("hotkey", keys=("ctrl", "c")))
    term.step(Action("hotkey", keys=("enter",)))
    assert not (term.session_dir / "n.txt").exists()


def test_host_files_are_invisible(term: TerminalEnv) -> None:
    assert _run(term, "cat /etc/shadow")["returncode"] != 0
    assert _run(term, "cat ../../../../etc/shadow")["returncode"] != 0
    _run(term, "ls / > root.txt; cat /etc/passwd > passwd.txt")
    assert set((term.session_dir / "root.txt").read_text().split()) <= {
        "bin",
        "dev",
        "etc",
        "home",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "run",
        "sbin",
        "tmp",
        "usr",
        "var",  # only var/cache/fontconfig
    }
    assert (term.session_dir / "passwd.txt").read_text().startswith("user:x:1000:1000:user:/home/session")
    assert Path("/work/main").name not in (term.session_dir / "root.txt").read_text()


def test_symlinks_pointing_out_resolve_inside(term: TerminalEnv) -> None:
    host_secret = term.session_dir.parent / "secret.txt"
    host_secret.write_text("host secret")
    _run(term, f"ln -s {host_secret} link; ln -s /etc/shadow shadow; cat link shadow > out.txt 2>&1")
    assert "host secret" not in (term.session_dir / "out.txt").read_text()
    # Host-side tools must not follow the planted links either.
    with pytest.raises(PathOutsideSession):
        confine(term.session_dir, "link")
    result = term.step(Action("api_call", name="read_file", arguments={"path": "shadow"}))
    assert "outside the session" in result.info["error"]


def test_no_privileges_no_network_no_host_processes(term: TerminalEnv) -> None:
    _run(term, "grep CapEff /proc/self/status > caps.txt; ps -e -o pid= | wc -l > procs.txt")
    assert (term.session_dir / "caps.txt").read_text().split()[1] == "0000000000000000"
    assert int((term.session_dir / "procs.txt").read_text()) < 6  # only the sandbox's own
    assert _run(term, "mount -t tmpfs x /tmp")["returncode"] != 0
    assert _run(term, "chroot / true")["returncode"] != 0
    assert _run(term, "touch /usr/evil")["returncode"] != 0
    assert _run(term, "echo b > /proc/sysrq-trigger")["returncode"] != 0
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        cmd = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=1)'"
        assert _run(term, cmd)["returncode"] != 0


def test_time_and_output_limits(term: TerminalEnv) -> None:
    slow = _run(term, "sleep 31.25")
    assert slow["timed_out"] and slow["duration_s"] < 10
    loud = _run(term, "yes")
    assert loud["truncated"]
    assert "[output truncated" in term.observe().terminal_output  # type: ignore[operator]
    # Nothing the sandbox started outlives it.
    assert "sleep 31.25" not in os.popen("ps -eo args").read()


def test_sandbox_refuses_a_missing_session_dir(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist"):
        Sandbox(tmp_path / "missing").start()


def test_api_actions_are_confined(term: TerminalEnv) -> None:
    wrote = term.step(
        Action("api_call", name="write_file", arguments={"path": "notes.md", "content": "# hi"})
    )
    assert wrote.info["api"]["result"]["bytes"] == 4
    listed = term.step(Action("api_call", name="list_dir", arguments={}))
    assert "notes.md" in listed.info["api"]["result"]["entries"]
    read = term.step(Action("api_call", name="read_file", arguments={"path": "/home/session/notes.md"}))
    assert read.info["api"]["result"]["content"] == "# hi"
    for bad in ("../x", "/etc/passwd", "~/../../etc/passwd"):
        result = term.step(Action("api_call", name="write_file", arguments={"path": bad, "content": "x"}))
        assert "outside the session" in result.info["error"]
    assert "unknown API action" in term.step(Action("api_call", name="rm_rf", arguments={})).info["error"]
    assert "missing" in term.step(Action("api_call", name="read_file", arguments={})).info["error"]


def test_register_api_action_on_own_registry(tmp_path: Path) -> None:
    registry = ApiRegistry()
    register_api_action("count_files", lambda d, pattern: len(list(d.glob(pattern))), ("pattern",), registry)
    (tmp_path / "a.txt").write_text("")
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path), api=registry)
    result = env.step(Action("api_call", name="count_files", arguments={"pattern": "*.txt"}))
    assert result.info["api"]["result"] == 1
    with pytest.raises(ValueError):
        register_api_action("count_files", len, ("x",), registry)
    env.close()


def test_unsupported_actions_and_ending(term: TerminalEnv) -> None:
    assert "not supported" in term.step(Action("click")).info["error"]
    assert "no meaning" in term.step(Action("hotkey", keys=("ctrl", "shift", "t"))).info["error"]
    answer = term.step(Action("answer", text="42"))
    assert answer.done and answer.info["answer"] == "42"


def test_reset_of_a_used_owned_session_starts_clean() -> None:
    env = TerminalEnv()
    try:
        env.reset(TASK)
        env.step(Action("type", text="echo x > left.txt\n"))
        assert (env.session_dir / "left.txt").exists()
        env.reset(TASK)
        assert not (env.session_dir / "left.txt").exists()
        assert env.observe().terminal_output == "session:~$ "
    finally:
        env.close()
    assert not env.session_dir.exists()
