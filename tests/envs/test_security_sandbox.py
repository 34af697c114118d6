"""Attacks on environment sessions that must fail (docs/threat-model.md, "Environment sessions").

Each test reproduces a way out of a session that worked before the sandbox: openbox's desktop menu,
task set-up reading host files, a direct VNC connection, a fork bomb, a set-up process outliving
the session, a box outliving its process, a planted symlink. What a session reaches over the network
(the host's Redis and services, DNS, a browser page) is tests/envs/test_security_network.py. All run
on real Xvfb / openbox / x11vnc / bwrap.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.actions.types import Action, Point
from workers.envs import osworld
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.sandbox import Limits, Sandbox, SandboxPolicy, sandbox_available
from workers.envs.sandbox.uids import uid_pids
from workers.envs.terminal import TerminalConfig, TerminalEnv

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]
PROJECT = Path(__file__).resolve().parents[2]
EXAMPLE = next(t for t in osworld.load_examples() if t["id"] == "fw-os-002-write-file")


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[DesktopEnv]:
    env = DesktopEnv(DesktopConfig(display_range=(185, 199), session_dir=tmp_path / "home"))
    yield env
    env.close()


def _args_running(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def _session_processes(env: DesktopEnv) -> dict[int, int]:
    """pid → real uid of every host process whose environment names this desktop's DISPLAY."""
    found: dict[int, int] = {}
    wanted = f"DISPLAY={env.display}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "status").stat().st_uid
        except OSError:
            continue
    return found


def test_desktop_menu_offers_only_the_tasks_apps_and_they_stay_confined(desktop: DesktopEnv) -> None:
    desktop.reset(
        TaskSpec(task_id="m", instruction="", kind="desktop", source="test", setup={"apps": ["xterm"]})
    )
    menu = (desktop._wm_dir / "menu.xml").read_text()
    assert 'label="Terminal"' in menu and "browser" not in menu.lower() and "Terminal emulator" not in menu
    before = set(_session_processes(desktop))
    # The attack: right-click the empty desktop, take the first menu entry.
    desktop.step(Action("right_single", point=Point(1200, 760)))
    desktop.step(Action("hotkey", keys=("down",)))
    desktop.step(Action("hotkey", keys=("enter",)))
    deadline = time.monotonic() + 15
    while desktop._x.client_classes().count("XTerm") < 2 and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.1)
    assert desktop._x.client_classes().count("XTerm") == 2  # type: ignore[union-attr]
    started = {pid: uid for pid, uid in _session_processes(desktop).items() if pid not in before}
    assert started, "the menu entry started nothing"
    # Whatever the menu started runs as the session's own unprivileged uid, never as root.
    assert set(started.values()) == {desktop.sandbox.uid}


def test_empty_task_menu_starts_nothing(desktop: DesktopEnv) -> None:
    desktop.reset(TaskSpec(task_id="m", instruction="", kind="desktop", source="test", setup={"apps": []}))
    desktop.step(Action("right_single", point=Point(600, 400)))
    desktop.step(Action("hotkey", keys=("down",)))
    desktop.step(Action("hotkey", keys=("enter",)))
    time.sleep(1.0)
    assert desktop._x.client_classes() == []  # type: ignore[union-attr]


def test_task_setup_cannot_read_host_secrets_or_the_project(desktop: DesktopEnv) -> None:
    task = copy.deepcopy(EXAMPLE)
    task["config"] = [
        {
            "type": "execute",
            "parameters": {
                "command": f"cat /etc/shadow > ~/leak.txt 2>&1; ls {PROJECT} >> ~/leak.txt 2>&1; "
                f"cat {PROJECT}/pyproject.toml >> ~/leak.txt 2>&1; id -u > ~/uid.txt",
                "shell": True,
            },
        }
    ]
    desktop.reset(osworld.task_spec_from_json(task, kind="desktop"))
    leak = (desktop.session_dir / "leak.txt").read_text()
    assert "root:" not in leak and "[tool.ruff]" not in leak and "manage.py" not in leak
    assert "No such file or directory" in leak
    assert (desktop.session_dir / "uid.txt").read_text().strip() == "1000"
    # The evaluator's getter runs in the same box.
    evaluator = {
        "func": "check_include_exclude",
        "result": {"type": "vm_command_line", "command": "cat /etc/shadow; ls /work", "shell": True},
        "expected": {"type": "rule", "rules": {"include": ["root:"]}},
    }
    assert osworld.evaluate(evaluator, desktop) == 0.0


