"""Take-over recording: an annotator driving the desktop over VNC becomes canonical actions (SPEC §1).

The proxy publishes the pointer and key events it forwards for read-write tokens to a Redis stream
per session (`flywheel:vnc:input:<session_id>`, capped); the service layer reads them and
`TakeoverFolder` folds them into actions: press+release → click (two quick ones → left_double),
press, move, release → drag, wheel ticks → scroll, printable keys → type (Enter ends the text
with '\\n'), modifier combos and special keys → hotkey. Timestamps are `time.monotonic()` of the
proxy's host, the clock steps and audio use.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from workers.actions.types import Action, Point
from workers.envs.vnc.rfb import InputEvent

STREAM_PREFIX = "flywheel:vnc:input:"
STREAM_MAXLEN = 10_000
DOUBLE_CLICK_S = 0.4
DRAG_MIN_PX = 5.0
SCROLL_BURST_S = 0.5
DRAG_SAMPLE_S = 0.03

_MODIFIERS = {
    0xFFE1: "shift", 0xFFE2: "shift", 0xFFE3: "ctrl", 0xFFE4: "ctrl", 0xFFE7: "alt", 0xFFE8: "alt",
    0xFFE9: "alt", 0xFFEA: "alt", 0xFFEB: "super", 0xFFEC: "super", 0xFE03: "altgr",
}  # fmt: skip
_SPECIAL = {
    0xFF08: "backspace", 0xFF09: "tab", 0xFF1B: "esc", 0xFFFF: "delete", 0xFF63: "insert",
    0xFF50: "home", 0xFF57: "end", 0xFF55: "pageup", 0xFF56: "pagedown",
    0xFF51: "left", 0xFF52: "up", 0xFF53: "right", 0xFF54: "down",
    **{0xFFBE + i: f"f{i + 1}" for i in range(12)},
}  # fmt: skip
_ENTER = {0xFF0D, 0xFF8D}
_WHEEL = {3: "up", 4: "down", 5: "left", 6: "right"}  # RFB button-mask bit → direction


@dataclass(frozen=True)
class TimedEvent:
    event: InputEvent
    mono: float


@dataclass
class RecordedAction:
    """An action the annotator performed; `merges_previous` marks a left_double that replaces the
    click just emitted; `count` is the number of wheel ticks of a scroll."""

    action: Action
    t_start: float
    t_end: float
    merges_previous: bool = False
    count: int = 1


class InputThrottle:
    """Which forwarded events are worth publishing: every key and button change, and pointer moves
    only while a button is held (a drag's path), at most every DRAG_SAMPLE_S."""

    def __init__(self) -> None:
        self._buttons = 0
        self._last_sample = -math.inf

    def keep(self, event: InputEvent, mono: float) -> bool:
        if event.kind == "key":
            return True
        changed = event.buttons != self._buttons
        self._buttons = event.buttons
        if changed or (event.buttons and mono - self._last_sample >= DRAG_SAMPLE_S):
            self._last_sample = mono
            return True
        return False


def event_to_fields(event: InputEvent, mono: float, user_id: str) -> dict[Any, Any]:
    """Stream entry fields for one event (one JSON field keeps the entry schema-free)."""
    return {"e": json.dumps({**event.__dict__, "mono": mono, "user_id": user_id})}


def read_events(
    redis: Any, session_id: str, after: str = "0-0", count: int = 1000
) -> list[tuple[str, TimedEvent]]:
    """Events published after stream id `after` (sync `redis.Redis`), oldest first."""
    out: list[tuple[str, TimedEvent]] = []
    for entry_id, fields in redis.xrange(STREAM_PREFIX + session_id, min=f"({after}", count=count):
        raw = fields.get(b"e") or fields.get("e")
        data = json.loads(raw)
        mono = float(data.pop("mono"))
        data.pop("user_id", None)
        key = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        out.append((key, TimedEvent(InputEvent(**data), mono)))
    return out


@dataclass
class TakeoverFolder:
    """Feed events in order; collect finished actions. Call `flush()` when the take-over ends."""

    _mods: set[str] = field(default_factory=set)
    _text: str = ""
    _text_t0: float = 0.0
    _buttons: int = 0
    _press: tuple[float, float, float] | None = None  # x, y, time of the left/right press
    _last_click: tuple[float, float, float] | None = None
    _scroll: RecordedAction | None = None

    def feed(self, timed: TimedEvent) -> list[RecordedAction]:
        if timed.event.kind == "key":
            return self._key(timed.event, timed.mono)
        return self._pointer(timed.event, timed.mono)

    def flush(self) -> list[RecordedAction]:
        out: list[RecordedAction] = []
        if self._scroll is not None:
            out.append(self._scroll)
            self._scroll = None
        if self._text:
            out.append(RecordedAction(Action("type", text=self._text), self._text_t0, self._text_t0))
            self._text = ""
        return out

    # keys ------------------------------------------------------------------------------------

    def _key(self, event: InputEvent, mono: float) -> list[RecordedAction]:
        name = _MODIFIERS.get(event.keysym)
        if name is not None:
            (self._mods.add if event.down else self._mods.discard)(name)
            return []
        if not event.down:
            return []
        char = _char(event.keysym)
        combo = self._mods - {"shift"}
        if combo:
            key = _SPECIAL.get(event.keysym) or (char.lower() if char else None)
            if key is None:
                return []
            keys = (*sorted(combo, key=["ctrl", "alt", "super", "altgr"].index), key)
            return [*self.flush(), RecordedAction(Action("hotkey", keys=keys), mono, mono)]
        if event.keysym in _ENTER:
            self._start_text(mono)
            self._text += "\n"
            return self.flush()
        if char is not None:
            out = self._end_scroll()
            self._start_text(mono)
            self._text += char
            return out
        special = _SPECIAL.get(event.keysym)
        if special is None:
            return []
        keys = ("shift", special) if "shift" in self._mods else (special,)
        return [*self.flush(), RecordedAction(Action("hotkey", keys=keys), mono, mono)]

    def _start_text(self, mono: float) -> None:
        if not self._text:
            self._text_t0 = mono

    # pointer ---------------------------------------------------------------------------------

    def _pointer(self, event: InputEvent, mono: float) -> list[RecordedAction]:
        pressed = event.buttons & ~self._buttons
        released = self._buttons & ~event.buttons
        self._buttons = event.buttons
        out: list[RecordedAction] = []
        for bit, direction in _WHEEL.items():
            if pressed & (1 << bit):
                out += self._wheel(event, direction, mono)
        if pressed & 0b101:  # left or right pressed: typing and scrolling end here
            out += self.flush()
            self._press = (event.x, event.y, mono)
        if released & 0b001 and self._press is not None:
            out.append(self._left_release(event, mono))
        elif released & 0b100 and self._press is not None:
            out.append(
                RecordedAction(Action("right_single", point=Point(event.x, event.y)), self._press[2], mono)
            )
            self._press = None
        return out

    def _left_release(self, event: InputEvent, mono: float) -> RecordedAction:
        assert self._press is not None
        x0, y0, t0 = self._press
        self._press = None
        if math.dist((x0, y0), (event.x, event.y)) > DRAG_MIN_PX:
            self._last_click = None
            drag = Action("drag", point=Point(x0, y0), end_point=Point(event.x, event.y))
            return RecordedAction(drag, t0, mono)
        last = self._last_click
        if (
            last is not None
            and t0 - last[2] <= DOUBLE_CLICK_S
            and math.dist(last[:2], (x0, y0)) <= DRAG_MIN_PX
        ):
            self._last_click = None
            return RecordedAction(
                Action("left_double", point=Point(x0, y0)), last[2], mono, merges_previous=True
            )
        self._last_click = (x0, y0, mono)
        return RecordedAction(Action("click", point=Point(x0, y0)), t0, mono)

    def _wheel(self, event: InputEvent, direction: str, mono: float) -> list[RecordedAction]:
        current = self._scroll
        if (
            current is not None
            and current.action.direction == direction
            and mono - current.t_end <= SCROLL_BURST_S
        ):
            current.count += 1
            current.t_end = mono
            return []
        out = [*self.flush()]
        scroll = Action("scroll", point=Point(event.x, event.y), direction=direction)
        self._scroll = RecordedAction(scroll, mono, mono)
        return out

    def _end_scroll(self) -> list[RecordedAction]:
        if self._scroll is None:
            return []
        done, self._scroll = self._scroll, None
        return [done]


def _char(keysym: int) -> str | None:
    """The printable character of a keysym (Latin-1 or Unicode keysyms), else None."""
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:
        return chr(keysym)
    if 0x01000100 <= keysym <= 0x0110FFFF:
        return chr(keysym - 0x01000000)
    return None
