"""smart_resize and the coordinate conventions."""

from __future__ import annotations

import pytest

from workers.actions import (
    Action,
    Convention,
    Point,
    action_from_screen,
    action_to_screen,
    from_screen,
    smart_resize,
    to_screen,
)
from workers.actions.coords import model_size


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((1080, 1920), (1092, 1932)),  # full HD: round each side to a multiple of 28
        ((800, 1280), (812, 1288)),  # this project's Xvfb desktops
        ((839, 412), (840, 420)),  # Pixel 7 viewport
        ((210, 160), (336, 252)),  # MiniWoB task area: scaled up to reach min_pixels
        ((28, 28), (280, 280)),
        ((4320, 7680), (2688, 4760)),  # 8K: beta = 45/28, floor to multiples of 28 under max_pixels
        ((10, 2000), (28, 3976)),  # thin strip: the short side stays at the factor, scaled up
    ],
)
def test_smart_resize_known_values(size: tuple[int, int], expected: tuple[int, int]) -> None:
    assert smart_resize(*size) == expected


def test_smart_resize_keeps_its_contract_on_a_grid() -> None:
    for height in range(28, 3000, 97):
        for width in range(28, 3000, 89):
            h, w = smart_resize(height, width)
            assert h % 28 == 0 and w % 28 == 0
            assert 100 * 28 * 28 <= h * w <= 16384 * 28 * 28


def test_smart_resize_custom_limits() -> None:
    assert smart_resize(1080, 1920, max_pixels=1280 * 28 * 28) == (728, 1316)
    assert smart_resize(100, 100, factor=14, min_pixels=56 * 56) == (98, 98)


@pytest.mark.parametrize("size", [(0, 100), (100, -1), (1, 201)])
def test_smart_resize_rejects_bad_sizes(size: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        smart_resize(*size)


def test_relative_1000() -> None:
    assert to_screen(Point(500, 500), Convention.RELATIVE_1000, 1280, 800) == (Point(640, 400), False)
    assert from_screen(Point(640, 400), Convention.RELATIVE_1000, 1280, 800) == (Point(500, 500), False)


def test_relative_999() -> None:
    mapped = to_screen(Point(999, 0), Convention.RELATIVE_999, 1000, 1000)
    assert mapped.point == Point(999, 0) and not mapped.clamped  # the far edge lands on the last pixel
    assert from_screen(Point(500, 500), Convention.RELATIVE_999, 1000, 1000).point == Point(499.5, 499.5)


def test_absolute_resized_uses_smart_resize_by_default() -> None:
    assert model_size(Convention.ABSOLUTE_RESIZED, 1920, 1080) == (1932, 1092)
    mapped = to_screen(Point(966, 546), Convention.ABSOLUTE_RESIZED, 1920, 1080)
    assert mapped.point == Point(960, 540) and not mapped.clamped
    given = to_screen(Point(50, 50), Convention.ABSOLUTE_RESIZED, 200, 100, model_w=100, model_h=100)
    assert given.point == Point(100, 50)


def test_screen_is_identity() -> None:
    assert to_screen(Point(12.5, 7), Convention.SCREEN, 100, 100) == (Point(12.5, 7), False)


def test_off_screen_points_are_clamped_and_reported() -> None:
    mapped = to_screen(Point(1500, 1200), Convention.ABSOLUTE_RESIZED, 1280, 800)
    assert mapped.clamped and mapped.point == Point(1279, 799)
    back = from_screen(Point(-10, 5000), Convention.RELATIVE_1000, 1280, 800)
    assert back.clamped and back.point == Point(0, 1000)


def test_far_edge_of_the_model_range_is_not_reported() -> None:
    mapped = to_screen(Point(1000, 1000), Convention.RELATIVE_1000, 1280, 800)
    assert mapped == (Point(1279, 799), False)
    resized = to_screen(Point(1288, 812), Convention.ABSOLUTE_RESIZED, 1280, 800)
    assert resized == (Point(1279, 799), False)
    beyond = to_screen(Point(1281.5, 10), Convention.SCREEN, 1280, 800)
    assert beyond == (Point(1279, 10), True)


def test_bad_inputs_raise_value_error() -> None:
    with pytest.raises(ValueError):
        to_screen(Point(1, 1), Convention.SCREEN, 0, 100)
    with pytest.raises(ValueError):
        to_screen(Point(float("inf"), 1), Convention.SCREEN, 10, 10)


def test_action_to_screen_converts_and_rounds_every_point() -> None:
    drag = Action(kind="drag", point=Point(100, 100), end_point=Point(900, 900))
    result = action_to_screen(drag, Convention.RELATIVE_1000, 1281, 801)
    assert result.action == Action(kind="drag", point=Point(128, 80), end_point=Point(1153, 721))
    assert not result.clamped
    assert action_to_screen(Action(kind="wait"), Convention.RELATIVE_1000, 10, 10) == (
        Action(kind="wait"),
        False,
    )
    off = action_to_screen(Action(kind="click", point=Point(2000, 10)), Convention.SCREEN, 1280, 800)
    assert off.clamped and off.action.point == Point(1279, 10)
    exact = action_to_screen(
        Action(kind="hover", point=Point(1, 1)), Convention.RELATIVE_1000, 1280, 800, round_pixels=False
    )
    assert exact.action.point == Point(1.28, 0.8)


def test_action_from_screen_for_annotator_clicks() -> None:
    click = Action(kind="click", point=Point(640, 400))
    assert action_from_screen(click, Convention.RELATIVE_1000, 1280, 800).action.point == Point(500, 500)
    model = action_from_screen(click, Convention.ABSOLUTE_RESIZED, 1280, 800).action.point
    assert model == Point(644, 406)  # 640 · 1288/1280, 400 · 812/800


def test_model_image_smaller_than_the_screen() -> None:
    # 32 px of screen on a 28 px model image: the last screen pixel maps past the last model pixel
    # by less than one unit, so it is clamped onto it without being reported.
    mapped = from_screen(Point(31, 0), Convention.ABSOLUTE_RESIZED, 32, 16, model_w=28, model_h=28)
    assert mapped == (Point(27, 0), False)
