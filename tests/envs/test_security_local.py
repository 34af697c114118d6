"""Attacks by another account on the same machine (docs/threat-model.md, "Other local accounts"),
issue 30: typing into a live desktop through its X server, pointing the root VNC proxy at a socket
of the attacker's choosing with a grant written straight into Redis; and a session filling the
host's disk from its home. Local-user probes run
as an unprivileged account the test creates (useradd) and runs with runuser; all on real Xvfb,
x11vnc, bwrap, Redis and the proxy process.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from workers.actions.types import Action, Point
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.sandbox import Limits, sandbox_available
from workers.envs.terminal import TerminalConfig, TerminalEnv
from workers.envs.vnc.server import VncTarget, default_socket_root
from workers.envs.vnc.tokens import TOKEN_PREFIX, grant_key, mint_token

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]
PROBE_USER = "flywheel_probe"
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def local_user() -> Iterator[str]:
    """An unprivileged account of this machine, in no group of ours."""
    try:
        pwd.getpwnam(PROBE_USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", PROBE_USER], check=True)
    yield PROBE_USER


def as_user(
    user: str, argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    variables = [f"{k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/bin:/bin", *variables, *argv],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )


@pytest.fixture(scope="module")
def desktop() -> Iterator[DesktopEnv]:
    env = DesktopEnv(DesktopConfig(display_range=(160, 170), apps=()))
    env.boot()
    yield env
    env.close()


def test_another_account_cannot_use_a_live_desktop(desktop: DesktopEnv, local_user: str) -> None:
    number = desktop.display.lstrip(":")
    # Before: the socket was world-accessible (0777 in a 1777 directory) and Xvfb ran without -auth:
    # xwininfo listed the windows and xdotool typed into the annotator's terminal.
    probe = as_user(local_user, ["xwininfo", "-root", "-tree"], {"DISPLAY": desktop.display})
    assert probe.returncode != 0 and "unable to open display" in probe.stderr, probe.stdout
    # The socket is in a directory only the session's uid can enter, whatever mode Xvfb gives it.
    reach = as_user(local_user, ["test", "-w", f"/tmp/.X11-unix/X{number}"])
    assert reach.returncode != 0
    assert as_user(local_user, ["cat", str(desktop._x.auth_file)]).returncode != 0  # type: ignore[union-attr]
    # Even whoever reaches the socket (root here) is refused without the session's cookie.
    no_cookie = subprocess.run(
        ["xwininfo", "-root"],
        env={"PATH": "/usr/bin:/bin", "DISPLAY": desktop.display, "XAUTHORITY": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert no_cookie.returncode != 0 and "Authorization required" in no_cookie.stderr
    # With it, the platform's own clients work: the host's (this process) and the box's.
    own = subprocess.run(["xwininfo", "-root", "-display", desktop.display], capture_output=True, timeout=30)
    assert own.returncode == 0, own.stderr
    assert desktop.run_command("xwininfo -root", shell=True).ok
    # No abstract socket either (any process of the box's network namespace could reach it).
    box_sockets = Path(f"/proc/{desktop.sandbox.init_pid}/net/unix").read_text()
    assert f"@/tmp/.X11-unix/X{number}" not in box_sockets
    assert f"/tmp/.X11-unix/X{number}" in box_sockets


# The proxy ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def key_file() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="flywheel-grant-key-"))
    yield directory / "key"
    subprocess.run(["rm", "-rf", str(directory)], check=True)


@pytest.fixture(scope="module")
def proxy(key_file: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "workers.envs.vnc.proxy", "--listen", f"127.0.0.1:{port}"]
    argv += ["--redis-url", REDIS_URL, "--grant-key-file", str(key_file)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None and "listening" in proc.stdout.readline().decode()
    yield f"ws://127.0.0.1:{port}/websockify"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def _handshake(url: str) -> bytes:
    with connect(url, close_timeout=3) as ws:
        message = ws.recv(timeout=10)
        assert isinstance(message, bytes)
        return message


def test_proxy_follows_only_grants_it_signed(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis, key_file: Path
) -> None:
    target = desktop.vnc_target
    assert target is not None and target.socket
    # The attack: a grant written straight into Redis, for a desktop the writer may not drive.
    forged = {"host": "", "port": 0, "socket": target.socket, "session_id": "x", "user_id": "1"}
    forged |= {"read_only": False, "expires_at": time.time() + 600}
    redis_client.set(TOKEN_PREFIX + "forgedforgedforged01", json.dumps(forged), ex=60)
    with pytest.raises(InvalidStatus) as refused:
        _handshake(f"{proxy}?token=forgedforgedforged01")
    assert refused.value.response.status_code == 403
    # Signed with some other key: refused too.
    token = mint_token(redis_client, "x", 1, target, read_only=False, ttl_s=60, key=os.urandom(32))
    with pytest.raises(InvalidStatus):
        _handshake(f"{proxy}?token={token}")
    # A grant signed with the proxy's own key gets through to the desktop.
    token = mint_token(redis_client, "x", 1, target, read_only=False, ttl_s=60, key=grant_key(key_file))
    assert _handshake(f"{proxy}?token={token}") == b"RFB 003.008\n"


def test_proxy_refuses_signed_grants_outside_the_socket_root(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis, key_file: Path, tmp_path: Path
) -> None:
    key = grant_key(key_file)
    elsewhere = tmp_path / "vnc.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(elsewhere))
        listener.listen()
        link_dir = default_socket_root() / f"probe-{os.getpid()}"
        link_dir.mkdir(mode=0o700)
        try:
            (link_dir / "vnc.sock").symlink_to(elsewhere)  # under the root, but resolving out of it
            for path in (
                str(elsewhere),
                str(link_dir / "vnc.sock"),
                f"{default_socket_root()}/../..{elsewhere}",
            ):
                token = mint_token(
                    redis_client, "x", 1, VncTarget(socket=path), read_only=True, ttl_s=60, key=key
                )
                with pytest.raises(InvalidStatus) as refused:
                    _handshake(f"{proxy}?token={token}")
                assert refused.value.response.status_code == 403, path
            token = mint_token(
                redis_client, "x", 1, VncTarget("127.0.0.1", 5900), read_only=True, ttl_s=60, key=key
            )
            with pytest.raises(InvalidStatus):
                _handshake(f"{proxy}?token={token}")
        finally:
            (link_dir / "vnc.sock").unlink(missing_ok=True)
            link_dir.rmdir()


# The session's disk ------------------------------------------------------------------------------

FILL = "dd if=/dev/zero of=big bs=1M count=64; echo rc=$?; sync"


def test_a_terminal_session_cannot_fill_the_hosts_disk(tmp_path: Path) -> None:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path / "home", limits=Limits(timeout_s=60)))
    try:
        # The task's pool caps its sessions' homes at 32 MiB (setup.disk_mb, from TaskPool.disk_mb).
        env.reset(
            TaskSpec(task_id="fill", instruction="", kind="terminal", source="test", setup={"disk_mb": 32})
        )
        result = env.step(Action("type", text=FILL + "\n"))
        output = result.observation.terminal_output or ""
        # Before: dd wrote all 64 MiB (2 GiB in the report) to the host's file system.
        assert "No space left on device" in output and "rc=1" in output, output[-500:]
        big = env.session_dir / "big"
        assert big.stat().st_size <= 32 << 20
        # It lies on the session's own 32 MiB file system, not on the host's disk.
        assert big.stat().st_dev != tmp_path.stat().st_dev
        home = os.statvfs(env.session_dir)
        assert home.f_blocks * home.f_frsize == 32 << 20
        assert "home is full (32 MiB" in result.info["disk_full"]
        env.step(Action("type", text="rm big\n"))
        assert "disk_full" not in env.step(Action("type", text="true\n")).info
    finally:
        env.close()
    assert not (tmp_path / "home" / "big").exists()  # nothing of it is left on the host


def test_a_desktop_session_cannot_fill_the_hosts_disk(tmp_path: Path) -> None:
    env = DesktopEnv(
        DesktopConfig(display_range=(170, 180), apps=(), vnc=False, session_dir=tmp_path / "home")
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "given.txt").write_text("kept")  # what the directory held is in the home
    try:
        env.reset(TaskSpec(task_id="d", instruction="", kind="desktop", source="test", setup={"apps": []}))
        home = os.statvfs(env.session_dir)
        assert home.f_blocks * home.f_frsize == 1 << 30  # the default cap: 1 GiB
        assert env.run_command("cat given.txt").output == "kept"
        env.reset(TaskSpec(task_id="d", instruction="", kind="desktop", source="test", setup={"disk_mb": 32}))
        result = env.run_command(FILL, timeout_s=60)
        assert "No space left on device" in result.output and "rc=1" in result.output, result.output
        assert (env.session_dir / "big").stat().st_size <= 32 << 20
        step = env.step(Action("hover", point=Point(5, 5)))
        assert "home is full (32 MiB" in step.info["disk_full"]
    finally:
        env.close()
    assert not (tmp_path / "home" / "big").exists()
