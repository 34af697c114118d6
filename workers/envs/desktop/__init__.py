"""Desktop environment: Xvfb + openbox + apps, XTEST input, mss screenshots (SPEC §3).

`DesktopEnv` and `DesktopConfig` are loaded on first access so that light modules here
(`procs`, `keys`) can be imported by `workers.envs.vnc` without a cycle through `env`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.envs.desktop.config import DesktopConfig
    from workers.envs.desktop.env import DesktopEnv

__all__ = ["DesktopConfig", "DesktopEnv"]


def __getattr__(name: str) -> Any:
    if name == "DesktopConfig":
        from workers.envs.desktop.config import DesktopConfig

        return DesktopConfig
    if name == "DesktopEnv":
        from workers.envs.desktop.env import DesktopEnv

        return DesktopEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
