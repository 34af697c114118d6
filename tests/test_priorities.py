"""CPU priorities (docs/scale.md, "CPU priorities"): what a person waits on runs at nice 0 and the
rest yields to it, in `make up` (scripts/up.sh through scripts/priority.sh, in the process and its
session's autogroup), in compose (cpu_shares), in `bench team`'s stack and for the runs' policy
servers. The script is run for real here: the nice and autogroup its command ends up with."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from benchmarks import team
from webapp.priority import CLASSES, prioritized

ROOT = Path(settings.BASE_DIR)
SCRIPT = ROOT / "scripts" / "priority.sh"
# The role of each process `make up` starts (and a joining host's two), as the issue asks for.
EXPECTED = {
    "web": "interactive", "envhost1": "interactive", "worker-asr-live": "interactive", "vnc-proxy": "interactive",
    "policy": "interactive", "worker-default": "normal", "worker-env": "normal", "beat": "normal",
    "worker-asr": "low", "worker-rollout": "background", "worker-train": "background",
    '"$NAME"': "interactive", '"rollout-$NAME"': "background",
}  # fmt: skip
# The kernel's weight of a nice level (sched_prio_to_weight): what cpu_shares mirrors in compose.
WEIGHT = {0: 1024, 5: 335, 8: 172, 10: 110}


def _levels() -> dict[str, int]:
    """Each class's nice, read from the script's own table."""
    text = SCRIPT.read_text()
    return {
        name: int(level) for name, level in re.findall(r"^\s+(\w+)\) level=(\d+) ;;$", text, re.MULTILINE)
    }


def _up_classes() -> dict[str, str]:
    """NAME -> CLASS of every `start NAME CLASS CMD...` line of up.sh."""
    lines = (ROOT / "scripts" / "up.sh").read_text().splitlines()
    return dict(
        m.groups() for line in lines if (m := re.match(r"^\s*(?:[A-Z_]+=\S+ )*start (\S+) (\S+) ", line))
    )


def _run(*argv: str, session: bool = True, **env: str) -> list[str]:
    """What a command reports about itself when started through the script: its autogroup line and nice."""
    # A process in the boot-time autogroup (one whose session never called setsid, as in some CI
    # runners) reads /proc/self/autogroup as empty: each value is labelled so an empty one stays empty.
    probe = [
        "sh",
        "-c",
        'echo "group=$(cat /proc/self/autogroup 2>/dev/null || echo none)"; echo "nice=$(nice)"',
    ]
    out = subprocess.run([str(SCRIPT), *argv, *probe], env={**os.environ, **env}, start_new_session=session,
                         capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return [values["group"].strip(), values["nice"].strip()]


def test_every_process_make_up_starts_has_its_roles_class() -> None:
    assert _up_classes() == EXPECTED
    assert set(_levels()) == set(CLASSES) and _levels() == {"interactive": 0, "normal": 5, "low": 8,
                                                            "background": 10}  # fmt: skip


def test_compose_gives_each_service_the_weight_of_its_class() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    levels = _levels()
    same = {"envhost": "envhost1", "envhost-extra": '"$NAME"', "worker-export": "worker-default"}
    for name, service in services.items():
        up_name = same.get(name, name)
        if up_name in EXPECTED:
            assert service.get("cpu_shares") == WEIGHT[levels[EXPECTED[up_name]]], name
        else:  # databases, the front door, one-shot migrate, the GPU server: the default weight
            assert "cpu_shares" not in service, name


def test_the_bench_starts_its_stack_with_up_shs_classes() -> None:
    up = _up_classes()
    for name, _, _, priority in team.worker_sizes(8):
        assert up[f"worker-{name}"] == priority, name
    source = (ROOT / "benchmarks" / "team.py").read_text()
    for name, up_name in (("web", "web"), ("beat", "beat"), ("envhost", "envhost1"), ("policy", "policy")):
        assert re.search(rf'self\.spawn\(\s*"{name}", "\w+", 1, "{up[up_name]}"', source), name


def _at_least(level: int) -> str:
    """The nice a class of `level` gets when started from this process (priorities only go down)."""
    return str(max(level, os.nice(0)))


def test_a_session_leader_gets_its_class_in_its_nice_and_its_autogroup() -> None:
    group, nice = _run("background")
    assert nice == _at_least(10)
    if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1":
        assert group.endswith(f" nice {_at_least(10)}"), group
    _, nice = _run("normal")
    assert nice == _at_least(5)


def test_a_process_that_does_not_lead_its_session_leaves_the_callers_autogroup_alone() -> None:
    mine = (
        Path("/proc/self/autogroup").read_text().strip() if Path("/proc/self/autogroup").exists() else "none"
    )
    group, nice = _run("low", session=False)
    assert nice == _at_least(8) and group == mine


def test_priorities_only_go_down_and_can_be_turned_off() -> None:
    out = subprocess.run(["nice", "-n", "12", str(SCRIPT), "normal", "nice"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    # under `nice -n 12 make up` normal work stays at 12 (or more), not 5
    assert out.strip() == str(min(19, os.nice(0) + 12))
    group, nice = _run("background", FLYWHEEL_PRIORITIES="off")
    assert nice == str(os.nice(0)) and (group in ("", "none") or group.endswith(" nice 0"))


@pytest.mark.parametrize("argv", [["urgent", "true"], ["interactive"], []])
def test_an_unknown_class_or_no_command_is_refused(argv: list[str]) -> None:
    done = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr
    if argv and argv[0] not in CLASSES:
        with pytest.raises(ValueError):
            prioritized(argv[0], ["true"])
