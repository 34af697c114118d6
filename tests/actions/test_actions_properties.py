"""Property tests: a few hundred examples each by default, 100,000 each under `-m slow`.

- the parser never raises, whatever the text;
- parse ∘ format is the identity on valid actions and responses, in every convention;
- coordinate conversions invert each other up to float / one-unit clamping error;
- OSWorld computer_13 and pyautogui conversions round-trip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from action_strategies import (
    API_ACTIONS,
    actions,
    any_text,
    osworld_actions,
    osworld_sequences,
    thoughts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.actions import (
    Action,
    Convention,
    ParsedResponse,
    Point,
    format_action,
    format_response,
    from_computer13,
    from_pyautogui,
    from_screen,
    parse_response,
    smart_resize,
    to_computer13,
    to_pyautogui,
    to_screen,
)
from workers.actions.coords import model_bounds, model_size

FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(
    max_examples=100_000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
CONVENTIONS = st.sampled_from(list(Convention))


def both(check: Callable[..., None], *strategies: st.SearchStrategy[Any]) -> tuple[Any, Any]:
    """A fast default test and a 100,000-example slow test of the same property."""
    fast = FAST(given(*strategies)(check))
    slow = pytest.mark.timeout(3600)(pytest.mark.slow(SLOW(given(*strategies)(check))))
    return fast, slow


# --- parser ------------------------------------------------------------------------------------------


def check_parser_never_raises(text: str, convention: Convention) -> None:
    result = parse_response(text, convention=convention, api_actions=API_ACTIONS)
    assert isinstance(result, ParsedResponse)
    assert result.raw == text
    if result.error is not None:
        assert result.error.raw == text
        assert not result.error.message.startswith("internal"), result.error
        assert result.error.position is None or 0 <= result.error.position <= len(text)
    for action in result.actions:
        format_action(action)  # whatever parses is a valid action


test_parser_never_raises, test_parser_never_raises_slow = both(
    check_parser_never_raises, any_text(), CONVENTIONS
)


@st.composite
def convention_and_actions(draw: st.DrawFn) -> tuple[Convention, str, list[Action]]:
    convention = draw(CONVENTIONS)
    return convention, draw(thoughts()), draw(st.lists(actions(convention), min_size=1, max_size=4))


def check_round_trip(case: tuple[Convention, str, list[Action]]) -> None:
    convention, thought, acts = case
    for action in acts:
        single = parse_response(format_action(action), convention=convention, api_actions=API_ACTIONS)
        assert single.error is None and single.actions == (action,), (format_action(action), single)
    text = format_response(thought, acts)
    result = parse_response(text, convention=convention, api_actions=API_ACTIONS)
    assert result.error is None, (text, result.error)
    assert result.thought == thought
    assert result.actions == tuple(acts)


test_round_trip, test_round_trip_slow = both(check_round_trip, convention_and_actions())


# --- coordinates -----------------------------------------------------------------------------------------


@st.composite
def geometry(draw: st.DrawFn) -> tuple[Convention, int, int, int | None, int | None]:
    convention = draw(CONVENTIONS)
    screen_w = draw(st.integers(min_value=16, max_value=4000))
    screen_h = draw(
        st.integers(min_value=max(16, math.ceil(screen_w / 200)), max_value=min(4000, screen_w * 200))
    )
    model_w = model_h = None
    if convention == Convention.ABSOLUTE_RESIZED and draw(st.booleans()):
        model_w, model_h = draw(st.integers(28, 4000)), draw(st.integers(28, 4000))
    return convention, screen_w, screen_h, model_w, model_h


def check_coordinates_invert(
    case: tuple[Convention, int, int, int | None, int | None], fx: float, fy: float
) -> None:
    convention, screen_w, screen_h, model_w, model_h = case
    extent_w, extent_h = model_size(convention, screen_w, screen_h, model_w, model_h)
    # screen → model → screen: within float error, or one model unit where the model grid is coarser
    screen = Point(fx * (screen_w - 1), fy * (screen_h - 1))
    model = from_screen(screen, convention, screen_w, screen_h, model_w, model_h)
    assert not model.clamped
    back = to_screen(model.point, convention, screen_w, screen_h, model_w, model_h)
    assert not back.clamped
    assert abs(back.point.x - screen.x) <= 1e-6 * screen_w + screen_w / extent_w
    assert abs(back.point.y - screen.y) <= 1e-6 * screen_h + screen_h / extent_h
    # model → screen → model: exact up to float error whenever neither side needed clamping
    inside = Point(fx * extent_w, fy * extent_h)
    there = to_screen(inside, convention, screen_w, screen_h, model_w, model_h)
    assert not there.clamped
    assert 0 <= there.point.x <= screen_w - 1 and 0 <= there.point.y <= screen_h - 1
    raw_x, raw_y = inside.x * screen_w / extent_w, inside.y * screen_h / extent_h
    bound_x, bound_y = model_bounds(convention, extent_w, extent_h)
    if raw_x <= screen_w - 1 and raw_y <= screen_h - 1 and inside.x <= bound_x and inside.y <= bound_y:
        again = from_screen(there.point, convention, screen_w, screen_h, model_w, model_h).point
        assert math.isclose(again.x, inside.x, rel_tol=1e-9, abs_tol=1e-6)
        assert math.isclose(again.y, inside.y, rel_tol=1e-9, abs_tol=1e-6)
    # far outside: clamped onto the screen and reported
    outside = to_screen(
        Point(extent_w * (2 + fx), inside.y), convention, screen_w, screen_h, model_w, model_h
    )
    assert outside.clamped and outside.point.x == screen_w - 1


unit = st.floats(min_value=0, max_value=1)
test_coordinates_invert, test_coordinates_invert_slow = both(check_coordinates_invert, geometry(), unit, unit)


def check_smart_resize(height: int, width: int) -> None:
    if max(height, width) / min(height, width) > 200:
        with pytest.raises(ValueError):
            smart_resize(height, width)
        return
    h, w = smart_resize(height, width)
    assert h % 28 == 0 and w % 28 == 0 and h >= 28 and w >= 28
    assert 100 * 28 * 28 <= h * w <= 16384 * 28 * 28 or min(height, width) < 14


sides = st.integers(min_value=1, max_value=30_000)
test_smart_resize_contract, test_smart_resize_contract_slow = both(check_smart_resize, sides, sides)


@pytest.mark.slow
def test_smart_resize_matches_transformers_reference() -> None:
    """transformers' Qwen2-VL copy differs only for sides of 14 px or less (it lacks max(factor, ...))."""
    reference = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl").smart_resize
    for height in range(15, 4000, 7):
        for width in range(max(15, height // 200 + 1), min(30_000, height * 200), 397):
            assert smart_resize(height, width) == reference(height, width, 28, 100 * 28 * 28, 16384 * 28 * 28)


# --- OSWorld ---------------------------------------------------------------------------------------------


def check_osworld_round_trip(sequence: list[Action]) -> None:
    dicts = to_computer13(sequence)
    assert dicts.ok, dicts.error
    assert from_computer13(dicts.value).value == tuple(sequence)
    code = to_pyautogui(sequence)
    assert code.ok, code.error
    assert from_pyautogui(code.value).value == tuple(sequence)
    assert from_pyautogui("\n".join(c for c in code.value if c not in ("WAIT", "DONE", "FAIL"))).error is None


test_osworld_round_trip, test_osworld_round_trip_slow = both(check_osworld_round_trip, osworld_sequences())


def check_osworld_single(action: Action) -> None:
    assert from_computer13(to_computer13(action).value).value == (action,)
    assert from_pyautogui(to_pyautogui(action).value).value == (action,)


test_osworld_single, test_osworld_single_slow = both(check_osworld_single, osworld_actions())

_param_values = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-10, max_value=5000)
    | st.floats()
    | st.text(max_size=6)
    | st.lists(st.text(max_size=3) | st.integers(-2, 2), max_size=3)
)
_dicts = st.builds(
    lambda action_type, parameters: {"action_type": action_type, "parameters": parameters},
    st.sampled_from(
        ["CLICK", "MOVE_TO", "DRAG_TO", "SCROLL", "TYPING", "PRESS", "HOTKEY", "KEY_DOWN", "KEY_UP"]
    )
    | st.sampled_from(["MOUSE_DOWN", "MOUSE_UP", "DOUBLE_CLICK", "RIGHT_CLICK", "WAIT", "DONE", "X"]),
    st.dictionaries(
        st.sampled_from(["x", "y", "dx", "dy", "button", "num_clicks", "key", "keys", "text"]),
        _param_values,
        max_size=3,
    ),
)
_items = _dicts | st.sampled_from(["WAIT", "DONE", "FAIL", "JUMP"]) | _param_values
_code = st.sampled_from(
    [
        "pyautogui.click(",
        "pyautogui.moveTo(",
        "pyautogui.dragTo(",
        "pyautogui.scroll(",
        "pyautogui.hotkey(",
        "pyautogui.press(",
        "pyautogui.write(",
        "pyperclip.copy(",
        "time.sleep(",
        "WAIT",
        "x",
        "1",
        "'a'",
        ")",
        ",",
        "\n",
        " ",
        "=",
        "(",
        "[",
        "]",
        "-",
        "x=",
        "button='right'",
    ]
)


def check_osworld_readers_never_raise(items: list[Any], snippets: list[str], text: str) -> None:
    assert from_computer13(items) is not None
    assert from_pyautogui("".join(snippets)) is not None
    assert from_pyautogui(text) is not None


test_osworld_readers_never_raise, test_osworld_readers_never_raise_slow = both(
    check_osworld_readers_never_raise,
    st.lists(_items, max_size=5),
    st.lists(_code, max_size=20),
    st.text(max_size=60),
)
