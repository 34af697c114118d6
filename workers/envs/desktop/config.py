"""`DesktopConfig`: how a desktop session (`workers.envs.desktop.env.DesktopEnv`) boots."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workers.envs.base import ImageFormat
from workers.envs.sandbox import SandboxPolicy


@dataclass(frozen=True)
class DesktopConfig:
    """How a desktop session boots. One line per field:

    - width/height: screen size in pixels.
    - display_range: X display numbers [low, high) to pick a free one from.
    - apps: apps started at reset unless the task names its own ('xterm', 'chromium', 'editor');
      the desktop's right-click menu offers the same apps.
    - vnc / vnc_socket_dir: start x11vnc, on a unix socket in a directory of its own under this root,
      the one the token proxy connects to (None: `vnc.server.default_socket_root()`).
    - session_dir: the session's home (shared with its terminal); a temp dir (deleted on close) if None.
      Every directory above it must let others traverse it (the sandbox user binds it). While the
      session's box lives a tmpfs of `policy.disk_mb` lies over it, holding a copy of what it held;
      what the session writes there ends with the box (a reboot starts from the directory again).
    - policy: the session sandbox's process, memory and CPU limits.
    - image_format / jpeg_quality: default screenshot encoding.
    - scroll_clicks: wheel clicks per scroll action; wait_s: how long `wait()` sleeps.
    - settle_quiet_s / settle_max_s: after an action, wait until the screen was quiet (no X DAMAGE)
      for settle_quiet_s, at most settle_max_s, before the screenshot; 0 grabs at once.
    - boot_timeout_s / app_timeout_s: readiness deadlines.
    - glx: load Xvfb's GLX extension (software Mesa; about 90 ms of every boot). Off: apps render
      through plain X11 (Chromium runs with --disable-gpu anyway); turn on for apps that need GLX.
    """

    width: int = 1280
    height: int = 800
    display_range: tuple[int, int] = (100, 200)
    apps: tuple[str, ...] = ("xterm",)
    vnc: bool = True
    vnc_socket_dir: Path | None = None
    session_dir: Path | None = None
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    image_format: ImageFormat = "jpeg"
    jpeg_quality: int = 80
    scroll_clicks: int = 5
    wait_s: float = 1.0
    settle_quiet_s: float = 0.05
    settle_max_s: float = 0.5
    boot_timeout_s: float = 10.0
    app_timeout_s: float = 15.0
    glx: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
