"""The UI-TARS-family action grammar (SPEC §4): types, parsing, serialising, coordinate conventions."""

from workers.actions.coords import (
    Mapped,
    ScreenAction,
    action_from_screen,
    action_to_screen,
    from_screen,
    smart_resize,
    to_screen,
)
from workers.actions.osworld import ConversionError, ConversionResult, from_computer13, to_computer13
from workers.actions.parse import ApiActionSpec, parse_response
from workers.actions.pyautogui_code import from_pyautogui, to_pyautogui
from workers.actions.serialize import check_action, format_action, format_response
from workers.actions.types import Action, Convention, ParsedResponse, ParseError, Point

__all__ = [
    "Action",
    "ApiActionSpec",
    "Convention",
    "ConversionError",
    "ConversionResult",
    "Mapped",
    "ParseError",
    "ParsedResponse",
    "Point",
    "ScreenAction",
    "action_from_screen",
    "action_to_screen",
    "check_action",
    "format_action",
    "format_response",
    "from_computer13",
    "from_pyautogui",
    "from_screen",
    "parse_response",
    "smart_resize",
    "to_computer13",
    "to_pyautogui",
    "to_screen",
]
