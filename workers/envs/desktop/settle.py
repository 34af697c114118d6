"""Wait until the screen stops changing after an action, using the X DAMAGE extension.

An app redraws some milliseconds after it receives input; a screenshot taken at once may show the
old state. DAMAGE reports when any part of the root window is drawn on, so after an action we wait
until the screen has been quiet for `quiet_s` (capped at `max_s`, since a blinking cursor or an
animation never stops). This costs one extra X connection and no screenshots.

With `min_area`, drawing smaller than that many pixels does not count (a text caret's blink, a
spinner): every drawn rectangle is reported (DamageReportRawRectangles) and the small ones ignored,
so "quiet" can be reached while a caret blinks.
"""

from __future__ import annotations

import select
import time

from Xlib.display import Display
from Xlib.ext import damage

from workers.envs.base import EnvError


class ScreenSettler:
    def __init__(self, display: str, min_area: int = 0) -> None:
        self._min_area = min_area
        self._conn = Display(display)
        if not self._conn.has_extension("DAMAGE"):
            self._conn.close()
            raise EnvError("X server has no DAMAGE extension")
        self._conn.damage_query_version()
        level = damage.DamageReportRawRectangles if min_area > 0 else damage.DamageReportNonEmpty
        self._damage = self._conn.screen().root.damage_create(level)
        self._conn.sync()

    def wait(self, quiet_s: float, max_s: float) -> float:
        """Block until no drawing happened for `quiet_s` (or `max_s` passed); return seconds waited."""
        start = last_change = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last_change >= quiet_s or now - start >= max_s:
                return now - start
            timeout = min(quiet_s - (now - last_change), max_s - (now - start))
            if self._drain(timeout):
                last_change = time.monotonic()

    def _drain(self, timeout_s: float) -> bool:
        """Consume damage events arriving within `timeout_s`; True if there was any."""
        changed = False
        if self._conn.pending_events() == 0:
            ready, _, _ = select.select([self._conn.fileno()], [], [], max(timeout_s, 0))
            if not ready:
                return False
        while self._conn.pending_events():
            event = self._conn.next_event()
            if self._min_area > 0:
                changed |= event.area.width * event.area.height >= self._min_area
            else:
                changed = True
        if changed and self._min_area == 0:
            # NonEmpty reports once until the region is emptied again; empty it to hear the next draw.
            self._conn.damage_subtract(self._damage)
            self._conn.sync()
        return changed

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # the server may be gone already; nothing to release then
            pass
