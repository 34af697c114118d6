"""OSWorld computer_13 dicts and pyautogui code ↔ actions."""

from __future__ import annotations

import warnings

import pytest

from workers.actions import Action, Point, from_computer13, from_pyautogui, to_computer13, to_pyautogui

CLICK = Action(kind="click", point=Point(640, 400))


# --- computer_13 ------------------------------------------------------------------------------------


def test_to_computer13_each_kind() -> None:
    result = to_computer13(
        [
            CLICK,
            Action(kind="left_double", point=Point(1, 2)),
            Action(kind="right_single", point=Point(3, 4)),
            Action(kind="hover", point=Point(5, 6.5)),
            Action(kind="drag", point=Point(10, 20), end_point=Point(30, 40)),
            Action(kind="scroll", point=Point(7, 8), direction="down"),
            Action(kind="scroll", direction="left"),
            Action(kind="type", text="hi\n"),
            Action(kind="hotkey", keys=("enter",)),
            Action(kind="hotkey", keys=("ctrl", "Shift", "arrowleft")),
            Action(kind="hotkey", keys=("space",)),
            Action(kind="wait"),
            Action(kind="finished", text="dropped"),
            Action(kind="call_user"),
        ]
    )
    assert result.ok
    assert result.value == [
        {"action_type": "CLICK", "parameters": {"button": "left", "num_clicks": 1, "x": 640, "y": 400}},
        {"action_type": "DOUBLE_CLICK", "parameters": {"x": 1, "y": 2}},
        {"action_type": "RIGHT_CLICK", "parameters": {"x": 3, "y": 4}},
        {"action_type": "MOVE_TO", "parameters": {"x": 5, "y": 6.5}},
        {"action_type": "MOVE_TO", "parameters": {"x": 10, "y": 20}},
        {"action_type": "DRAG_TO", "parameters": {"x": 30, "y": 40}},
        {"action_type": "MOVE_TO", "parameters": {"x": 7, "y": 8}},
        {"action_type": "SCROLL", "parameters": {"dx": 0, "dy": -5}},
        {"action_type": "SCROLL", "parameters": {"dx": -5, "dy": 0}},
        {"action_type": "TYPING", "parameters": {"text": "hi\n"}},
        {"action_type": "PRESS", "parameters": {"key": "enter"}},
        {"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "shift", "left"]}},
        {"action_type": "PRESS", "parameters": {"key": " "}},
        {"action_type": "WAIT", "parameters": {}},
        {"action_type": "DONE", "parameters": {}},
        {"action_type": "FAIL", "parameters": {}},
    ]
    assert isinstance(result.value[0]["parameters"]["x"], int)


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        (Action(kind="open_app", text="Maps"), "no computer_13 equivalent"),
        (Action(kind="mcp_call", name="x"), "no computer_13 equivalent"),
        (Action(kind="hotkey", keys=("hyperdrive",)), "unknown key"),
        (Action(kind="click"), "needs a point"),
        (Action(kind="click", point=Point(-3, 1)), "bad screen coordinates"),
    ],
)
def test_to_computer13_unsupported(action: Action, fragment: str) -> None:
    result = to_computer13([CLICK, action, CLICK])
    assert result.error is not None and fragment in result.error.message
    assert result.error.index == 1
    assert len(result.value) == 1  # what converted before the error


def test_from_computer13_patterns_and_cursor() -> None:
    items = [
        {"action_type": "MOVE_TO", "parameters": {"x": 10, "y": 20}},
        {"action_type": "CLICK", "parameters": {}},
        {"action_type": "CLICK", "parameters": {"button": "right"}},
        {"action_type": "DOUBLE_CLICK", "parameters": {}},
        {"action_type": "CLICK", "parameters": {"x": 5, "y": 5, "num_clicks": 2}},
        {"action_type": "DRAG_TO", "parameters": {"x": 50, "y": 60}},
        {"action_type": "MOUSE_DOWN", "parameters": {"button": "left"}},
        {"action_type": "MOVE_TO", "parameters": {"x": 70, "y": 80}},
        {"action_type": "MOUSE_UP", "parameters": {}},
        {"action_type": "SCROLL", "parameters": {"dx": 0, "dy": 3}},
        {"action_type": "TYPING", "parameters": {"text": "abc"}},
        {"action_type": "KEY_DOWN", "parameters": {"key": "ctrl"}},
        {"action_type": "KEY_DOWN", "parameters": {"key": "c"}},
        {"action_type": "KEY_UP", "parameters": {"key": "c"}},
        {"action_type": "KEY_UP", "parameters": {"key": "ctrl"}},
        {"action_type": "PRESS", "key": " "},  # flat parameters are accepted too
        "WAIT",
        "DONE",
    ]
    result = from_computer13(items)
    assert result.error is None, result.error
    assert result.value == (
        Action(kind="click", point=Point(10, 20)),
        Action(kind="right_single", point=Point(10, 20)),
        Action(kind="left_double", point=Point(10, 20)),
        Action(kind="left_double", point=Point(5, 5)),
        Action(kind="drag", point=Point(5, 5), end_point=Point(50, 60)),
        Action(kind="drag", point=Point(50, 60), end_point=Point(70, 80)),
        Action(kind="scroll", direction="up"),
        Action(kind="type", text="abc"),
        Action(kind="hotkey", keys=("ctrl", "c")),
        Action(kind="hotkey", keys=("space",)),
        Action(kind="wait"),
        Action(kind="finished"),
    )


