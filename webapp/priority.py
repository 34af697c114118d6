"""CPU priority classes of the platform's processes: `scripts/priority.sh` applies them (the nice of
the process and of its session's autogroup), `make up` starts every process through it, and Python
code that starts a long-lived process of its own (a run's policy servers, `bench team`'s stack) goes
through the same script. docs/scale.md ("CPU priorities") says which role gets which class."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

CLASSES = ("interactive", "normal", "low", "background")


def prioritized(priority: str, argv: list[str]) -> list[str]:
    """`argv` run at the CPU priority class `priority`. Start it in a session of its own
    (`subprocess.Popen(..., start_new_session=True)`): only then does the script give the session's
    autogroup the class's nice too, and with autogroup scheduling on that is what counts against
    the other sessions' processes. The process keeps the pid of the returned command."""
    if priority not in CLASSES:
        raise ValueError(f"unknown priority class {priority!r}; expected one of {CLASSES}")
    return [str(Path(settings.BASE_DIR) / "scripts" / "priority.sh"), priority, *argv]
