"""Canonical UI-TARS 1.5 text from actions, and its round trip through the parser."""

from __future__ import annotations

import pytest

from workers.actions import (
    Action,
    ApiActionSpec,
    Point,
    check_action,
    format_action,
    format_response,
    parse_response,
)

CASES = [
    (Action(kind="click", point=Point(640, 400)), "click(start_box='(640,400)')"),
    (Action(kind="click", point=Point(640.0, 400.5)), "click(start_box='(640,400.5)')"),
    (Action(kind="left_double", point=Point(1, 2)), "left_double(start_box='(1,2)')"),
    (Action(kind="right_single", point=Point(1, 2)), "right_single(start_box='(1,2)')"),
    (Action(kind="hover", point=Point(1, 2)), "hover(start_box='(1,2)')"),
    (Action(kind="long_press", point=Point(1, 2)), "long_press(start_box='(1,2)')"),
    (
        Action(kind="drag", point=Point(1, 2), end_point=Point(3, 4)),
        "drag(start_box='(1,2)', end_box='(3,4)')",
    ),
    (Action(kind="hotkey", keys=("ctrl", "c")), "hotkey(key='ctrl c')"),
    (Action(kind="type", text='it\'s "done"\n'), "type(content='it\\'s \"done\"\\n')"),
    (Action(kind="type", text="C:\\tmp"), "type(content='C:\\\\tmp')"),
    (
        Action(kind="scroll", point=Point(5, 6), direction="down"),
        "scroll(start_box='(5,6)', direction='down')",
    ),
    (Action(kind="scroll", direction="up"), "scroll(direction='up')"),
    (Action(kind="wait"), "wait()"),
    (Action(kind="finished"), "finished()"),
    (Action(kind="finished", text="42"), "finished(content='42')"),
    (Action(kind="call_user"), "call_user()"),
    (Action(kind="open_app", text="Maps"), "open_app(app_name='Maps')"),
    (Action(kind="press_home"), "press_home()"),
    (Action(kind="press_back"), "press_back()"),
    (Action(kind="swipe", point=Point(1, 2), direction="up"), "swipe(start_box='(1,2)', direction='up')"),
    (
        Action(kind="swipe", point=Point(1, 2), end_point=Point(1, 9)),
        "swipe(start_box='(1,2)', end_box='(1,9)')",
    ),
    (Action(kind="answer", text="Paris"), "answer(text='Paris')"),
    (Action(kind="ask_user", text="Which one?"), "ask_user(text='Which one?')"),
    (
        Action(kind="mcp_call", name="amap.search", arguments={"q": "café", "n": 3}),
        'mcp_call(name=\'amap.search\', args={"q": "café", "n": 3})',
    ),
    (
        Action(kind="api_call", name="open_url", arguments={"url": "https://x.org/?a='b'", "new_tab": True}),
        "open_url(url='https://x.org/?a=\\'b\\'', new_tab=true)",
    ),
]
REGISTRY = {"open_url": ApiActionSpec(params=("url", "new_tab"))}


@pytest.mark.parametrize(("action", "text"), CASES)
def test_canonical_text(action: Action, text: str) -> None:
    assert format_action(action) == text


@pytest.mark.parametrize(("action", "text"), CASES)
def test_round_trip(action: Action, text: str) -> None:
    result = parse_response(f"Action: {text}", api_actions=REGISTRY)
    assert result.error is None and result.actions == (action,)


def test_format_response_round_trip_with_thought() -> None:
    actions = [Action(kind="click", point=Point(10, 20)), Action(kind="type", text="hello\n")]
    text = format_response("  I will log in.\nFirst the field.  ", actions)
    assert (
        text
        == "Thought: I will log in.\nFirst the field.\nAction: click(start_box='(10,20)')\n\ntype(content='hello\\n')"
    )
    parsed = parse_response(text)
    assert parsed.thought == "I will log in.\nFirst the field."
    assert parsed.actions == tuple(actions)


def test_format_response_without_thought() -> None:
    assert format_response("", [Action(kind="wait")]) == "Action: wait()"


def test_whole_floats_and_ints_print_alike() -> None:
    assert format_action(Action(kind="click", point=Point(3.0, 4))) == "click(start_box='(3,4)')"
    assert format_action(Action(kind="click", point=Point(0.1, 1e-7))) == "click(start_box='(0.1,1e-07)')"
    assert parse_response("Action: click(start_box='(0.1,1e-07)')").actions[0].point == Point(0.1, 1e-7)


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        (Action(kind="click"), "needs point"),
        (Action(kind="click", point=Point(-1, 2)), "bad coordinates"),
        (Action(kind="click", point=Point(float("nan"), 2)), "bad coordinates"),
        (Action(kind="click", point=Point(1, 2), text="x"), "does not take text"),
        (Action(kind="type", text=""), "non-empty text"),
        (Action(kind="hotkey", keys=()), "keys must be"),
        (Action(kind="hotkey", keys=("ctrl c",)), "keys must be"),
        (Action(kind="hotkey", keys=("ctrl+c",)), "keys must be"),
        (Action(kind="scroll", direction="sideways"), "bad direction"),
        (Action(kind="swipe", point=Point(1, 1)), "end_point or a direction"),
        (Action(kind="swipe", end_point=Point(1, 1)), "needs a point"),
        (Action(kind="mcp_call", name=""), "needs a name"),
        (Action(kind="mcp_call", name="x", arguments={"a": float("nan")}), "JSON"),
        (Action(kind="api_call", name="click", arguments={}), "not a built-in"),
        (Action(kind="api_call", name="go"), "must be a dict"),
        (Action(kind="api_call", name="go", arguments={"not an id": 1}), "identifiers"),
        (Action(kind="teleport"), "unknown action kind"),  # type: ignore[arg-type]
    ],
)
def test_invalid_actions_are_refused(action: Action, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        check_action(action)
    with pytest.raises(ValueError):
        format_action(action)


def test_format_response_refuses_ambiguous_thoughts_and_no_actions() -> None:
    with pytest.raises(ValueError, match="Action:"):
        format_response("first\nAction: sneaky", [Action(kind="wait")])
    with pytest.raises(ValueError, match="at least one"):
        format_response("t", [])
