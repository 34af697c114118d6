"""How an env host builds each kind of environment. Imports are lazy so a host that runs only
desktops never loads Playwright, and the reverse."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from workers.envs.base import Environment

_shared: dict[str, Any] = {}


def _browser_pool() -> Any:
    """One Chromium process per host process, shared by every browser/game/phone session in it."""
    if "pool" not in _shared:
        from workers.envs.browser.pool import BrowserPool

        _shared["pool"] = BrowserPool()
    return _shared["pool"]


def make_desktop(**config: Any) -> Environment:
    """`config`: DesktopConfig fields that differ from the defaults (a replay's screen size, no VNC).
    FLYWHEEL_VNC_SOCKET_DIR: where x11vnc's sockets go, the one place the token proxy connects to
    (in compose a volume both share, never mounted in a sandbox; `vnc.server.default_socket_root`).
    FLYWHEEL_DESKTOP_BACKEND: 'xvfb' (the default) or 'osworld-vm' (OSWorld's own VMs through
    desktop-env's providers, for hosts that have them: workers/envs/osworld/vm.py)."""
    backend = os.environ.get("FLYWHEEL_DESKTOP_BACKEND", "xvfb")
    if backend == "osworld-vm":
        from workers.envs.osworld.vm import OSWorldVMEnv

        return OSWorldVMEnv()
    if backend != "xvfb":
        raise ValueError(f"FLYWHEEL_DESKTOP_BACKEND must be 'xvfb' or 'osworld-vm', not {backend!r}")
    from workers.envs.desktop.config import DesktopConfig
    from workers.envs.desktop.env import DesktopEnv

    return DesktopEnv(DesktopConfig(**config))


def make_browser() -> Environment:
    from workers.envs.browser.miniwob import MiniWoBEnv

    return MiniWoBEnv(pool=_browser_pool())


def make_game() -> Environment:
    from workers.envs.games.env import GameEnv

    return GameEnv(pool=_browser_pool())


def make_phone() -> Environment:
    from workers.envs.phone.env import PhoneEnv

    return PhoneEnv(pool=_browser_pool())


def make_terminal() -> Environment:
    from workers.envs.terminal import TerminalEnv

    return TerminalEnv()


FACTORIES: dict[str, Callable[[], Environment]] = {
    "desktop": make_desktop,
    "browser": make_browser,
    "game": make_game,
    "phone": make_phone,
    "terminal": make_terminal,
}


def parse_warm_pool(spec: str) -> dict[str, int]:
    """'desktop=1,browser=4' → {'desktop': 1, 'browser': 4}; unknown kinds and bad numbers raise."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, number = part.partition("=")
        kind = kind.strip()
        if kind not in FACTORIES:
            raise ValueError(
                f"unknown environment kind {kind!r} in warm pool {spec!r}; known: {sorted(FACTORIES)}"
            )
        try:
            out[kind] = int(number)
        except ValueError as exc:
            raise ValueError(f"warm pool size for {kind!r} must be an integer, got {number!r}") from exc
        if out[kind] < 0:
            raise ValueError(f"warm pool size for {kind!r} must be ≥ 0")
    return out


def shutdown_shared() -> None:
    pool = _shared.pop("pool", None)
    if pool is not None:
        pool.close()
