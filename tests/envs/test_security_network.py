"""Attacks over the network from environment sessions that must fail (docs/threat-model.md,
"Environment sessions"): the host's Redis and services from a session, a network task reaching
anything but the outside (and its DNS), a browser page fetching the host. The attacks on the session
itself (menu, files, VNC, processes) are tests/envs/test_security_sandbox.py. All run on real
Xvfb / openbox / bwrap / slirp4netns / Chromium.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.conf import settings

from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.sandbox import Limits, Sandbox, SandboxPolicy, sandbox_available
from workers.envs.sandbox.uids import uid_pids

# The host's services as this test run has them (the platform's own under `make test`).
REDIS_PORT = urlparse(settings.REDIS_URL).port or 6379
PG_PORT = int(settings.DATABASES["default"]["PORT"] or 5432)

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[DesktopEnv]:
    env = DesktopEnv(DesktopConfig(display_range=(185, 199), session_dir=tmp_path / "home"))
    yield env
    env.close()


def test_host_redis_is_unreachable_from_a_session(desktop: DesktopEnv) -> None:
    with socket.create_connection(("127.0.0.1", REDIS_PORT), timeout=2):
        pass  # the host's Redis is up
    desktop.reset(TaskSpec(task_id="n", instruction="", kind="desktop", source="test", setup={"apps": []}))
    probe = f"import socket; socket.create_connection(('127.0.0.1', {REDIS_PORT}), timeout=1)"
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
        targets += [
            f"{address}/{service}" for address in _host_addresses() for service in (PG_PORT, REDIS_PORT)
        ]
        targets += [
            f"10.0.2.2/{REDIS_PORT}",
            f"10.0.2.2/{PG_PORT}",
            f"10.0.2.2/{port}",
        ]  # slirp's alias of the host
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
            others = [f"http://127.0.0.1:{host_http.server_address[1]}/", f"http://127.0.0.1:{REDIS_PORT}/"]
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
