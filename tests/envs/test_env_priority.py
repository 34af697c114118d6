"""RL's environments yield the CPU to annotators' (docs/scale.md, "CPU priorities"): a real env host
runs the processes of an environment leased for RL (a background lease) at the background class —
the rollout workers' — and those of an annotator's lease at the interactive class, read back from
/proc: every thread's nice, the autogroup of each session leader, and the box's CPU cgroup weight.
A browser page's unit is its Chromium (workers.envs.factory: one per class per host)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.env_host import env_host
from webapp.fleet import services as fleet
from workers.envs.leases import Lease
from workers.priority import NICE, WEIGHT

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = {
    "browser": {"task_id": "click-test", "instruction": "", "kind": "browser", "source": "miniwob",
                "setup": {"task": "click-test"}},
    "desktop": {"task_id": "t", "instruction": "work", "kind": "desktop", "source": "custom",
                "setup": {"apps": ["xterm"]}},
}  # fmt: skip


def _at_least(priority: str) -> int:
    """The nice a class gets under a host started from this process (priorities only go down)."""
    return max(NICE[priority], os.nice(0))


def _thread_nices(pid: int) -> set[int]:
    nices = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            nices.add(int((task / "stat").read_text().rsplit(")", 1)[1].split()[16]))
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    return nices


def _cpu_weight(pid: int) -> int | None:
    """The cpu.shares (v1) or cpu.weight (v2, scaled to shares) of the process's sandbox cgroup;
    None when it is in no sandbox cgroup (cgroups not writable here)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, rel = line.split(":", 2)
        if "flywheel-sandbox-" not in rel:
            continue
        if "cpu" in names.split(","):
            return int(Path(f"/sys/fs/cgroup/cpu{rel}/cpu.shares").read_text())
        if names == "" and (weight := Path(f"/sys/fs/cgroup{rel}/cpu.weight")).exists():
            return round(int(weight.read_text()) * 1024 / 100)
    return None


def _check(info: dict[str, Any], priority: str) -> bool:
    """Every process of the env at `priority`; True when the check tells the classes apart here (by
    nice, or by a cgroup weight)."""
    assert info["priority"] == priority and info["pids"], info
    nice, told_apart = _at_least(priority), _at_least("background") != _at_least("interactive")
    for pid in info["pids"]:
        try:
            assert _thread_nices(pid) <= {nice}, (pid, _thread_nices(pid), priority)
            group = Path(f"/proc/{pid}/autogroup").read_text().strip() if os.getsid(pid) == pid else ""
            weight = _cpu_weight(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue  # a short-lived helper process ended meanwhile
        # Autogroups count only outside CPU cgroups (where the box has none). Empty: the boot-time
        # autogroup (some CI runners), as in tests/test_priorities.py.
        if group and weight is None:
            assert group.endswith(f" nice {nice}"), (pid, group, priority)
        if weight is not None:
            assert weight == (WEIGHT[NICE["background"]] if priority == "background" else 1024), (pid, weight)
            told_apart = True
    return told_apart


def _reset_and_info(lease: Lease, kind: str) -> dict[str, Any]:
    fleet.env_call(lease=lease, op="reset", payload={"task": TASKS[kind], "seed": 1}, timeout_s=120)
    return fleet.env_call(lease=lease, op="info")


@pytest.mark.parametrize("kind", ["browser", "desktop"])
def test_rl_leases_run_at_the_background_class_and_annotation_at_interactive(kind: str) -> None:
    with env_host(f"{kind}=2"):
        deadline = time.monotonic() + 120
        while fleet.registry().idle_count(kind) < 2:
            assert time.monotonic() < deadline, f"the env host did not boot two {kind} envs"
            time.sleep(0.2)
        rl = fleet.lease_acquire(kind=kind, owner="rl:1:0:1", background=True)
        person = fleet.lease_acquire(kind=kind, owner="annotation:1")
        rl_info, person_info = _reset_and_info(rl, kind), _reset_and_info(person, kind)
        assert not set(rl_info["pids"]) & set(person_info["pids"]), (
            "an RL env shares processes with an annotator's"
        )
        told_apart = _check(rl_info, "background")
        told_apart = _check(person_info, "interactive") or told_apart
        # The env RL used goes back to interactive for the next annotator (its page in the
        # interactive Chromium, a desktop's processes reniced up again).
        fleet.lease_release(lease_id=rl.lease_id)
        held = [fleet.lease_acquire(kind=kind, owner="annotation:2")]  # the host keeps two idle: find it
        while held[-1].env_id != rl.env_id:
            assert len(held) < 8, "the env RL released was not leased again"
            held.append(fleet.lease_acquire(kind=kind, owner="annotation:2"))
        again = held[-1]
        _check(_reset_and_info(again, kind), "interactive")
        if not told_apart:
            pytest.skip("this process runs at nice ≥ 10 with no writable CPU cgroup: the classes look alike")
