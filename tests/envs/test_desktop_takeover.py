"""Folding recorded VNC input (take-over) into canonical actions."""

from __future__ import annotations

from workers.actions.types import Action, Point
from workers.envs.vnc.rfb import InputEvent
from workers.envs.vnc.takeover import InputThrottle, RecordedAction, TakeoverFolder, TimedEvent

SHIFT, CTRL, ENTER, BACKSPACE = 0xFFE1, 0xFFE3, 0xFF0D, 0xFF08


def ptr(x: int, y: int, buttons: int, t: float) -> TimedEvent:
    return TimedEvent(InputEvent("pointer", x=x, y=y, buttons=buttons), t)


def key(keysym: int, down: bool, t: float) -> TimedEvent:
    return TimedEvent(InputEvent("key", keysym=keysym, down=down), t)


def typed(text: str, t: float) -> list[TimedEvent]:
    events: list[TimedEvent] = []
    for i, char in enumerate(text):
        upper = char.isupper()
        if upper:
            events.append(key(SHIFT, True, t + i * 0.01))
        events += [key(ord(char), True, t + i * 0.01), key(ord(char), False, t + i * 0.01)]
        if upper:
            events.append(key(SHIFT, False, t + i * 0.01))
    return events


def fold(events: list[TimedEvent]) -> list[RecordedAction]:
    folder = TakeoverFolder()
    out = [a for e in events for a in folder.feed(e)]
    return out + folder.flush()


def actions(events: list[TimedEvent]) -> list[Action]:
    return [r.action for r in fold(events)]


def test_click_double_click_right_click_and_drag() -> None:
    events = [
        ptr(10, 10, 0, 0.0), ptr(100, 50, 1, 0.1), ptr(100, 50, 0, 0.15),  # click
        ptr(300, 300, 1, 2.0), ptr(300, 300, 0, 2.05), ptr(301, 300, 1, 2.2), ptr(301, 300, 0, 2.25),  # double
        ptr(500, 500, 4, 4.0), ptr(500, 500, 0, 4.1),  # right
        ptr(10, 700, 1, 5.0), ptr(200, 650, 1, 5.1), ptr(400, 650, 0, 5.2),  # drag
    ]  # fmt: skip
    recorded = fold(events)
    assert [r.action for r in recorded] == [
        Action("click", point=Point(100, 50)),
        Action("click", point=Point(300, 300)),
        Action("left_double", point=Point(301, 300)),
        Action("right_single", point=Point(500, 500)),
        Action("drag", point=Point(10, 700), end_point=Point(400, 650)),
    ]
    assert recorded[2].merges_previous and not recorded[1].merges_previous
    assert recorded[0].t_start == 0.1 and recorded[0].t_end == 0.15


def test_typing_with_shift_enter_and_special_keys() -> None:
    events = [*typed("Hi there", 1.0), key(ENTER, True, 2.0), key(ENTER, False, 2.0)]
    events += [*typed("ab", 3.0), key(BACKSPACE, True, 3.5), key(BACKSPACE, False, 3.5)]
    assert actions(events) == [
        Action("type", text="Hi there\n"),
        Action("type", text="ab"),
        Action("hotkey", keys=("backspace",)),
    ]


def test_modifier_combos_become_hotkeys_and_unicode_is_typed() -> None:
    events = [key(CTRL, True, 0), key(SHIFT, True, 0), key(ord("T"), True, 0), key(ord("T"), False, 0)]
    events += [key(SHIFT, False, 0), key(CTRL, False, 0), key(0x01000000 + ord("✓"), True, 1)]
    assert actions(events) == [Action("hotkey", keys=("ctrl", "t")), Action("type", text="✓")]


def test_wheel_ticks_merge_into_one_scroll_and_a_click_ends_typing() -> None:
    events = [ptr(600, 400, 16, 0.0), ptr(600, 400, 0, 0.01), ptr(600, 400, 16, 0.1), ptr(600, 400, 0, 0.11)]
    events += [*typed("x", 0.5), ptr(50, 50, 1, 1.0), ptr(50, 50, 0, 1.05)]
    recorded = fold(events)
    assert [r.action for r in recorded] == [
        Action("scroll", point=Point(600, 400), direction="down"),
        Action("type", text="x"),
        Action("click", point=Point(50, 50)),
    ]
    assert recorded[0].count == 2


def test_throttle_keeps_button_changes_and_sampled_drag_path() -> None:
    throttle = InputThrottle()
    moves = [InputEvent("pointer", x=i, y=i, buttons=0) for i in range(50)]
    assert not any(throttle.keep(e, i * 0.001) for i, e in enumerate(moves))
    assert throttle.keep(InputEvent("pointer", x=1, y=1, buttons=1), 1.0)
    assert not throttle.keep(InputEvent("pointer", x=2, y=2, buttons=1), 1.01)
    assert throttle.keep(InputEvent("pointer", x=3, y=3, buttons=1), 1.05)
    assert throttle.keep(InputEvent("pointer", x=3, y=3, buttons=0), 1.06)
    assert throttle.keep(InputEvent("key", keysym=97, down=True), 1.07)
