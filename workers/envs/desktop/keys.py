"""Key names (as models write them: 'ctrl', 'enter', 'pagedown', 'a') and characters to X keysyms."""

from __future__ import annotations

from Xlib import XK

from workers.envs.base import EnvError

# Names models use (UI-TARS hotkeys, pyautogui, OSWorld computer_13) → X keysym names.
_ALIASES: dict[str, str] = {
    "ctrl": "Control_L",
    "control": "Control_L",
    "lctrl": "Control_L",
    "rctrl": "Control_R",
    "shift": "Shift_L",
    "lshift": "Shift_L",
    "rshift": "Shift_R",
    "alt": "Alt_L",
    "lalt": "Alt_L",
    "ralt": "Alt_R",
    "altgr": "ISO_Level3_Shift",
    "super": "Super_L",
    "win": "Super_L",
    "windows": "Super_L",
    "meta": "Super_L",
    "cmd": "Super_L",
    "command": "Super_L",
    "enter": "Return",
    "return": "Return",
    "tab": "Tab",
    "esc": "Escape",
    "escape": "Escape",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "insert": "Insert",
    "space": "space",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "arrowup": "Up",
    "arrowdown": "Down",
    "arrowleft": "Left",
    "arrowright": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pgup": "Prior",
    "pagedown": "Next",
    "pgdn": "Next",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "printscreen": "Print",
    "print": "Print",
    "menu": "Menu",
    "plus": "plus",
    "minus": "minus",
}

_CONTROL_CHARS: dict[str, int] = {
    "\n": XK.string_to_keysym("Return"),
    "\r": XK.string_to_keysym("Return"),
    "\t": XK.string_to_keysym("Tab"),
    "\b": XK.string_to_keysym("BackSpace"),
}


class UnknownKey(EnvError):
    """A key name that maps to no X keysym."""


def char_to_keysym(char: str) -> int:
    """The keysym that types `char`.

    Latin-1 printable characters have keysyms equal to their code point; every other character
    uses X's Unicode keysym range (0x01000000 + code point), which any keycode can be bound to.
    """
    if len(char) != 1:
        raise UnknownKey(f"expected one character, got {char!r}")
    if char in _CONTROL_CHARS:
        return _CONTROL_CHARS[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        raise UnknownKey(f"control character {char!r} cannot be typed")
    if code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


def _keysym(name: str) -> int:
    """python-xlib's lookup (untyped): the keysym number, or NoSymbol."""
    return int(XK.string_to_keysym(name))


def key_to_keysym(name: str) -> int:
    """The keysym for a key name such as 'ctrl', 'F5', 'pagedown', 'a' or '/'."""
    if not name:
        raise UnknownKey("empty key name")
    lowered = name.lower()
    if lowered in _ALIASES:
        return _keysym(_ALIASES[lowered])
    if len(name) == 1:
        # In a hotkey 'ctrl C' means the C key, not shift+c: models are inconsistent about case.
        return char_to_keysym(name.lower() if name.isalpha() else name)
    if lowered.startswith("f") and lowered[1:].isdigit() and 1 <= int(lowered[1:]) <= 24:
        return _keysym(f"F{int(lowered[1:])}")
    keysym = _keysym(name)
    if keysym == XK.NoSymbol:
        keysym = _keysym(name.capitalize())
    if keysym == XK.NoSymbol:
        raise UnknownKey(f"unknown key name {name!r}")
    return keysym


def split_hotkey(keys: tuple[str, ...]) -> list[str]:
    """Normalise hotkey parts: ('ctrl shift t',) and ('ctrl', 'shift', 't') both give 3 keys.

    '+' separators ('ctrl+c') are accepted too; a lone '+' or ' ' stays a key.
    """
    out: list[str] = []
    for part in keys:
        stripped = part.strip()
        if stripped in {"+", ""}:
            out.append(part if part else "space")
            continue
        for piece in stripped.replace("+", " ").split():
            out.append(piece)
    if not out:
        raise UnknownKey("hotkey has no keys")
    return out
