"""Hand-written cases for `parse_response`: every accepted form, real-looking outputs, malformed text."""

from __future__ import annotations

import warnings

import pytest

from workers.actions import Action, ApiActionSpec, Convention, Point, parse_response


def only(text: str, **kwargs: object) -> Action:
    result = parse_response(text, **kwargs)  # type: ignore[arg-type]
    assert result.error is None, result.error
    assert len(result.actions) == 1, result.actions
    return result.actions[0]


def error_of(text: str, **kwargs: object) -> str:
    result = parse_response(text, **kwargs)  # type: ignore[arg-type]
    assert result.error is not None, result
    assert result.error.raw == text
    return result.error.message


# --- whole responses -----------------------------------------------------------------------------------


def test_ui_tars_15_response_with_box_tokens() -> None:
    text = (
        "Thought: I see the Chrome window open on the Puzzle Game 2048 page. To access more options, "
        "I should open the browser menu.\nAction: click(start_box='<|box_start|>(1265,245)<|box_end|>')"
    )
    result = parse_response(text)
    assert result.ok
    assert result.thought.startswith("I see the Chrome window")
    assert result.actions == (Action(kind="click", point=Point(1265, 245)),)
    assert result.raw == text


def test_thought_spanning_lines_is_kept_whole() -> None:
    text = "Thought: First line.\n  Second line, indented.\n\nThird.\nAction: wait()"
    result = parse_response(text)
    assert result.thought == "First line.\n  Second line, indented.\n\nThird."
    assert result.actions == (Action(kind="wait"),)


def test_action_only_response() -> None:
    result = parse_response("Action: hotkey(key='ctrl s')")
    assert result.ok and result.thought == ""
    assert result.actions[0].keys == ("ctrl", "s")


def test_bare_call_without_labels() -> None:
    assert only("click(start_box='(10,20)')") == Action(kind="click", point=Point(10, 20))


def test_reflection_and_action_summary_prefixes() -> None:
    text = "Reflection: The last click missed.\nAction_Summary: Click the Save button.\nAction: click(start_box='(5,6)')"
    result = parse_response(text)
    assert result.ok
    assert result.thought == "Reflection: The last click missed.\nAction_Summary: Click the Save button."
    summary = parse_response("Action_Summary: Press enter.\nAction: hotkey(key='enter')")
    assert summary.thought == "Press enter." and summary.ok


def test_multiple_calls_separated_by_blank_lines_and_newlines() -> None:
    text = (
        "Thought: Fill the form.\nAction: click(start_box='(100,200)')\n\n"
        "type(content='alice')\nhotkey(key='tab')\n\n\ntype(content='secret\\n')"
    )
    result = parse_response(text)
    assert result.ok
    assert [a.kind for a in result.actions] == ["click", "type", "hotkey", "type"]
    assert result.actions[3].text == "secret\n"


def test_repeated_action_labels_between_calls() -> None:
    result = parse_response("Thought: t\nAction: click(start_box='(1,2)')\n\nAction: wait()")
    assert [a.kind for a in result.actions] == ["click", "wait"]


def test_end_of_turn_tokens_end_the_action_section() -> None:
    assert only("Action: wait()<|im_end|>") == Action(kind="wait")
    assert only("Action: finished(content='ok')[EOS]") == Action(kind="finished", text="ok")
    assert only("Action: type(content='a [EOS] b')").text == "a [EOS] b"


def test_markdown_backticks_around_calls() -> None:
    assert only("Action: `click(start_box='(739,175)')`").point == Point(739, 175)


def test_action_label_inside_a_string_is_text() -> None:
    assert only("answer(text='Action: none')") == Action(kind="answer", text="Action: none")
    result = parse_response("Thought: t\nAction: type(content='Action: x')")
    assert result.thought == "t" and result.actions == (Action(kind="type", text="Action: x"),)


def test_same_line_action_label() -> None:
    result = parse_response("Thought: I will press enter. Action: hotkey(key='enter')")
    assert result.ok and result.thought == "I will press enter."


# --- computer actions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["click", "left_double", "right_single", "hover", "long_press", "left_single"]
)
def test_pointer_actions(kind: str) -> None:
    expected = "click" if kind == "left_single" else kind
    assert only(f"Action: {kind}(start_box='(12,34)')") == Action(kind=expected, point=Point(12, 34))


