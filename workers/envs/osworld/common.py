"""What the OSWorld modules share: the error, the runner they drive, the step/getter names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from workers.envs.base import EnvError
from workers.envs.sandbox import CommandResult

SETUP_TYPES = frozenset(
    {
        "execute",
        "command",
        "launch",
        "sleep",
        "open",
        "download",
        "activate_window",
        "close_window",
        "chrome_open_tabs",
        "chrome_close_tabs",
    }
)
# The platform's own getters (OSWorld's talk HTTP to its VM or download from the web).
OWN_GETTERS = frozenset(
    {"vm_command_line", "vm_command_error", "cloud_file", "open_tabs_info", "vlc_playing_info"}
)
OWN_METRICS = frozenset({"regex_match"})  # not OSWorld's; kept for the bundled examples
# OSWorld's infeasible tasks: solved when the agent gives up (computer_13 FAIL = our call_user).
INFEASIBLE = "infeasible"
OSWORLD_HOME = "/home/user"
MAX_SLEEP_S = 60.0
# Output kept when an evaluator reads a whole file or tree through the sandbox (base64 of a task's
# document, the accessibility tree); a command's default is 64 kB.
MAX_READ_BYTES = 128 << 20


class OSWorldError(EnvError):
    """A task uses something this platform cannot run, or its JSON is malformed."""


class CommandRunner(Protocol):
    """What set-up and evaluation need from an environment (DesktopEnv and TerminalEnv have it)."""

    session_dir: Path

    @property
    def command_home(self) -> str:
        """The session directory as commands see it (the sandbox maps it to /home/session)."""
        ...

    def run_command(
        self,
        command: str | list[str],
        shell: bool = False,
        timeout_s: float = 30.0,
        separate_stderr: bool = False,
        max_output: int | None = None,
    ) -> CommandResult: ...

    def spawn_command(self, command: str | list[str], shell: bool = False) -> None: ...


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
