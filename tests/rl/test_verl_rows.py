"""workers.rl.verl_rows: the chat-text escaping rule and the row reader the agent loop uses."""

from __future__ import annotations

import json

import pytest

from workers.rl.verl_rows import escape_chat_text, rl_row, task_from_extra


@pytest.mark.parametrize(
    "raw",
    [
        "<image>",
        "</image>",
        "<IMAGE>",
        "<video>",
        "<audio>",
        "<|im_start|>",
        "<|image_pad|>",
        "<|endoftext|>",
    ],
)
def test_markup_is_defused_but_reads_the_same(raw: str) -> None:
    escaped = escape_chat_text(f"a {raw} b")
    assert raw not in escaped and escaped.replace("\u200b", "") == f"a {raw} b"


@pytest.mark.parametrize("text", ["a < b", "<b>bold</b>", "x <| y", "<imagex>", "", "3 <= 4 |>"])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert escape_chat_text(text) == text


def test_rl_row_round_trips_through_the_reader() -> None:
    task = {"task_id": "t", "kind": "desktop", "setup": {"config": [{"type": "launch", "parameters": {}}]}}
    row = rl_row(
        index=3, data_source="flywheel/p", instruction="<image>x", task=task, seed=9, env_kind="desktop"
    )
    assert "images" not in row and row["prompt"][0]["content"] == "<\u200bimage>x"
    assert task_from_extra(row["extra_info"]) == (task, 9)
    assert task_from_extra(json.dumps(row["extra_info"])) == (task, 9)


@pytest.mark.parametrize(
    "extra",
    [None, "not json", 5, {}, {"flywheel_task": "{}", "seed": 1}, {"flywheel_task": {"kind": "browser"}},
     {"flywheel_task": "[1]", "seed": 2}],
)  # fmt: skip
def test_a_row_that_cannot_recreate_its_episode_is_refused(extra: object) -> None:
    with pytest.raises(ValueError):
        task_from_extra(extra)
