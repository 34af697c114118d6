"""Network egress for sandboxes whose task asks for it: user-mode networking, filtered on the host.

A box that may use the network still gets its own network namespace; slirp4netns (Debian's
`slirp4netns`) gives it a tap device whose packets it turns into ordinary sockets of its own on the
host. slirp4netns runs as the box's uid (joining the box's user and network namespaces, as the uid
that owns them) with `--disable-host-loopback` (10.0.2.2 is not the host's 127.0.0.1) and its own
sandbox and seccomp filter. What those host sockets may reach is decided by one nftables table
(Debian's `nftables`), `inet flywheel_sandbox_egress`, on the output hook for every box uid
(`meta skuid` in `uids.UID_BASE` .. + `UID_COUNT`):

- every address of the host itself (`fib daddr type local`: 127.0.0.0/8, ::1 and each interface's
  address) is rejected — so PostgreSQL, Redis, the web app and anything else listening on this host
  stay out of reach, on loopback or on 0.0.0.0;
- private, shared, link-local (cloud metadata) and multicast ranges are rejected (`DENIED_V4`,
  `DENIED_V6`): the hosts of the deployment's own network are not the task's "outside";
- except DNS (port 53) to the nameservers of the host's /etc/resolv.conf that are not loopback,
  which slirp's resolver at 10.0.2.3 forwards to.

Everything else is allowed. The table is (re)loaded atomically on the first network box of a
process and checked before each one; where slirp4netns or nft is missing, or the table cannot be
loaded, `unavailable()` says why and network tasks are refused with that reason.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.sandbox.spawner import popen_tied
from workers.envs.sandbox.uids import UID_BASE, UID_COUNT

TABLE = "flywheel_sandbox_egress"
RESOLVER = "10.0.2.3"  # slirp4netns's built-in DNS forwarder, as the box's /etc/resolv.conf says
DENIED_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
DENIED_V6 = ("fc00::/7", "fe80::/10", "ff00::/8")
_NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: an fd of the user namespace that owns it

_lock = threading.Lock()
_loaded = False


def unavailable() -> str | None:
    """Why this host cannot give a box filtered egress, or None when it can (the filter is loaded)."""
    for program, package in (("slirp4netns", "slirp4netns"), ("nft", "nftables")):
        if shutil.which(program) is None:
            return f"{program} is not installed (Debian package {package})"
    try:
        ensure_filter()
    except EnvError as exc:
        return str(exc)
    return None


def ruleset(nameservers: list[str] | None = None) -> str:
    """The nft script that replaces the egress table (atomically: one transaction)."""
    uids = f"{UID_BASE}-{UID_BASE + UID_COUNT - 1}"
    dns = nameservers if nameservers is not None else host_nameservers()
    rules = [
        f"meta skuid {uids} {_family(ns)} daddr {ns} {proto} dport 53 accept"
        for ns in dns
        for proto in ("udp", "tcp")
    ]
    rules += [
        f"meta skuid {uids} fib daddr type local meta l4proto tcp reject with tcp reset",
        f"meta skuid {uids} fib daddr type local reject with icmpx type admin-prohibited",
        f"meta skuid {uids} ip daddr {{ {', '.join(DENIED_V4)} }} reject with icmpx type admin-prohibited",
        f"meta skuid {uids} ip6 daddr {{ {', '.join(DENIED_V6)} }} reject with icmpx type admin-prohibited",
    ]
    body = "\n".join(f"    {rule}" for rule in rules)
    return (
        f"table inet {TABLE}\ndelete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n  chain output {{\n"
        f"    type filter hook output priority 0; policy accept;\n{body}\n  }}\n}}\n"
    )


def ensure_filter() -> None:
    """Load the table once per process; afterwards only check that it is still there."""
    global _loaded
    with _lock:
        if _loaded and _nft(["list", "table", "inet", TABLE]).returncode == 0:
            return
        result = _nft(["-f", "-"], ruleset())
        if result.returncode != 0:
            raise EnvError(f"the egress filter could not be loaded (nft: {result.stderr.strip()[:300]})")
        _loaded = True


class Slirp:
    """slirp4netns serving one box's network namespace; `stop()` ends it (so does the box's close,
    which kills everything of the box's uid)."""

    def __init__(self, init_pid: int, uid: int, preexec: Callable[[], None], timeout_s: float) -> None:
        ensure_filter()
        log_fd, log_name = tempfile.mkstemp(prefix="flywheel-slirp-", suffix=".log")
        self._log = Path(log_name)
        net_fd = os.open(f"/proc/{init_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        # bwrap nests a second user namespace for the box's uid map; the network namespace belongs
        # to the outer one, which only an fd reaches (no process lives in it).
        user_fd = fcntl.ioctl(net_fd, _NS_GET_USERNS)
        ready_r, ready_w = os.pipe()
        argv = [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            "slirp4netns",
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            "--enable-seccomp",
            f"--userns-path=/proc/self/fd/{user_fd}",
            "--netns-type=path",
            f"--ready-fd={ready_w}",
            f"/proc/self/fd/{net_fd}",
            "tap0",
        ]
        try:
            self.proc = popen_tied(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(ready_w, user_fd, net_fd),
                preexec_fn=preexec,
            )
        except OSError as exc:
            raise EnvError(f"cannot start slirp4netns: {exc}") from exc
        finally:
            for fd in (ready_w, user_fd, net_fd, log_fd):
                os.close(fd)
        try:
            _wait_ready(ready_r, self.proc, timeout_s, self._log)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(ready_r)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log.unlink(missing_ok=True)


def _wait_ready(fd: int, proc: subprocess.Popen[bytes], timeout_s: float, log_path: Path) -> None:
    import select

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            if os.read(fd, 1) == b"1":
                return
            break
        if proc.poll() is not None:
            break
    tail = log_path.read_text(errors="replace")[-1200:] if log_path.exists() else ""
    raise EnvError(f"slirp4netns did not configure the box's network: {tail.strip() or 'no output'}")


def _nft(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(["nft", *args], 1, "", str(exc))


def host_nameservers() -> list[str]:
    """The host resolver's addresses that slirp's DNS forwarder may use (never loopback)."""
    found = []
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                address = ipaddress.ip_address(parts[1].split("%")[0])
            except ValueError:
                continue
            if not address.is_loopback:
                found.append(str(address))
    return found


def _family(address: str) -> str:
    return "ip6" if ":" in address else "ip"