def test_from_computer13_move_mouse_down_move_up_is_a_drag() -> None:
    items = [
        {"action_type": "MOVE_TO", "parameters": {"x": 1, "y": 2}},
        {"action_type": "MOUSE_DOWN", "parameters": {}},
        {"action_type": "MOVE_TO", "parameters": {"x": 3, "y": 4}},
        {"action_type": "MOUSE_UP", "parameters": {}},
    ]
    assert from_computer13(items).value == (Action(kind="drag", point=Point(1, 2), end_point=Point(3, 4)),)


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ([{"action_type": "CLICK", "parameters": {}}], "cursor position is unknown"),
        ([{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": 3}}], "not supported"),
        ([{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "button": "middle"}}], "not supported"),
        ([{"action_type": "DRAG_TO", "parameters": {"x": 1, "y": 2}}], "cursor position unknown"),
        ([{"action_type": "MOUSE_UP", "parameters": {}}], "no equivalent"),
        ([{"action_type": "SCROLL", "parameters": {"dx": 1, "dy": 1}}], "exactly one"),
        ([{"action_type": "SCROLL", "parameters": {"dx": 0, "dy": 0}}], "exactly one"),
        ([{"action_type": "KEY_DOWN", "parameters": {"key": "shift"}}], "held keys"),
        ([{"action_type": "TYPING", "parameters": {"text": ""}}], "non-empty"),
        ([{"action_type": "MOVE_TO", "parameters": {"x": "a", "y": 2}}], "bad coordinates"),
        ([{"action_type": "MOVE_TO", "parameters": {"x": True, "y": 2}}], "bad coordinates"),
        ([{"action_type": "TELEPORT"}], "no equivalent"),
        (["JUMP"], "unknown action string"),
        ([42], "expected a dict"),
        ([{"action_type": "PRESS", "parameters": {"key": "a b"}}], "cannot be written"),
    ],
)
def test_from_computer13_unsupported(items: list[object], fragment: str) -> None:
    result = from_computer13(items)
    assert result.error is not None and fragment in result.error.message, result.error
    assert result.error.index == 0


def test_from_computer13_keeps_actions_before_an_error() -> None:
    result = from_computer13(["WAIT", {"action_type": "NOPE"}, "DONE"])
    assert result.value == (Action(kind="wait"),)
    assert result.error is not None and result.error.index == 1


def test_from_computer13_garbage_does_not_raise() -> None:
    for junk in (None, 3, object(), [None], [{"action_type": "CLICK", "parameters": [1]}]):
        assert from_computer13(junk).error is not None


# --- pyautogui ----------------------------------------------------------------------------------------


def test_to_pyautogui_each_kind() -> None:
    result = to_pyautogui(
        [
            CLICK,
            Action(kind="left_double", point=Point(1, 2.5)),
            Action(kind="right_single", point=Point(3, 4)),
            Action(kind="hover", point=Point(5, 6)),
            Action(kind="drag", point=Point(10, 20), end_point=Point(30, 40)),
            Action(kind="scroll", point=Point(7, 8), direction="up"),
            Action(kind="scroll", direction="right"),
            Action(kind="type", text="it's\n"),
            Action(kind="hotkey", keys=("ctrl", "c")),
            Action(kind="hotkey", keys=("enter",)),
            Action(kind="wait"),
            Action(kind="finished", text="x"),
            Action(kind="call_user"),
        ]
    )
    assert result.ok
    assert result.value == [
        "pyautogui.click(640, 400)",
        "pyautogui.doubleClick(1, 2.5)",
        "pyautogui.rightClick(3, 4)",
        "pyautogui.moveTo(5, 6)",
        "pyautogui.moveTo(10, 20)\npyautogui.dragTo(30, 40, duration=0.5, button='left')",
        "pyautogui.scroll(5, x=7, y=8)",
        "pyautogui.hscroll(5)",
        'pyautogui.write("it\'s\\n")',
        "pyautogui.hotkey('ctrl', 'c')",
        "pyautogui.press('enter')",
        "WAIT",
        "DONE",
        "FAIL",
    ]


