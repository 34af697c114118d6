"""Coordinate conventions (SPEC §4): model coordinates ↔ screen pixels.

| convention        | model range           | screen x                      |
|-------------------|-----------------------|-------------------------------|
| RELATIVE_1000     | 0..1000               | x / 1000 · screen_w           |
| RELATIVE_999      | 0..999                | x / 999 · screen_w            |
| ABSOLUTE_RESIZED  | 0..model_w − 1        | x / model_w · screen_w        |
| SCREEN            | 0..screen_w − 1       | x                             |

For ABSOLUTE_RESIZED the model saw the screenshot resized by Qwen2.5-VL's `smart_resize` unless
`model_w`/`model_h` say otherwise. Results are clamped into the target range (screen pixels
0..screen_w − 1) and say whether that moved the point by more than one unit, so an off-screen click
is reported, never executed silently. The far edge of a model range (1000, or model_w) maps to
screen_w, one pixel past the last one; landing on that last pixel is not reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

from workers.actions.types import Action, Convention, Point

IMAGE_FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
MAX_RATIO = 200
_CLAMP_TOLERANCE = 1.0 + 1e-9  # the far edge of a model range maps one pixel past the last one


def smart_resize(
    height: int,
    width: int,
    factor: int = IMAGE_FACTOR,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
) -> tuple[int, int]:
    """The (height, width) Qwen2.5-VL resizes an image to (qwen_vl_utils, as UI-TARS 1.5 uses it).

    Both sides become multiples of `factor`, the pixel count lands in [min_pixels, max_pixels], and
    the aspect ratio is kept as closely as possible. Raises ValueError for non-positive sides or an
    aspect ratio above 200, as the reference does.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image sides must be positive, got {height}x{width}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"absolute aspect ratio must be smaller than {MAX_RATIO}, got {height}x{width}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class Mapped(NamedTuple):
    """A converted point and whether clamping moved it by more than one unit."""

    point: Point
    clamped: bool


class ScreenAction(NamedTuple):
    action: Action
    clamped: bool


def model_size(
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
) -> tuple[float, float]:
    """The extent (width, height) of the model's coordinate space: scale = screen / extent."""
    if screen_w <= 0 or screen_h <= 0:
        raise ValueError(f"screen size must be positive, got {screen_w}x{screen_h}")
    if convention == Convention.RELATIVE_1000:
        return 1000.0, 1000.0
    if convention == Convention.RELATIVE_999:
        return 999.0, 999.0
    if convention == Convention.SCREEN:
        return float(screen_w), float(screen_h)
    if convention == Convention.ABSOLUTE_RESIZED:
        if model_w is None or model_h is None:
            resized_h, resized_w = smart_resize(screen_h, screen_w)
            model_w = model_w if model_w is not None else resized_w
            model_h = model_h if model_h is not None else resized_h
        if model_w <= 0 or model_h <= 0:
            raise ValueError(f"model image size must be positive, got {model_w}x{model_h}")
        return float(model_w), float(model_h)
    raise ValueError(f"unknown convention {convention!r}")


def model_bounds(convention: Convention, extent_w: float, extent_h: float) -> tuple[float, float]:
    """Largest valid model coordinate: relative grids include their end, pixel grids stop one short."""
    if convention in (Convention.RELATIVE_1000, Convention.RELATIVE_999):
        return extent_w, extent_h
    return extent_w - 1, extent_h - 1


def _clamp(x: float, y: float, max_x: float, max_y: float) -> Mapped:
    cx = min(max(x, 0.0), max(max_x, 0.0))
    cy = min(max(y, 0.0), max(max_y, 0.0))
    moved = abs(cx - x) > _CLAMP_TOLERANCE or abs(cy - y) > _CLAMP_TOLERANCE
    return Mapped(Point(cx, cy), moved)


def to_screen(
    point: Point,
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
) -> Mapped:
    """Model coordinates → screen pixels (floats), clamped into [0, screen_w−1] × [0, screen_h−1].

    Raises ValueError for non-positive sizes or non-finite coordinates (parsing never yields those).
    """
    _require_finite(point)
    extent_w, extent_h = model_size(convention, screen_w, screen_h, model_w, model_h)
    x = point.x * screen_w / extent_w
    y = point.y * screen_h / extent_h
    return _clamp(x, y, screen_w - 1, screen_h - 1)


