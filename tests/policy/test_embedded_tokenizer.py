"""The embedded tokenizer (workers/policy/embedded/tokenizer.py): grammar literals where they occur,
the longest one first; numbers 0..MAX_NUMBER as single tokens; everything else as UTF-8 bytes; and
`decode(encode(s)) == s` for any text."""

from __future__ import annotations

import pytest

from workers.policy.embedded.tokenizer import MAX_NUMBER, POINT_CLOSE, TEXT_CLOSE, FlywheelTokenizer

TOK = FlywheelTokenizer()


def _bytes(text: str) -> list[int]:
    return [TOK.byte_id(b) for b in text.encode()]


def test_a_click_is_literals_and_two_number_tokens() -> None:
    ids = TOK.encode("click(start_box='(12,340)')")
    assert ids == [
        TOK.literal_ids["click(start_box='("],
        TOK.number_id(12),
        *_bytes(","),
        TOK.number_id(340),
        TOK.literal_ids[POINT_CLOSE],
    ]


def test_the_longest_literal_wins_where_two_start_at_one_position() -> None:
    # `)')` and `')` both end a call; at a `)` followed by `')` the point close is one token
    assert TOK.encode(")')") == [TOK.literal_ids[POINT_CLOSE]]
    assert TOK.encode("x')") == [*_bytes("x"), TOK.literal_ids[TEXT_CLOSE]]
    # a literal's prefix alone is bytes
    assert TOK.encode("click(") == _bytes("click(")


def test_numbers_out_of_range_or_with_leading_zeros_stay_bytes() -> None:
    assert TOK.encode(str(MAX_NUMBER)) == [TOK.number_id(MAX_NUMBER)]
    assert TOK.encode(str(MAX_NUMBER + 1)) == _bytes(str(MAX_NUMBER + 1))
    assert TOK.encode("007") == _bytes("007")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Thought: press it\nAction: click(start_box='(1,2)')",
        "type(content='a\\'b')')')",
        "scroll(start_box='(5,6)', direction='down')drag(start_box='(1,2)', end_box='(3,4)')",
        "héllo 🙂 0 00 1280 1281 ))'''((",
        "hotkey(key='ctrl c')wait()call_user()finished(content='x')",
    ],
)
def test_decode_inverts_encode(text: str) -> None:
    assert TOK.decode(TOK.encode(text)) == text
