"""What a desktop session runs besides its apps, and what OSWorld reads from it: the session's own
D-Bus, the environment of processes in the box (accessibility on for OSWorld tasks, OSWorld's
pyautogui on the path) and the active terminal's transcript (OSWorld's `vm_terminal_output`)."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.desktop.apps import TERMINAL_LOG_DIR, TERMINAL_TEXT_BYTES, terminal_text
from workers.envs.desktop.procs import wait_until
from workers.envs.desktop.xauth import XAUTHORITY_INSIDE
from workers.envs.sandbox import SANDBOX_HOME, CommandResult, Sandbox

log = logging.getLogger(__name__)

SESSION_BUS = "unix:path=/run/user/1000/bus"
PY_INSIDE = "/opt/osworld-py"  # pyautogui for OSWorld set-up steps, read-only


# OSWorld tasks read applications' accessibility trees (AT-SPI, on the session's own D-Bus), as on
# OSWorld's VM where accessibility is on: GTK apps expose theirs by themselves; Firefox/Thunderbird,
# Chromium and Qt (VLC) when asked. Only for OSWorld tasks: it costs the browser some speed.
OSWORLD_A11Y_ENV = {
    "GNOME_ACCESSIBILITY": "1",
    "ACCESSIBILITY_ENABLED": "1",
    "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
}


def box_env(
    *, display: str, box: Sandbox | None, bus: str | None, osworld: bool, extra: dict[str, str]
) -> dict[str, str]:
    """Environment for processes in a desktop's sandbox: its DISPLAY and cookie, the session as HOME, the
    session bus once it listens, accessibility for OSWorld tasks, then `extra` (the config's)."""
    return {
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "xterm",
        "DISPLAY": display,
        "XAUTHORITY": XAUTHORITY_INSIDE,
        "HOME": SANDBOX_HOME,
        "XDG_RUNTIME_DIR": "/run/user/1000",
        "XDG_DOWNLOAD_DIR": f"{SANDBOX_HOME}/Downloads",
        **(OSWORLD_A11Y_ENV if osworld else {}),
        **({"DBUS_SESSION_BUS_ADDRESS": bus} if bus else {}),
        **({"PYTHONPATH": PY_INSIDE} if PY_INSIDE in (box.ro_binds if box else {}) else {}),
        **extra,
    }


def spawn_session_bus(box: Sandbox, log_path: Path) -> subprocess.Popen[bytes] | None:
    """Start the session's own D-Bus (so gsettings / dconf read and write the session's settings, in
    its home, never the host's) when dbus-daemon is installed; `wait_session_bus` waits for it."""
    if shutil.which("dbus-daemon") is None:
        return None
    return box.spawn(
        ["dbus-daemon", "--session", f"--address={SESSION_BUS}", "--nofork", "--nopidfile"],
        env={"HOME": SANDBOX_HOME, "XDG_RUNTIME_DIR": "/run/user/1000"},
        log_path=log_path,
    )


def wait_session_bus(box: Sandbox, timeout_s: float, log_path: Path) -> bool:
    """Whether the session's D-Bus listens within `timeout_s` (a warning when not: apps run without)."""
    socket_path = box.host_path("/run/user/1000/bus")
    try:
        wait_until(socket_path.is_socket, timeout_s, "the session's D-Bus", 0.01)
    except EnvError:
        log.warning("the session's D-Bus did not start (see %s)", log_path)
        return False
    return True


def terminal_transcript(run_command: Callable[..., CommandResult]) -> str | None:
    """The text of the terminal in the active window (OSWorld's `vm_terminal_output` reads the
    focused GNOME Terminal's text), or None when the active window is not one of the session's
    terminals. `run_command` is the desktop's (`DesktopEnv.run_command`)."""
    script = (
        "w=$(xprop -root _NET_ACTIVE_WINDOW | sed -n 's/.*# \\(0x[0-9a-fA-F]*\\).*/\\1/p') && "
        "p=$(xprop -id \"$w\" _NET_WM_PID | sed -n 's/.* = \\([0-9]*\\)$/\\1/p') && "
        f'[ -n "$p" ] && tail -c {TERMINAL_TEXT_BYTES} -- "{TERMINAL_LOG_DIR}/$p.log" | base64 -w0'
    )
    result = run_command(
        ["/bin/sh", "-c", script], timeout_s=10.0, separate_stderr=True, max_output=2 * TERMINAL_TEXT_BYTES
    )
    if not result.ok:
        return None
    return terminal_text(base64.b64decode(result.output.strip() or b""))