@pytest.mark.parametrize(
    ("box", "point"),
    [
        ("'(100,200)'", Point(100, 200)),
        ("'( 100 , 200 )'", Point(100, 200)),
        ("'(100.5,200.25)'", Point(100.5, 200.25)),
        ("'[10,20,30,40]'", Point(20, 30)),
        ("'(10,20,31,41)'", Point(20.5, 30.5)),
        ("'<|box_start|>(52,13)<|box_end|>'", Point(52, 13)),
        ("'<|box_start|>(10,20),(30,40)<|box_end|>'", Point(20, 30)),
        ("'<point>100 200</point>'", Point(100, 200)),
        ("'<bbox>10 20 30 40</bbox>'", Point(20, 30)),
        ('"(7,8)"', Point(7, 8)),
        ("(739,175)", Point(739, 175)),
        ("[1,2,3,4]", Point(2, 3)),
        ("<|box_start|>(739,175)<|box_end|>", Point(739, 175)),
    ],
)
def test_box_forms(box: str, point: Point) -> None:
    assert only(f"Action: click(start_box={box})").point == point


def test_point_argument_forms() -> None:
    assert only("Action: click(point='<point>100 200</point>')").point == Point(100, 200)
    assert only("Action: left_double(start_point='<point>5 6</point>')").point == Point(5, 6)
    drag = only("Action: drag(start_point='<point>1 2</point>', end_point='<point>300 400</point>')")
    assert drag == Action(kind="drag", point=Point(1, 2), end_point=Point(300, 400))


def test_drag_and_select() -> None:
    text = (
        "Action: drag(start_box='<|box_start|>(10,20)<|box_end|>', end_box='<|box_start|>(30,40)<|box_end|>')"
    )
    assert only(text) == Action(kind="drag", point=Point(10, 20), end_point=Point(30, 40))
    assert only("Action: select(start_box='(1,1)', end_box='(2,2)')").kind == "drag"


def test_drag_split_across_lines_as_in_the_system_prompt() -> None:
    text = "Action: drag(start_box='<|box_start|>(1,2)<|box_end|>',\n      end_box='<|box_start|>(3,4)<|box_end|>')"
    assert only(text).end_point == Point(3, 4)


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        ("ctrl c", ("ctrl", "c")),
        ("ctrl shift b", ("ctrl", "shift", "b")),
        ("pagedown", ("pagedown",)),
        ("ctrl+c", ("ctrl", "c")),
        ("ctrl, shift, a", ("ctrl", "shift", "a")),
        ("ctrl +", ("ctrl", "+")),
        ("  alt   f4 ", ("alt", "f4")),
        ("ctrl++", ("ctrl", "+")),  # the plus key, not a lost key
        ("ctrl+shift++", ("ctrl", "shift", "+")),
        ("ctrl+=", ("ctrl", "=")),
        ("ctrl+,", ("ctrl", ",")),
        ("+", ("+",)),
    ],
)
def test_hotkey(spec: str, keys: tuple[str, ...]) -> None:
    assert only(f"Action: hotkey(key='{spec}')").keys == keys


@pytest.mark.parametrize("spec", ["ctrl+", "ctrl+shift+", "++"])
def test_a_combination_ending_in_a_separator_is_refused_not_shortened(spec: str) -> None:
    parsed = parse_response(f"Action: hotkey(key='{spec}')")
    assert parsed.error is not None and "ends with '+'" in parsed.error.message and not parsed.actions


def test_plus_key_round_trips_through_the_serializer_and_pyautogui() -> None:
    from workers.actions.pyautogui_code import from_pyautogui, to_pyautogui
    from workers.actions.serialize import format_response

    action = only("Action: hotkey(key='ctrl+shift++')")
    text = format_response("zoom in", [action])
    assert parse_response(text).actions == (action,)
    code = to_pyautogui([action]).value
    assert code == ["pyautogui.hotkey('ctrl', 'shift', '+')"]
    assert from_pyautogui(code).value == (action,)


def test_hotkey_spellings() -> None:
    assert only("Action: hotkey(hotkey='enter')").keys == ("enter",)
    assert only("Action: press(key='enter')") == Action(kind="hotkey", keys=("enter",))
    assert only("Action: hotkey('ctrl, l')").keys == ("ctrl", "l")
    assert only('Action: hotkey(key="ctrl v")').keys == ("ctrl", "v")


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        ("'hello'", "hello"),
        ("'hello\\n'", "hello\n"),
        ("'it\\'s'", "it's"),
        ("'say \\\"hi\\\"'", 'say "hi"'),
        ('"it\'s"', "it's"),
        ("'tab\\there'", "tab\there"),
        ("'C:\\Users\\me'", "C:\\Users\\me"),
        ("'back\\\\slash'", "back\\slash"),
        ("'two\nlines'", "two\nlines"),
        ("'don't stop'", "don't stop"),
        ("'a, b, c'", "a, b, c"),
        ("'(1,2)'", "(1,2)"),
        ("'中文输入'", "中文输入"),
        ("'  padded  '", "  padded  "),
    ],
)
def test_type_content_is_exact(literal: str, text: str) -> None:
    assert only(f"Action: type(content={literal})") == Action(kind="type", text=text)


def test_type_positional_content() -> None:
    assert only("Action: type('abc')").text == "abc"