def test_from_pyautogui_typical_agent_code() -> None:
    code = (
        "import pyautogui\nimport time\npyautogui.FAILSAFE = False\n"
        "'''\nObservation:\n\nThought:\nopen the menu\n'''\n"
        "pyautogui.click(1265, 245, button='left')\n"
        "time.sleep(1)\n"
        "pyautogui.click(x=10, y=20, clicks=2)\n"
        "pyautogui.click((30, 40), button='right')\n"
        "pyautogui.moveTo(5, 5, duration=1.0, tween=pyautogui.easeInQuad)\n"
        "pyautogui.dragTo(50, 60, duration=1.0)\n"
        "pyautogui.scroll(-5, x=100, y=200)\n"
        "pyautogui.hscroll(3)\n"
        "import pyperclip\npyperclip.copy('héllo')\npyautogui.hotkey('ctrl', 'v')\ntime.sleep(0.5)\n"
        "pyautogui.press('enter')\n"
        "pyautogui.typewrite('abc', interval=0.1)\n"
        "pyautogui.press(['tab', 'tab'])\n"
        "pyautogui.keyDown('shift')\npyautogui.keyUp('shift')\n"
    )
    result = from_pyautogui(code)
    assert result.error is None, result.error
    assert result.value == (
        Action(kind="click", point=Point(1265, 245)),
        Action(kind="left_double", point=Point(10, 20)),
        Action(kind="right_single", point=Point(30, 40)),
        Action(kind="drag", point=Point(5, 5), end_point=Point(50, 60)),
        Action(kind="scroll", point=Point(100, 200), direction="down"),
        Action(kind="scroll", direction="right"),
        Action(kind="type", text="héllo"),
        Action(kind="hotkey", keys=("enter",)),
        Action(kind="type", text="abc"),
        Action(kind="hotkey", keys=("tab",)),
        Action(kind="hotkey", keys=("tab",)),
        Action(kind="hotkey", keys=("shift",)),
    )


def test_from_pyautogui_special_strings_and_lists() -> None:
    result = from_pyautogui(["pyautogui.click(1, 2)", "WAIT", " DONE\n", "FAIL"])
    assert result.value == (
        Action(kind="click", point=Point(1, 2)),
        Action(kind="wait"),
        Action(kind="finished"),
        Action(kind="call_user"),
    )


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("import os\nos.system('rm -rf /')", "unsupported statement"),
        ("__import__('os').system('x')", "only module.function"),
        ("os.system('x')", "unsupported call os.system"),
        ("pyautogui.click(x, y)", "not a literal"),
        ("pyautogui.click(1+open('f'), 2)", "not a literal"),
        ("pyautogui.screenshot()", "unsupported pyautogui function"),
        ("pyautogui.click(", "not valid Python"),
        ("for i in range(3):\n    pyautogui.click(1, 2)", "unsupported statement"),
        ("pyautogui.click(1, 2, 3, 0.1, 'middle')", "not supported"),
        ("pyautogui.tripleClick(1, 2)", "unsupported pyautogui function"),
        ("pyautogui.click()", "cursor position is unknown"),
        ("pyperclip.copy('x')\npyautogui.press('enter')", "ctrl+v"),
        ("pyperclip.copy('x')", "never pasted"),
        ("pyautogui.write(['a', 'b'])", "needs a string"),
        ("pyautogui.write('')", "non-empty text"),
        ("pyautogui.press('a', presses=1000)", "bad presses"),
        ("pyautogui.hotkey(*keys)", "not a literal"),
        ("pyautogui.click(**kw)", "**kwargs"),
        ("pyautogui.dragTo(1, 2, button='right')", "left-button"),
        ("x = 1", "unsupported statement"),
        ("pyautogui.click(1, 2)\0", "not valid Python"),
    ],
)
def test_from_pyautogui_unsupported(code: str, fragment: str) -> None:
    result = from_pyautogui(code)
    assert result.error is not None and fragment in result.error.message, result.error


def test_from_pyautogui_never_evaluates() -> None:
    marker: list[int] = []
    globals()["_side_effect"] = marker
    result = from_pyautogui("pyautogui.click(_side_effect.append(1), 2)")
    assert result.error is not None and marker == []


def test_from_pyautogui_garbage_does_not_raise() -> None:
    for junk in (None, 3, [None], ["pyautogui.click(1, 2)", 5]):
        assert from_pyautogui(junk).error is not None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action",
    [
        CLICK,
        Action(kind="drag", point=Point(1.5, 2), end_point=Point(3, 4.25)),
        Action(kind="scroll", point=Point(1, 1), direction="left"),
        Action(kind="scroll", direction="down"),
        Action(kind="type", text="multi\nline 'quoted' \"text\" \\ 中文\n"),
        Action(kind="hotkey", keys=("ctrl", "alt", "delete")),
        Action(kind="hotkey", keys=("space",)),
        Action(kind="call_user"),
    ],
)
def test_round_trips(action: Action) -> None:
    assert from_computer13(to_computer13(action).value).value == (action,)
    assert from_pyautogui(to_pyautogui(action).value).value == (action,)


def test_odd_escapes_in_code_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = from_pyautogui("pyautogui.write('C:\\pics')")
    assert result.value == (Action(kind="type", text="C:\\pics"),)
