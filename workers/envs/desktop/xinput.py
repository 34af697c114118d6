"""Pointer and keyboard input through the XTEST extension, in-process (≈1 ms per event).

An `xdotool` subprocess costs ≈100 ms per click (SPEC §3), so input goes through one python-xlib
connection per session. Characters without a keycode in the current keymap are typed by binding
their keysym to a spare keycode first (the xdotool technique).
"""

from __future__ import annotations

import time
from collections import OrderedDict

from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import xtest

from workers.envs.base import EnvError
from workers.envs.desktop.keys import char_to_keysym, key_to_keysym, split_hotkey

BUTTON_LEFT = 1
BUTTON_MIDDLE = 2
BUTTON_RIGHT = 3
SCROLL_BUTTONS: dict[str, int] = {"up": 4, "down": 5, "left": 6, "right": 7}


class XInput:
    """Sends synthetic input to one X display. Not thread-safe: one caller per session."""

    def __init__(self, display: Display, width: int, height: int) -> None:
        if not display.has_extension("XTEST"):
            raise EnvError("X server has no XTEST extension")
        self._display = display
        self._width = width
        self._height = height
        self._spare = self._spare_keycodes()
        # keysym → spare keycode currently bound to it, least recently used first.
        self._bound: OrderedDict[int, int] = OrderedDict()
        self._shift = self._keycode_for(XK.string_to_keysym("Shift_L"))

    # pointer ---------------------------------------------------------------------------------

    def move(self, x: float, y: float) -> None:
        """Move the pointer to screen pixel (x, y), clamped to the screen."""
        px = min(max(round(x), 0), self._width - 1)
        py = min(max(round(y), 0), self._height - 1)
        xtest.fake_input(self._display, X.MotionNotify, x=px, y=py)
        self._display.sync()

    def click(self, x: float, y: float, button: int = BUTTON_LEFT, count: int = 1) -> None:
        self.move(x, y)
        for _ in range(count):
            self._button(button)

    def drag(self, x1: float, y1: float, x2: float, y2: float, steps: int = 10) -> None:
        """Press at the start, move in `steps` increments (apps need motion events), release."""
        self.move(x1, y1)
        xtest.fake_input(self._display, X.ButtonPress, BUTTON_LEFT)
        self._display.sync()
        for i in range(1, steps + 1):
            t = i / steps
            self.move(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t)
            time.sleep(0.005)
        xtest.fake_input(self._display, X.ButtonRelease, BUTTON_LEFT)
        self._display.sync()

    def scroll(self, x: float, y: float, direction: str, clicks: int) -> None:
        if direction not in SCROLL_BUTTONS:
            raise EnvError(f"scroll direction must be one of {sorted(SCROLL_BUTTONS)}, got {direction!r}")
        if clicks < 1:
            raise EnvError(f"scroll clicks must be >= 1, got {clicks}")
        self.move(x, y)
        for _ in range(clicks):
            self._button(SCROLL_BUTTONS[direction])

    def pointer(self) -> tuple[int, int]:
        """Where the pointer is now (for tests and take-over recording)."""
        reply = self._display.screen().root.query_pointer()
        return reply.root_x, reply.root_y

    def _button(self, button: int) -> None:
        xtest.fake_input(self._display, X.ButtonPress, button)
        xtest.fake_input(self._display, X.ButtonRelease, button)
        self._display.sync()

    # keyboard --------------------------------------------------------------------------------

    def hotkey(self, keys: tuple[str, ...]) -> None:
        """Press keys in order and release them in reverse ('ctrl shift t')."""
        codes = [self._keycode_for(key_to_keysym(name)) for name in split_hotkey(keys)]
        for code in codes:
            xtest.fake_input(self._display, X.KeyPress, code)
        for code in reversed(codes):
            xtest.fake_input(self._display, X.KeyRelease, code)
        self._display.sync()

    def type_text(self, text: str) -> None:
        """Type `text` character by character; '\\n' presses Enter."""
        for char in text:
            self._type_char(char)
        self._display.sync()

    def _type_char(self, char: str) -> None:
        keysym = char_to_keysym(char)
        code, shifted = self._lookup(keysym)
        if code == 0:
            code, shifted = self._bind_spare(keysym), False
        if shifted:
            xtest.fake_input(self._display, X.KeyPress, self._shift)
        xtest.fake_input(self._display, X.KeyPress, code)
        xtest.fake_input(self._display, X.KeyRelease, code)
        if shifted:
            xtest.fake_input(self._display, X.KeyRelease, self._shift)

    def _lookup(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift) for a keysym on the plain or shifted level; (0, False) if absent."""
        if keysym in self._bound:
            self._bound.move_to_end(keysym)
            return self._bound[keysym], False
        for code, index in self._display.keysym_to_keycodes(keysym):
            if index in (0, 1):
                return code, index == 1
        return 0, False

    def _keycode_for(self, keysym: int) -> int:
        code, _ = self._lookup(keysym)
        if code == 0:
            code = self._bind_spare(keysym)
        return code

    def _bind_spare(self, keysym: int) -> int:
        """Bind `keysym` to a spare keycode (recycling the least recently used one)."""
        if not self._spare:
            raise EnvError(f"no spare keycode to type keysym {keysym:#x}")
        if len(self._bound) < len(self._spare):
            code = self._spare[len(self._bound)]
        else:
            _, code = self._bound.popitem(last=False)
        per_code = self._display.get_keyboard_mapping(code, 1)[0]
        self._display.change_keyboard_mapping(code, [(keysym,) * max(len(per_code), 2)])
        # Clients re-read the keymap on MappingNotify; sync and give them a moment before the press.
        self._display.sync()
        time.sleep(0.01)
        self._bound[keysym] = code
        return code

    def _spare_keycodes(self) -> list[int]:
        first = self._display.display.info.min_keycode
        count = self._display.display.info.max_keycode - first + 1
        mapping = self._display.get_keyboard_mapping(first, count)
        # Keep the highest unused codes: low ones may get meaning from XKB rules later.
        spare = [first + i for i, syms in enumerate(mapping) if not any(syms)]
        return list(reversed(spare))[:16]