@pytest.mark.parametrize("direction", ["down", "up", "left", "right"])
def test_scroll(direction: str) -> None:
    action = only(f"Action: scroll(start_box='(640,400)', direction='{direction}')")
    assert action == Action(kind="scroll", point=Point(640, 400), direction=direction)


def test_scroll_without_position_and_odd_spellings() -> None:
    assert only("Action: scroll(direction='down')") == Action(kind="scroll", direction="down")
    assert only("Action: scroll(start_box='', direction='up')") == Action(kind="scroll", direction="up")
    assert only("Action: scroll(start_box='(1,2)', direction='Down')").direction == "down"
    assert only("Action: scroll(direction=down)").direction == "down"
    # found by the 100k fuzz: an unquoted direction skipped the check a quoted one gets
    bad = parse_response("Action:scroll(direction=A)")
    assert bad.error is not None and "bad direction" in bad.error.message and not bad.actions


def test_no_argument_actions() -> None:
    for kind in ("wait", "press_home", "press_back", "call_user", "finished"):
        assert only(f"Action: {kind}()") == Action(kind=kind)  # type: ignore[arg-type]


def test_finished_and_call_user_content() -> None:
    assert only("Action: finished(content='The answer is 42.')").text == "The answer is 42."
    assert only("Action: finished(content='')") == Action(kind="finished", text="")
    assert (
        only("Action: finished(content='Task completed successfully.\\n')").text
        == "Task completed successfully.\n"
    )
    assert only("Action: call_user(content='need a password')").text == "need a password"


def test_click_with_button_argument() -> None:
    assert only("Action: click(start_box='(36,65)', button='right')").kind == "right_single"
    assert only("Action: click(start_box='(36,65)', button='left')").kind == "click"


# --- mobile, MAI-UI and API actions ---------------------------------------------------------------------


def test_mobile_actions() -> None:
    assert only("Action: long_press(start_box='(200,300)')") == Action(
        kind="long_press", point=Point(200, 300)
    )
    assert only("Action: open_app(app_name='Settings')") == Action(kind="open_app", text="Settings")
    assert only("Action: swipe(start_box='(1,2)', end_box='(3,4)')").end_point == Point(3, 4)
    assert only("Action: swipe(start_box='(1,2)', direction='up')").direction == "up"
    assert only("Action: swipe(direction='left')") == Action(kind="swipe", direction="left")


def test_mai_ui_actions() -> None:
    assert only("Action: answer(text='Paris')") == Action(kind="answer", text="Paris")
    assert only("Action: ask_user(text='Which account?')") == Action(kind="ask_user", text="Which account?")
    call = only(
        'Action: mcp_call(name=\'amap.search\', args={"keywords": "coffee", "limit": 3, "open": true})'
    )
    assert call == Action(
        kind="mcp_call", name="amap.search", arguments={"keywords": "coffee", "limit": 3, "open": True}
    )
    assert only("Action: mcp_call(name='x', args={'a': [1, 'two']})").arguments == {"a": [1, "two"]}
    assert only("Action: mcp_call(name='x', args='{\"a\": 1}')").arguments == {"a": 1}
    assert only("Action: mcp_call(name='x')") == Action(kind="mcp_call", name="x")


REGISTRY = {
    "open_url": ApiActionSpec(params=("url", "new_tab"), required=("url",)),
    "run_shell": ApiActionSpec(params=("command", "timeout")),
}


def test_registered_api_actions() -> None:
    action = only("Action: open_url(url='https://example.org', new_tab=true)", api_actions=REGISTRY)
    assert action == Action(
        kind="api_call", name="open_url", arguments={"url": "https://example.org", "new_tab": True}
    )
    assert only("Action: run_shell('ls -la', 30)", api_actions=REGISTRY).arguments == {
        "command": "ls -la",
        "timeout": 30,
    }
    assert only("Action: run_shell()", api_actions=REGISTRY).arguments == {}


def test_api_action_errors() -> None:
    assert "unknown action" in error_of("Action: open_url(url='x')")
    assert "needs argument 'url'" in error_of("Action: open_url(new_tab=true)", api_actions=REGISTRY)
    assert "unknown argument 'foo'" in error_of("Action: open_url(url='x', foo=1)", api_actions=REGISTRY)
    assert "cannot read value" in error_of("Action: run_shell(command=ls)", api_actions=REGISTRY)


def test_builtin_names_win_over_registry() -> None:
    registry = {"click": ApiActionSpec(params=("x",))}
    assert only("Action: click(start_box='(1,2)')", api_actions=registry).kind == "click"


# --- conventions -----------------------------------------------------------------------------------------


