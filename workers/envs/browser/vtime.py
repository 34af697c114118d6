"""Virtual time through CDP `Emulation.setVirtualTimePolicy`: page time moves only when we say so.

With the policy "pause", timers (`setTimeout`/`setInterval`), `requestAnimationFrame`, `Date.now()`
and `performance.now()` stand still; input events and `evaluate` still run at once. `advance(ms)`
grants a budget; Chromium runs the page's pending work as fast as it can until `ms` of page time
have passed, then pauses again and emits `Emulation.virtualTimeBudgetExpired`. A game driven by
timers therefore advances a fixed amount per agent step, regardless of how long the agent thought:
episodes replay identically under the same seed and actions.

Limits: Web Workers, audio and media clocks, network timing and compositor-only CSS animations do
not follow virtual time; a page that busy-waits on `Date.now()` hangs until the budget's deadline.
"""

from __future__ import annotations

import asyncio

from workers.envs.base import EnvError
from workers.envs.browser.pool import PageSession

EXPIRED = "Emulation.virtualTimeBudgetExpired"


async def pause(s: PageSession) -> None:
    """Stop page time (call after the page has loaded; loading needs time to pass)."""
    await s.cdp.send("Emulation.setVirtualTimePolicy", {"policy": "pause"})


async def advance(s: PageSession, ms: float, real_timeout_s: float = 10.0) -> None:
    """Let `ms` of page time pass, then pause again. Returns when the budget is used up."""
    if ms <= 0:
        return
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def expired(_event: object) -> None:
        if not done.done():
            done.set_result(None)

    s.cdp.on(EXPIRED, expired)
    try:
        await s.cdp.send("Emulation.setVirtualTimePolicy", {"policy": "advance", "budget": float(ms)})
        await asyncio.wait_for(done, real_timeout_s)
    except TimeoutError as exc:
        raise EnvError(
            f"virtual time budget of {ms:.0f} ms did not expire within {real_timeout_s} s"
        ) from exc
    finally:
        s.cdp.remove_listener(EXPIRED, expired)
