"""Prompt layout and history handling (SPEC §7): all text history, the last K screenshots, the
embedded prompt rebuilt identically from chat messages, UI-TARS templates."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from workers.envs.base import Element, Observation, TaskSpec
from workers.policy.base import HistoryItem, select_context, split_response
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.openai_client import EMBEDDED, UI_TARS_15, OpenAIPolicy
from workers.policy.prompts import (
    EMBEDDED_HISTORY_STEPS,
    decode_data_url,
    embedded_prompt_from_messages,
    format_elements,
    render_template,
)


def _png(color: tuple[int, int, int], size: tuple[int, int] = (64, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def _history(count: int) -> list[HistoryItem]:
    return [
        HistoryItem(f"step {i}", f"click(start_box='({i},{i + 1})')", _png((i * 20 % 256, 0, 0)), "png")
        for i in range(count)
    ]


OBS = Observation(
    screenshot=_png((1, 2, 3)),
    width=64,
    height=40,
    image_format="png",
    instruction="Click the OK button.",
    elements=(
        Element(0, "button", 'OK  "now"', 10.0, 20.0, 21.0, 9.0),
        Element(1, "input:text", "", 0.4, 0.5, 30.0, 10.0),
    ),
)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_select_context_keeps_all_text_and_last_k_minus_1_screenshots(k: int) -> None:
    history = _history(7)
    context = select_context(history, max_screenshots=k)
    assert [c.item for c in context] == history  # every step's text stays
    flags = [c.with_screenshot for c in context]
    assert flags == [False] * (7 - (k - 1)) + [True] * (k - 1)


def test_select_context_short_history_and_missing_images() -> None:
    history = [HistoryItem("a", "wait()"), *_history(1)]
    assert [c.with_screenshot for c in select_context(history, 5)] == [False, True]
    with pytest.raises(ValueError):
        select_context(history, 0)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_chat_messages_never_carry_more_than_k_images(k: int) -> None:
    from dataclasses import replace

    policy = OpenAIPolicy("http://127.0.0.1:9", "m", profile=replace(UI_TARS_15, max_screenshots=k))
    messages, size = policy.build_messages(OBS, _history(8), None)
    images = [
        part for m in messages if isinstance(m["content"], list) for part in m["content"]
        if part["type"] == "image_url"
    ]  # fmt: skip
    assert len(images) == k
    assistants = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(assistants) == 8 and assistants[0] == "Thought: step 0\nAction: click(start_box='(0,1)')"
    # UI-TARS 1.5 sees the smart-resized image (multiples of 28) and answers in its pixels
    assert size[0] % 28 == 0 and size[1] % 28 == 0
    assert "## User Instruction\nClick the OK button." in messages[0]["content"][0]["text"]
    policy.client.close()


def test_server_rebuilds_exactly_the_in_process_embedded_prompt() -> None:
    history = _history(6)
    task = TaskSpec(task_id="t", instruction="Press OK please", kind="browser", source="custom")
    client = OpenAIPolicy("http://127.0.0.1:9", "m", profile=EMBEDDED, summary="opened the form")
    messages, size = client.build_messages(OBS, history, task)
    client.client.close()
    assert size == (64, 40)  # the embedded model answers in screen pixels: no resize
    rebuilt = embedded_prompt_from_messages(messages)
    local = EmbeddedPolicy(new_model()).inputs_for(OBS, history, task)
    assert rebuilt.image == OBS.screenshot == local.image
    # the in-process prompt has no summary; otherwise identical
    assert rebuilt.text.replace("Summary: opened the form\n", "") == local.text
    assert "Summary: opened the form" in rebuilt.text
    # only the last EMBEDDED_HISTORY_STEPS actions enter the flat prompt
    kept = [h.action for h in history][-EMBEDDED_HISTORY_STEPS:]
    assert local.text.endswith("History:\n" + "\n".join(kept))
    assert history[0].action not in local.text


def test_elements_are_listed_with_rounded_centres_and_sanitised_text() -> None:
    assert format_elements(OBS.elements) == '[0] button "OK \'now\'" (20,24)\n[1] input:text "" (15,6)'


def test_templates_and_response_splitting() -> None:
    for kind in ("computer", "mobile", "grounding"):
        text = render_template(kind, "Open the file", language="German")
        assert text.endswith("## User Instruction\nOpen the file\n") and "{language}" not in text
    assert "open_app" in render_template("mobile", "x") and "hotkey" in render_template("computer", "x")
    with pytest.raises(ValueError, match="unknown prompt kind"):
        render_template("tv", "x")
    assert split_response("Thought: go\nAction: wait()") == ("go", "wait()")
    assert split_response("  click(start_box='(1,2)')") == ("", "click(start_box='(1,2)')")


@pytest.mark.parametrize(
    "messages, error",
    [
        ([], "non-empty list"),
        ([{"role": "tool", "content": "x"}], "role"),
        ([{"role": "user", "content": 5}], "string or a list"),
        ([{"role": "user", "content": [{"text": "x"}]}], "'type'"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}], "data URL"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}]}], "base64"),
    ],
)  # fmt: skip
def test_malformed_messages_raise_value_error(messages: list, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        embedded_prompt_from_messages(messages)


def test_data_url_round_trip() -> None:
    from workers.policy.prompts import data_url

    image = _png((9, 9, 9))
    assert decode_data_url(data_url(image, "png")) == image


def test_the_episode_instruction_beats_a_stored_placeholder() -> None:
    from dataclasses import replace

    from workers.policy.base import instruction_of

    placeholder = TaskSpec("click-test", "MiniWoB++ task click-test (instruction generated per episode)",
                           "browser", "miniwob")  # fmt: skip
    assert instruction_of(OBS, placeholder) == "Click the OK button."
    assert instruction_of(replace(OBS, instruction=""), placeholder) == placeholder.instruction
    assert instruction_of(replace(OBS, instruction=""), None) == ""