def test_relative_conventions_bound_coordinates() -> None:
    assert only("Action: click(start_box='(1000,1000)')", convention=Convention.RELATIVE_1000).point == Point(
        1000, 1000
    )
    assert "exceeds 1000" in error_of(
        "Action: click(start_box='(1001,5)')", convention=Convention.RELATIVE_1000
    )
    assert "exceeds 999" in error_of(
        "Action: click(start_box='(1000,5)')", convention=Convention.RELATIVE_999
    )
    assert only("Action: click(start_box='(1920,1080)')", convention=Convention.SCREEN).point == Point(
        1920, 1080
    )


# --- malformed ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty response"),
        ("   \n ", "empty response"),
        ("Thought: I am thinking but never act.", "no 'Action:' section"),
        ("Thought: x\nAction:", "empty Action section"),
        ("Thought: x\nAction:   \n", "empty Action section"),
        ("Action: teleport(start_box='(1,2)')", "unknown action 'teleport'"),
        ("Action: click(start_box='(abc,def)')", "bad coordinates"),
        ("Action: click(start_box='(1,2,3)')", "expected 2 or 4 numbers"),
        ("Action: click(start_box='(-5,10)')", "negative"),
        ("Action: click(start_box='(1e999,1)')", "not finite"),
        ("Action: click(start_box='(12 34 56)')", "expected 2 or 4 numbers"),
        ("Action: click(start_box='(1.2.3,4)')", "run together"),
        ("Action: click(.)", "unexpected '.'"),
        ("Action: click(start_box='(+,-)')", "unexpected '+'"),
        ("Action: click(start_box='')", "click needs a start_box"),
        ("Action: click()", "click needs a start_box"),
        ("Action: drag(start_box='(1,2)')", "drag needs an end_box"),
        ("Action: type(content='')", "type needs non-empty content"),
        ("Action: type(content='unterminated)", "unbalanced quotes"),
        ("Action: type(content='abc'", "unbalanced parentheses"),
        ("Action: click(start_box=(946,182)')", "unbalanced quotes"),
        ("Action: click(start_box=[1,2)", "mismatched"),
        ("Action: click start_box='(1,2)'", "expected '('"),
        ("Action: hotkey(key='')", "at least one key"),
        ("Action: hotkey(key='   ')", "at least one key"),
        ("Action: scroll(start_box='(1,2)', direction='sideways')", "bad direction"),
        ("Action: scroll(start_box='(1,2)')", "scroll needs direction"),
        ("Action: click(start_box='(1,2)', start_box='(3,4)')", "given twice"),
        ("Action: click(start_box='(1,2)', point='(3,4)')", "given twice"),
        ("Action: click(start_box='(1,2)', color='red')", "unknown argument 'color'"),
        ("Action: wait(5)", "unexpected positional argument"),
        ("Action: type(content=hello)", "expected a quoted string"),
        ("Action: open_app(app_name='')", "non-empty app_name"),
        ("Action: mcp_call(name='x', args=[1, 2])", "expected a JSON object"),
        ("Action: mcp_call(name='x', args={bad json})", "cannot read value"),
        ("Action: swipe(start_box='(1,2)')", "end_box or a direction"),
        ("Action: swipe(end_box='(1,2)')", "needs a start_box"),
        ("Action: click(start_box='(1,2)', button='middle')", "unsupported button"),
        ("Action: 42", "expected an action call"),
    ],
)
def test_malformed_responses(text: str, fragment: str) -> None:
    assert fragment in error_of(text)


def test_error_keeps_actions_before_it_and_points_at_the_fault() -> None:
    text = "Thought: t\nAction: click(start_box='(1,2)')\n\nwiggle(start_box='(3,4)')\n\nwait()"
    result = parse_response(text)
    assert result.actions == (Action(kind="click", point=Point(1, 2)),)
    assert result.error is not None and result.error.position == text.index("wiggle")
    assert result.thought == "t"
    assert not result.ok


def test_trailing_prose_after_a_call_is_an_error() -> None:
    result = parse_response("Action: wait()\nI hope this works.")
    assert result.actions == (Action(kind="wait"),)
    assert result.error is not None and "expected '('" in result.error.message


def test_non_text_input_does_not_raise() -> None:
    result = parse_response(None)  # type: ignore[arg-type]
    assert result.error is not None and not result.actions


def test_deeply_nested_garbage_does_not_raise() -> None:
    texts = [
        "Action: mcp_call(name='x', args=" + "[" * 5000 + "]" * 5000 + ")",
        "Action: " + "(" * 10000,
        "Action: mcp_call(name='x', args={\"a\": " + "[" * 3000 + "]" * 3000 + "})",
    ]
    for text in texts:
        error = parse_response(text).error
        assert error is not None and not error.message.startswith("internal")


def test_odd_escapes_in_literals_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        action = only("Action: mcp_call(name='x', args={'path': 'C:\\pics'})")
    assert action.arguments == {"path": "C:\\pics"}
