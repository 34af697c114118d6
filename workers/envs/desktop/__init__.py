"""Desktop environment: Xvfb + openbox + apps, XTEST input, mss screenshots (SPEC §3).

`DesktopEnv` and `DesktopConfig` are loaded on first access so that light modules here
(`procs`, `keys`) can be imported by `workers.envs.vnc` without a cycle through `env`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.envs.desktop.env import DesktopConfig, DesktopEnv

__all__ = ["DesktopConfig", "DesktopEnv"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from workers.envs.desktop import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