def test_download_step_reads_only_the_tasks_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "ok.txt").write_text("fine\n")
    (bundle / "escape").symlink_to("/etc/shadow")
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path / "home"))
    try:
        for url in ("file:///etc/shadow", f"file://{PROJECT}/pyproject.toml", "escape", "../bundle/../../x"):
            task = copy.deepcopy(EXAMPLE)
            task["config"] = [{"type": "download", "parameters": {"files": [{"url": url, "path": "got"}]}}]
            with pytest.raises(osworld.OSWorldError, match="bundle"):
                env.reset(osworld.task_spec_from_json(task, kind="terminal", bundle_dir=bundle))
            assert not (env.session_dir / "got").exists()
        task = copy.deepcopy(EXAMPLE)
        task["config"] = [
            {"type": "download", "parameters": {"files": [{"url": f"file://{bundle}/ok.txt", "path": "got"}]}}
        ]
        with pytest.raises(osworld.OSWorldError, match="no bundle"):
            env.reset(osworld.task_spec_from_json(task, kind="terminal"))  # a task without a bundle
        env.reset(osworld.task_spec_from_json(task, kind="terminal", bundle_dir=bundle))
        assert (env.session_dir / "got").read_text() == "fine\n"
    finally:
        env.close()


def test_vnc_is_not_reachable_without_the_proxy(desktop: DesktopEnv) -> None:
    desktop.boot()
    target = desktop.vnc_target
    assert target is not None and target.socket and not target.port
    vnc_pid = desktop._vnc.proc.pid  # type: ignore[union-attr]
    # x11vnc listens on no TCP port at all (before: 127.0.0.1:5900+ with security type None).
    inodes = {os.readlink(f"/proc/{vnc_pid}/fd/{fd}") for fd in os.listdir(f"/proc/{vnc_pid}/fd")}
    sockets = {link[8:-1] for link in inodes if link.startswith("socket:[")}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            assert not (fields[3] == "0A" and fields[9] in sockets), f"x11vnc listens on TCP: {line}"
    # Its socket is in a host directory only root can enter, and no session can see it.
    assert os.stat(Path(target.socket).parent).st_mode & 0o077 == 0
    assert not desktop.run_command(f"test -e {target.socket}").ok
    # Nothing inside the session reaches any VNC server of the host over TCP either.
    probe = "import socket\nfor p in range(5900, 5910):\n    try: socket.create_connection(('127.0.0.1', p), 0.2); print('open', p)\n    except OSError: pass"
    assert "open" not in desktop.run_command(["python3", "-c", probe]).output


def test_fork_bomb_is_contained_and_ends_with_the_session(tmp_path: Path) -> None:
    policy = SandboxPolicy(processes=64)
    env = TerminalEnv(
        TerminalConfig(session_dir=tmp_path / "home", policy=policy, limits=Limits(timeout_s=3))
    )
    env.reset(TaskSpec(task_id="f", instruction="", kind="terminal", source="test"))
    uid = env._box.uid
    try:
        result = env.run_command("bomb() { bomb | bomb & }; bomb; sleep 2")
        assert result.duration_s < 10  # bounded by the command's time limit, not by the host
        assert len(uid_pids(uid)) <= policy.processes
        # The host is untouched: it still starts processes, and the session is bounded, not dead.
        assert subprocess.run(["true"], check=False).returncode == 0
    finally:
        t0 = time.monotonic()
        env.close()
        assert time.monotonic() - t0 < 10
    assert uid_pids(uid) == []


def test_setup_process_is_gone_after_close(desktop: DesktopEnv) -> None:
    task = copy.deepcopy(EXAMPLE)
    task["config"] = [
        {"type": "launch", "parameters": {"command": ["sleep", "4321.5"]}},
        {
            "type": "execute",
            "parameters": {"command": "nohup setsid sleep 4322.5 >/dev/null 2>&1 &", "shell": True},
        },
    ]
    desktop.reset(osworld.task_spec_from_json(task, kind="desktop"))
    deadline = time.monotonic() + 5
    while len(_args_running("sleep 432")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_args_running("sleep 432")) == 2
    desktop.close()
    assert _args_running("sleep 432") == []


