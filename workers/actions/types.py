"""The canonical action model shared by the grammar, the environments, the policies and annotation.

Coordinates inside an `Action` are in whatever convention the text used; `Convention` names it and
`workers.actions.coords` converts between conventions and screen pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, get_args


class Convention(StrEnum):
    """How a model's coordinates map to the screen (SPEC §4)."""

    RELATIVE_1000 = "relative_1000"  # UI-TARS 1.0 / point form: 0..1000 on both axes
    RELATIVE_999 = "relative_999"  # MAI-UI: 0..999
    ABSOLUTE_RESIZED = "absolute_resized"  # UI-TARS 1.5 / Qwen2.5-VL: pixels of the smart_resize'd image
    SCREEN = "screen"  # raw screen pixels


ComputerKind = Literal[
    "click",
    "left_double",
    "right_single",
    "drag",
    "hotkey",
    "type",
    "scroll",
    "wait",
    "finished",
    "call_user",
    "hover",
]
MobileKind = Literal["long_press", "open_app", "press_home", "press_back", "swipe"]
ToolKind = Literal["answer", "ask_user", "mcp_call", "api_call"]  # MAI-UI / tools
ActionKind = Literal[ComputerKind, MobileKind, ToolKind]

COMPUTER_KINDS: frozenset[str] = frozenset(get_args(ComputerKind))
POINTER_KINDS: frozenset[str] = frozenset(
    {"click", "left_double", "right_single", "hover", "long_press", "scroll", "drag", "swipe"}
)
TERMINAL_KINDS: frozenset[str] = frozenset({"finished", "call_user", "answer", "ask_user"})
# The terminal kinds that give the task up: OSWorld's FAIL (its UI-TARS agent sends FAIL for
# call_user), which scores an infeasible task 1 and any other task 0. The others are its DONE.
GIVE_UP_KINDS: frozenset[str] = frozenset({"call_user", "ask_user"})
# What a computer env carries out as input: the computer kinds less those that end the episode.
INPUT_KINDS: frozenset[str] = COMPUTER_KINDS - TERMINAL_KINDS


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class Action:
    """One executable action.

    - pointer kinds carry `point`; `drag`/`swipe` also carry `end_point`.
    - `type` carries `text` (a trailing "\\n" means press Enter); `finished`, `answer`, `ask_user`,
      `call_user` may carry `text`; `open_app` carries the app name in `text`.
    - `hotkey` carries `keys`, e.g. ("ctrl", "c").
    - `scroll` carries `direction` in {"up", "down", "left", "right"}; `swipe` may carry it instead of
      an end point.
    - `mcp_call` / `api_call` carry `name` and JSON-serialisable `arguments`.
    """

    kind: ActionKind
    point: Point | None = None
    end_point: Point | None = None
    text: str | None = None
    keys: tuple[str, ...] | None = None
    direction: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = field(default=None, hash=False)

    def to_json(self) -> dict[str, Any]:
        """A plain dict for storage (Step.action); `from_json` reverses it."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.point is not None:
            out["point"] = [self.point.x, self.point.y]
        if self.end_point is not None:
            out["end_point"] = [self.end_point.x, self.end_point.y]
        for name in ("text", "direction", "name"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.keys is not None:
            out["keys"] = list(self.keys)
        if self.arguments is not None:
            out["arguments"] = self.arguments
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Action:
        point = data.get("point")
        end = data.get("end_point")
        keys = data.get("keys")
        return cls(
            kind=data["kind"],
            point=Point(float(point[0]), float(point[1])) if point is not None else None,
            end_point=Point(float(end[0]), float(end[1])) if end is not None else None,
            text=data.get("text"),
            keys=tuple(keys) if keys is not None else None,
            direction=data.get("direction"),
            name=data.get("name"),
            arguments=data.get("arguments"),
        )


@dataclass(frozen=True)
class ParseError:
    """Why a model response could not be parsed; the raw text is always kept."""

    message: str
    raw: str
    position: int | None = None


@dataclass(frozen=True)
class ParsedResponse:
    """A model response `Thought: ...\\nAction: ...` split into its thought and actions.

    `error` is set (and `actions` may be empty or partial) when the text is malformed; parsing never
    raises.
    """

    raw: str
    thought: str
    actions: tuple[Action, ...]
    error: ParseError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and len(self.actions) > 0