def from_screen(
    point: Point,
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
) -> Mapped:
    """Screen pixels → model coordinates (floats), clamped into the convention's range.

    The inverse of `to_screen` for points inside both ranges (up to float rounding).
    """
    _require_finite(point)
    extent_w, extent_h = model_size(convention, screen_w, screen_h, model_w, model_h)
    x = point.x * extent_w / screen_w
    y = point.y * extent_h / screen_h
    return _clamp(x, y, *model_bounds(convention, extent_w, extent_h))


def _require_finite(point: Point) -> None:
    if not (math.isfinite(point.x) and math.isfinite(point.y)):
        raise ValueError(f"coordinates must be finite, got {point}")


def action_to_screen(
    action: Action,
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
    *,
    round_pixels: bool = True,
) -> ScreenAction:
    """`action` with every point in screen pixels (rounded to whole pixels unless told otherwise)."""

    def convert(point: Point) -> Mapped:
        return to_screen(point, convention, screen_w, screen_h, model_w, model_h)

    return _map_points(action, convert, round_pixels)


def screen_actions(
    actions: list[dict[str, Any]],
    convention: str | None,
    width: int | None,
    height: int | None,
    model_w: int | None = None,
    model_h: int | None = None,
) -> list[dict[str, Any]]:
    """Stored actions (Action JSON in `convention`, as a Step keeps them) with their points in screen
    pixels: what was executed. Without a convention or a screen size, or in an unknown convention,
    the actions are taken as screen pixels already."""
    if not width or not height or not convention or convention == Convention.SCREEN:
        return actions
    try:
        conv = Convention(convention)
    except ValueError:
        return actions
    return [
        action_to_screen(Action.from_json(a), conv, width, height, model_w, model_h).action.to_json()
        for a in actions
    ]  # fmt: skip


def action_from_screen(
    action: Action,
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
    *,
    round_coordinates: bool = True,
) -> ScreenAction:
    """`action` (in screen pixels, e.g. an annotator's click) in the model's convention.

    Rounded to whole model units by default, since models read and write integers.
    """

    def convert(point: Point) -> Mapped:
        return from_screen(point, convention, screen_w, screen_h, model_w, model_h)

    return _map_points(action, convert, round_coordinates)


def _map_points(action: Action, convert: Callable[[Point], Mapped], round_result: bool) -> ScreenAction:
    clamped = False

    def one(point: Point | None) -> Point | None:
        nonlocal clamped
        if point is None:
            return None
        mapped = convert(point)
        clamped = clamped or mapped.clamped
        return _rounded(mapped.point) if round_result else mapped.point

    if action.point is None and action.end_point is None:
        return ScreenAction(action, False)
    converted = replace(action, point=one(action.point), end_point=one(action.end_point))
    return ScreenAction(converted, clamped)


OFF_SCREEN_PREFIX = "off screen:"


def off_screen_error(action: Action, convention: Convention, screen_w: int, screen_h: int) -> str:
    """The message for an action whose point lies outside the screen (it is refused, not clamped)."""
    points = [p for p in (action.point, action.end_point) if p is not None]
    where = ", ".join(f"({p.x:g},{p.y:g})" for p in points)
    return (
        f"{OFF_SCREEN_PREFIX} {action.kind} at {where} in {Convention(convention).value} coordinates lies outside "
        f"the {screen_w}x{screen_h} screen; nothing was executed"
    )


class OffScreen(ValueError):
    """An action points outside the screen; the message is `off_screen_error`'s."""


def actions_on_screen(
    actions: Iterable[Action],
    convention: Convention,
    screen_w: int,
    screen_h: int,
    model_w: int | None = None,
    model_h: int | None = None,
) -> list[Action]:
    """The actions in screen pixels, or OffScreen for the first one with a point outside the screen:
    the one check for actions a person chose (decisions, a reviewer's corrected action), which are
    refused rather than clamped onto the edge."""
    out = []
    for action in actions:
        mapped = action_to_screen(action, convention, screen_w, screen_h, model_w, model_h)
        if mapped.clamped:
            raise OffScreen(off_screen_error(action, convention, screen_w, screen_h))
        out.append(mapped.action)
    return out


def _rounded(point: Point) -> Point:
    # half-up rather than Python's half-to-even, so 0.5 → 1 and 1.5 → 2 alike
    return Point(float(math.floor(point.x + 0.5)), float(math.floor(point.y + 0.5)))
