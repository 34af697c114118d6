"""The rollout benchmark's CPU accounting (benchmarks/harness/cpu.py) on real processes: a busy child
is credited to its role, one born and ended inside the window too, an idle one nearly nothing, and
the stack's processes are named by their command lines."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from benchmarks.harness.cpu import CpuWindow, cpu_ceiling

# spends `s` CPU-seconds, says so, then idles (or ends)
BUSY = (
    "import sys, time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"
    "print('spent', flush=True)\ntime.sleep({rest})"
)


def _role(cmdline: list[str]) -> str | None:
    if "busy-role" in cmdline:
        return "busy"
    if "idle-role" in cmdline:
        return "idle"
    return None


def _child(code: str, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, tag], stdout=subprocess.PIPE, text=True)


def test_cpu_seconds_go_to_the_role_of_the_process_that_spent_them() -> None:
    idle = _child("import time; time.sleep(30)", "idle-role")
    busy = None
    window = CpuWindow(__import__("os").getpid(), _role, every_s=0.2, services=("postgres",))
    try:
        time.sleep(0.5)
        window.start()
        # born inside the window: all of its 0.6 CPU-seconds are inside it; it stays alive, idle
        busy = _child(BUSY.format(s=0.6, rest=30), "busy-role")
        short = _child(BUSY.format(s=0.3, rest=0), "busy-role")  # ends inside the window
        assert short.wait(timeout=120) == 0 and busy.stdout is not None
        assert busy.stdout.readline().strip() == "spent"  # however loaded the machine is
        time.sleep(0.5)
        figures = window.stop()
    finally:
        for process in (idle, busy):
            if process is not None:
                process.kill()
                process.wait()
    wall = figures["wall_s"]
    busy_seconds = figures["own_cores_by_role"]["busy"] * wall
    # 0.6 + 0.3 CPU-seconds, less what the 0.2 s sampling may miss of the short one, plus start-up
    assert 0.65 <= busy_seconds <= 1.6, figures
    assert figures["own_cores_by_role"].get("idle", 0.0) * wall < 0.1
    assert 0.0 < figures["machine_busy_frac"] <= 1.0 and figures["cores"] >= 1
    assert figures["own_cores"] >= figures["own_cores_by_role"]["busy"]
    assert figures["services_cores"] >= 0.0 and "services" not in figures["own_cores_by_role"]


def test_the_stack_processes_are_named_by_their_command_lines() -> None:
    from benchmarks.rollout import stack_role

    celery = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-n", "x@%h", "-Q"]
    assert stack_role([*celery, "train.abc", "-P", "prefork"]) == "trainer"
    assert stack_role([*celery, "rollout.abc"]) == "rollout_workers"
    assert stack_role([*celery, "env.abc", "-P", "threads"]) == "environments"
    assert stack_role([sys.executable, "-m", "workers.policy.server", "--port", "1"]) == "policy_server"
    assert stack_role([sys.executable, "-m", "benchmarks.rollout", "rollout"]) == "driver"
    assert stack_role(["/usr/lib/chromium/chromium", "--type=renderer"]) is None  # its parent's role
    assert stack_role(["x", "-Q"]) is None


@pytest.mark.parametrize(("sync_cores", "ceiling"), [(1.6, 1.25), (1.0, 2.0), (None, None), (0.0, None)])
def test_the_cpu_ceiling_is_the_cores_sync_mode_left(sync_cores: float | None, ceiling: float | None) -> None:
    assert cpu_ceiling(sync_cores, 2) == ceiling


def test_a_named_service_outside_the_tree_is_reported_apart(tmp_path: Any) -> None:
    """A process that is not a descendant (here: re-parented away by a double fork, as PostgreSQL's
    backends are not the bench's children) is counted under `services_cores` by its name."""
    import psutil

    done = tmp_path / "spent"
    code = "open('/proc/self/comm', 'w').write('fwcpusvc')\n" + BUSY.format(s=0.5, rest=30).replace(
        "print('spent', flush=True)", f"open({str(done)!r}, 'w').close()"
    )
    window = CpuWindow(__import__("os").getpid(), _role, every_s=0.2, services=("fwcpusvc",))
    window.start()
    subprocess.run(["sh", "-c", 'python3 -c "$0" >/dev/null 2>&1 &', code], check=True)  # the sh exits
    try:
        deadline = time.monotonic() + 120
        while not done.exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
        figures = window.stop()
    finally:
        for process in psutil.process_iter(["name"]):
            if process.info["name"] == "fwcpusvc":
                process.kill()
    assert 0.4 <= figures["services_cores"] * figures["wall_s"] <= 1.5, figures
    assert sum(figures["own_cores_by_role"].values()) * figures["wall_s"] < 0.4  # not in the tree's roles