def test_box_survives_its_starting_thread_and_dies_with_its_process(tmp_path: Path) -> None:
    # Env hosts boot envs on pool threads: a box must outlive the thread that started it.
    box = Sandbox(tmp_path)
    thread = threading.Thread(target=box.start)
    thread.start()
    thread.join()
    time.sleep(0.2)
    assert box.alive() and box.run("true").ok
    box.close()
    # ...and must not outlive the process that owns it, however that process ends.
    code = (
        "import tempfile, time; from pathlib import Path; from workers.envs.sandbox import Sandbox; "
        "b = Sandbox(Path(tempfile.mkdtemp())); b.start(); b.spawn(['sleep', '300']); "
        "print(b.uid, flush=True); time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=PROJECT)
    assert proc.stdout is not None
    uid = int(proc.stdout.readline())
    assert uid_pids(uid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while uid_pids(uid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert uid_pids(uid) == []


def test_host_side_file_tools_never_follow_a_planted_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session swaps a directory of its home for a symlink to the host between the path check
    and the use; the host-side tools (running as root) must not follow it."""
    from workers.envs.terminal import api_actions
    from workers.envs.terminal.paths import PathOutsideSession

    home, host = tmp_path / "home", tmp_path / "host"
    home.mkdir()
    host.mkdir()
    (host / "secret").write_text("host secret")
    (home / "d").symlink_to(host)
    # The check passed before the swap: let it pass now, as in the race window.
    monkeypatch.setattr(api_actions, "confine", lambda root, path: root / path)
    with pytest.raises(PathOutsideSession):
        api_actions.read_file(home, "d/secret")
    with pytest.raises(PathOutsideSession):
        api_actions.write_file(home, "d/planted", "x")
    with pytest.raises(PathOutsideSession):
        api_actions.list_dir(home, "d")
    assert not (host / "planted").exists()


def test_a_crashed_env_host_leaves_no_desktop_behind() -> None:
    """Xvfb and x11vnc are host processes: they too die with the process that owns the desktop."""
    code = (
        "import time; from workers.envs.desktop import DesktopConfig, DesktopEnv; "
        "env = DesktopEnv(DesktopConfig(display_range=(185, 199), apps=())); env.boot(); "
        "print(env.display, env.sandbox.uid, flush=True); time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=PROJECT)
    assert proc.stdout is not None
    display, uid = proc.stdout.readline().decode().split()
    assert _args_running(f"Xvfb {display} ") and _args_running(f"x11vnc -display {display} ")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while (_args_running(f"Xvfb {display} ") or uid_pids(int(uid))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _args_running(f"Xvfb {display} ") == [] and _args_running(f"x11vnc -display {display} ") == []
    assert uid_pids(int(uid)) == []
    # Its box's cgroups (empty now), its home's tmpfs, and its display's lock and socket link are
    # cleaned up by the next session that starts, not left until the same uid or display comes round.
    left = [parent / f"flywheel-sandbox-{uid}" for parent in _cgroup_parents()]
    assert f"flywheel-home-{uid} " in Path("/proc/self/mountinfo").read_text()  # its home's tmpfs
    number = int(display.lstrip(":"))
    assert Path(f"/tmp/.X{number}-lock").exists()
    env = DesktopEnv(DesktopConfig(display_range=(number, number + 1), apps=(), vnc=False))
    try:
        env.boot()
        assert env.display == display  # the dead process's lock and link did not hold the number
        assert env.sandbox.uid == int(uid) or not any(path.exists() for path in left)
        assert (
            env.sandbox.uid == int(uid)
            or f"flywheel-home-{uid} " not in Path("/proc/self/mountinfo").read_text()
        )
    finally:
        env.close()
    assert not Path(f"/tmp/.X{number}-lock").exists() and not os.path.lexists(f"/tmp/.X11-unix/X{number}")


def _cgroup_parents() -> list[Path]:
    from workers.envs.sandbox import cgroups

    names = [""] if (cgroups.ROOT / "cgroup.controllers").exists() else ["pids", "memory", "cpu"]
    return [p for p in (cgroups._own(n) for n in names) if p is not None]


def test_x_server_runs_in_the_session_box_and_x11vnc_only_shares_its_ipc(desktop: DesktopEnv) -> None:
    """Xvfb parses everything the session's clients send: it runs in the box (its pid, mount and
    network namespaces, its cgroup); x11vnc, which the proxy talks to, stays on the host and joins
    only the box's IPC namespace (shared memory with Xvfb)."""
    desktop.boot()
    box_ns = {
        ns: os.readlink(f"/proc/{desktop.sandbox.init_pid}/ns/{ns}") for ns in ("pid", "mnt", "net", "ipc")
    }
    found = subprocess.run(["pgrep", "-x", "Xvfb"], capture_output=True, text=True).stdout.split()
    xvfb = [
        int(pid)
        for pid in found
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2] == [desktop.display.encode()]
    ]
    assert len(xvfb) == 1
    for ns, link in box_ns.items():
        assert os.readlink(f"/proc/{xvfb[0]}/ns/{ns}") == link, ns
    vnc = desktop._vnc.proc.pid  # type: ignore[union-attr]
    assert os.readlink(f"/proc/{vnc}/ns/ipc") == box_ns["ipc"]
    for ns in ("pid", "mnt", "net"):
        assert os.readlink(f"/proc/{vnc}/ns/{ns}") == os.readlink(f"/proc/self/ns/{ns}"), ns
    assert Path(f"/proc/{vnc}/status").stat().st_uid == desktop.sandbox.uid
    # The host's DISPLAY=:N reaches it through a link to the socket the box's Xvfb made.
    x_socket = Path(f"/tmp/.X11-unix/X{desktop.display.lstrip(':')}")
    assert x_socket.is_symlink() and x_socket.resolve().is_socket()
    assert desktop.observe().width == desktop.config.width
