"""Attacks on environment sessions that must fail (docs/threat-model.md, "Environment sessions").

Each test reproduces a way out of a session that worked before the sandbox: openbox's desktop menu,
task set-up reading host files, a direct VNC connection, a fork bomb, a set-up process outliving
the session, the host's Redis from inside. All run on real Xvfb / openbox / x11vnc / bwrap.
"""

from __future__ import annotations

import copy
import os
import socket
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


def test_host_redis_is_unreachable_from_a_session(desktop: DesktopEnv) -> None:
    with socket.create_connection(("127.0.0.1", 6379), timeout=2):
        pass  # the host's Redis is up
    desktop.reset(TaskSpec(task_id="n", instruction="", kind="desktop", source="test", setup={"apps": []}))
    probe = "import socket; socket.create_connection(('127.0.0.1', 6379), timeout=1)"
    result = desktop.run_command(["python3", "-c", probe], separate_stderr=True)
    assert result.returncode != 0 and "ConnectionRefusedError" in result.stderr


@pytest.fixture
def outside() -> Iterator[str]:
    """An HTTP server standing in for the internet: in a network namespace of its own, behind a veth
    pair on 198.18.0.0/15 (the benchmarking range, no private range), reached by routing like any
    outside host. Yields its address as host:port."""
    tag = f"fwe{os.getpid() % 100000}"
    ns, host_if, ns_if = f"{tag}-out", f"{tag}h", f"{tag}n"
    net = f"198.18.{os.getpid() % 250}"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", ns)
        ip("addr", "add", f"{net}.1/30", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("-n", ns, "addr", "add", f"{net}.2/30", "dev", ns_if)
        ip("-n", ns, "link", "set", ns_if, "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", "--bind", f"{net}.2", "8080"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((f"{net}.2", 8080), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"{net}.2:8080"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _host_addresses() -> list[str]:
    """This host's own IPv4 addresses, loopback included."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines()]


def test_network_task_reaches_outside_but_no_service_of_the_host(desktop: DesktopEnv, outside: str) -> None:
    from workers.envs.sandbox import egress

    task = TaskSpec(
        task_id="n", instruction="", kind="desktop", source="test", setup={"network": True, "apps": []}
    )
    if (reason := egress.unavailable()) is not None:  # no slirp4netns / nftables here: refused, saying why
        with pytest.raises(Exception, match="network") as refused:
            desktop.reset(task)
        assert reason in str(refused.value)
        pytest.skip(f"no egress on this host: {reason}")
    # A service of the host listening on every address, as a careless one would.
    listener = socket.create_server(("0.0.0.0", 0))
    port = listener.getsockname()[1]
    try:
        desktop.reset(task)
        host, out_port = outside.split(":")
        get = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; head -1 <&3"
        reached = desktop.run_command(f"exec 3<>/dev/tcp/{host}/{out_port} && {get}", timeout_s=10)
        assert reached.ok and "HTTP/1.0 200" in reached.output, reached.output
        targets = [f"{address}/{port}" for address in _host_addresses()]  # eth0, the veth, 127.0.0.1
        targets += [f"{address}/{service}" for address in _host_addresses() for service in (5432, 6379)]
        targets += ["10.0.2.2/6379", "10.0.2.2/5432", f"10.0.2.2/{port}"]  # slirp's alias of the host
        for target in targets:
            probe = desktop.run_command(
                f"timeout 5 bash -c 'exec 3<>/dev/tcp/{target}' && echo OPEN", timeout_s=10
            )
            assert "OPEN" not in probe.output, f"{target} reachable from a network session"
        assert listener.getsockname()[1] == port
    finally:
        listener.close()
    # A session of a task without network has none.
    desktop.reset(TaskSpec(task_id="m", instruction="", kind="desktop", source="test", setup={"apps": []}))
    offline = desktop.run_command(
        f"timeout 5 bash -c 'exec 3<>/dev/tcp/{outside.replace(':', '/')}' && echo OPEN"
    )
    assert "OPEN" not in offline.output and "unreachable" in offline.output


# One DNS question (A record) to a server, by hand: prints the answer's rcode and answer count, or
# why there was none. Run on the host (to the host's nameserver) and in a box (to slirp's 10.0.2.3).
DNS_QUERY = """
import socket, struct, sys
name, server = sys.argv[1], sys.argv[2]
query = struct.pack(">6H", 0x2A2A, 0x0100, 1, 0, 0, 0)
query += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0" + struct.pack(">2H", 1, 1)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(query, (server, 53))
    reply = s.recv(4096)
except OSError as exc:
    print("no answer:", exc)
    sys.exit(1)
assert reply[:2] == query[:2], "a reply to another question"
print("rcode", reply[3] & 15, "answers", struct.unpack(">H", reply[6:8])[0])
"""


def test_network_task_resolves_names_through_slirp_and_the_hosts_nameserver(tmp_path: Path) -> None:
    """A box with network asks slirp's resolver (10.0.2.3, its /etc/resolv.conf); slirp forwards the
    question to the host's nameserver, the one DNS server the egress filter lets box uids reach, and
    the box gets the same answer the host gets (here NXDOMAIN for a name under .invalid, RFC 6761:
    no internet needed). A box without network has no resolver at all. Boxes trust the system's
    public CA certificates, for HTTPS."""
    from workers.envs.sandbox import egress

    if (reason := egress.unavailable()) is not None:
        pytest.skip(f"no egress on this host: {reason}")
    if not (servers := egress.host_nameservers()):
        pytest.skip("the host names no non-loopback nameserver: boxes get no DNS (docs/threat-model.md)")
    name = f"flywheel-{os.getpid()}-{time.monotonic_ns()}.invalid"
    on_host = subprocess.run(
        [sys.executable, "-c", DNS_QUERY, name, servers[0]], capture_output=True, text=True, timeout=20
    )
    if on_host.returncode != 0:
        pytest.skip(f"the host's nameserver {servers[0]} does not answer: {on_host.stdout.strip()}")
    assert on_host.stdout.startswith("rcode 3 "), on_host.stdout  # NXDOMAIN
    for network in (True, False):
        home = tmp_path / f"home-{network}"
        home.mkdir()
        box = Sandbox(home, policy=SandboxPolicy(network=network))
        box.start()
        try:
            asked = box.run(["python3", "-c", DNS_QUERY, name, "10.0.2.3"], limits=Limits(timeout_s=20))
            if network:
                assert asked.ok and asked.output == on_host.stdout, asked.output
                resolv = box.run("cat /etc/resolv.conf").output
                assert resolv.split() == ["nameserver", "10.0.2.3"]
                cas = box.run(
                    ["python3", "-c", "import ssl; print(len(ssl.create_default_context().get_ca_certs()))"]
                )
                assert cas.ok and int(cas.output) > 50, cas.output
            else:
                assert not asked.ok and "unreachable" in asked.output, asked.output
        finally:
            box.close()


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


def test_browser_pages_run_confined_and_reach_only_task_pages(tmp_path: Path) -> None:
    import http.server

    from workers.envs.browser.pool import BrowserPool
    from workers.envs.browser.server import get_server

    (tmp_path / "page.html").write_text("<title>task</title><p>hello</p>")
    host_http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=host_http.serve_forever, daemon=True).start()
    pool = BrowserPool(idle_timeout_s=60)
    try:
        handle = pool.open_session(viewport=(400, 300))
        url = get_server().mount("sectest", tmp_path) + "page.html"

        async def visit(s: object) -> tuple[str, str]:
            page = s.page  # type: ignore[attr-defined]
            await page.goto(url)
            probe = (
                "async (urls) => { const out = []; for (const u of urls) { try { await fetch(u); out.push('open ' + u); }"
                " catch (e) { out.push('blocked'); } } return out.join(' '); }"
            )
            others = [f"http://127.0.0.1:{host_http.server_address[1]}/", "http://127.0.0.1:6379/"]
            return await page.title(), await page.evaluate(probe, others)

        title, reached = handle.call(visit)
        assert title == "task"  # the task page loads (served from the host's folder, no network)
        assert "open" not in reached  # nothing else on the host answers: no host HTTP server, no Redis
        pid = pool.browser_pid()
        assert pid is not None
        uid = Path(f"/proc/{pid}/status").stat().st_uid
        assert uid == pool._box.uid and uid != 0  # Chromium runs as the pool's sandbox uid
        # Sessions share this Chromium: each renderer runs in Chromium's own sandbox (a pid namespace
        # of its own and seccomp-BPF), so one page's compromised renderer cannot reach the others.
        renderers = [
            int(line.split()[0])
            for line in subprocess.run(
                ["ps", "-o", "pid=,args=", "-u", str(uid)], capture_output=True, text=True
            ).stdout.splitlines()
            if "--type=renderer" in line
        ]
        assert renderers
        for renderer in renderers:
            status = Path(f"/proc/{renderer}/status").read_text()
            assert "Seccomp:\t2" in status, "renderer without its seccomp-BPF sandbox"
            assert os.readlink(f"/proc/{renderer}/ns/pid") != os.readlink(f"/proc/{pid}/ns/pid")
    finally:
        pool.close()
        host_http.shutdown()
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
    # Its box's cgroups (empty now) and its display's lock and socket link are cleaned up by the
    # next session that starts, not left until the same uid or display comes round again.
    left = [parent / f"flywheel-sandbox-{uid}" for parent in _cgroup_parents()]
    number = int(display.lstrip(":"))
    assert Path(f"/tmp/.X{number}-lock").exists()
    env = DesktopEnv(DesktopConfig(display_range=(number, number + 1), apps=(), vnc=False))
    try:
        env.boot()
        assert env.display == display  # the dead process's lock and link did not hold the number
        assert env.sandbox.uid == int(uid) or not any(path.exists() for path in left)
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
    link = Path(f"/tmp/.X11-unix/X{desktop.display.lstrip(':')}")
    assert link.is_symlink() and link.resolve().is_socket()
    assert desktop.observe().width == desktop.config.width
