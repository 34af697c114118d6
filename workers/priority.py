"""The CPU priority classes as numbers, for code that lowers the priority of processes already
running (an environment's processes when a run leases it: `workers.envs.sandbox.Sandbox.prioritize`).
`scripts/priority.sh` starts processes in a class and holds the same table (tests/test_priorities.py
keeps the two equal); docs/scale.md ("CPU priorities") says which role gets which class."""

from __future__ import annotations

import os

CLASSES = ("interactive", "normal", "low", "background")
NICE = {"interactive": 0, "normal": 5, "low": 8, "background": 10}
# The kernel's weight of each nice level (sched_prio_to_weight): a cgroup's cpu.shares (v1) for a
# class, as compose's cpu_shares; cgroup v2's cpu.weight is the same scaled to its default of 100.
WEIGHT = {0: 1024, 5: 335, 8: 172, 10: 110}


def nice_of(priority: str) -> int:
    """The nice a process of class `priority` gets here: the class's level, but never above this
    process's own priority (priorities only go down: under `nice -n 3 make up` interactive is 3)."""
    if priority not in NICE:
        raise ValueError(f"unknown priority class {priority!r}; expected one of {CLASSES}")
    return max(NICE[priority], os.nice(0))


def weight_of(priority: str) -> int:
    """The cgroup cpu.shares of class `priority` (cgroups are not nested under ours in nice terms)."""
    if priority not in NICE:
        raise ValueError(f"unknown priority class {priority!r}; expected one of {CLASSES}")
    return WEIGHT[NICE[priority]]
