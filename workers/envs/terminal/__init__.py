"""Terminal / tool-use environment: a confined shell in the session directory (SPEC §3).

`TerminalEnv` is loaded on first access so `workers.envs.desktop` can use `sandbox` without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.envs.terminal.env import TerminalConfig, TerminalEnv

__all__ = ["TerminalConfig", "TerminalEnv"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from workers.envs.terminal import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
