"""Grammar-constrained decoding for the embedded policy: a token-level state machine.

The embedded model writes exactly one UI-TARS call (SPEC §4) in this subset:

    Thought: <text without newline>
    Action: click|left_double|right_single|hover(start_box='(N,N)')
            drag(start_box='(N,N)', end_box='(N,N)')
            scroll(start_box='(N,N)', direction='up|down|left|right')
            type|hotkey|finished(content|key='<text without quote or newline>')
            wait() | call_user()

where N is one number token (0..1280, screen pixels). At every step `GrammarState.mask_key` names
which tokens may come next; `Grammar.masks` holds one boolean row per key, so a batch of sequences
gets its [B, V] mask with one index. `score()` replays the same machine over given tokens, which is
why sampled log-probs and scored log-probs agree exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from workers.policy.embedded.tokenizer import (
    ACTION,
    CALL_PREFIXES,
    DIRECTIONS,
    DRAG_MID,
    POINT_CLOSE,
    SCROLL_MID,
    TEXT_CLOSE,
    THOUGHT,
    FlywheelTokenizer,
)

POINT_CALLS = ("click", "left_double", "right_single", "hover")
TEXT_CALLS = {"type": "content", "hotkey": "key", "finished": "content"}
BARE_CALLS = ("wait()", "call_user()")

# mask keys
START, THOUGHT_TEXT, THOUGHT_CAP, NAME, NUM, TEXT, TEXT_CAP, DIR, END, DONE = range(10)
FIRST_TOKEN_KEY = 10  # keys >= this force one specific token: key - FIRST_TOKEN_KEY = token id


class GrammarError(ValueError):
    """A response is outside the embedded grammar, so it cannot be a training target."""


@dataclass
class GrammarState:
    """Where one sequence is in the grammar; `slots` are the remaining pieces of the call."""

    phase: str = "start"  # start | thought | name | slots | end | done
    slots: list[tuple[str, int]] = field(default_factory=list)  # ("num"|"text"|"dir"|"tok", id)
    count: int = 0  # tokens written in the current free-text span


class Grammar:
    """Token masks and transitions; `max_thought` / `max_text` cap free text so decoding ends."""

    def __init__(self, tokenizer: FlywheelTokenizer, max_thought: int = 96, max_text: int = 48) -> None:
        self.tok = tokenizer
        self.max_thought = max_thought
        self.max_text = max_text
        ids = tokenizer.literal_ids
        self.thought_id = ids[THOUGHT]
        self.action_id = ids[ACTION]
        self.text_close_id = ids[TEXT_CLOSE]
        self.comma_id = tokenizer.byte_id(ord(","))
        self.templates: dict[int, list[tuple[str, int]]] = {}
        point = [("num", 0), ("tok", self.comma_id), ("num", 0)]
        for prefix in CALL_PREFIXES:
            name = prefix.split("(")[0]
            if name in POINT_CALLS:
                slots = [*point, ("tok", ids[POINT_CLOSE])]
            elif name == "drag":
                slots = [*point, ("tok", ids[DRAG_MID]), *point, ("tok", ids[POINT_CLOSE])]
            elif name == "scroll":
                slots = [*point, ("tok", ids[SCROLL_MID]), ("dir", 0)]
            elif name in TEXT_CALLS:
                slots = [("text", 0)]
            else:
                slots = []
            self.templates[ids[prefix]] = slots
        self.masks = self._build_masks()

    def _build_masks(self) -> torch.Tensor:
        """[FIRST_TOKEN_KEY + V, V] bool: rows for the named keys, then one row per forced token."""
        tok = self.tok
        vocab = tok.vocab_size
        masks = torch.zeros(FIRST_TOKEN_KEY + vocab, vocab, dtype=torch.bool)
        free = torch.zeros(vocab, dtype=torch.bool)
        free[tok.byte_offset : tok.literal_offset] = True  # bytes and numbers
        free[tok.byte_id(ord("\n"))] = False
        masks[START, self.thought_id] = True
        masks[THOUGHT_TEXT] = free
        masks[THOUGHT_TEXT, self.action_id] = True
        masks[THOUGHT_CAP, self.action_id] = True
        for prefix_id in self.templates:
            masks[NAME, prefix_id] = True
        masks[NUM, tok.number_offset : tok.literal_offset] = True
        masks[TEXT] = free
        masks[TEXT, tok.byte_id(ord("'"))] = False
        masks[TEXT, self.text_close_id] = True
        masks[TEXT_CAP, self.text_close_id] = True
        for direction in DIRECTIONS:
            masks[DIR, tok.literal_ids[direction]] = True
        masks[END, tok.eos_id] = True
        masks[DONE, tok.pad_id] = True
        token_rows = torch.arange(vocab)
        masks[FIRST_TOKEN_KEY + token_rows, token_rows] = True
        return masks

    def mask_key(self, state: GrammarState) -> int:
        if state.phase == "start":
            return START
        if state.phase == "thought":
            return THOUGHT_CAP if state.count >= self.max_thought else THOUGHT_TEXT
        if state.phase == "name":
            return NAME
        if state.phase == "end":
            return END
        if state.phase == "done":
            return DONE
        kind, token_id = state.slots[0]
        if kind == "num":
            return NUM
        if kind == "dir":
            return DIR
        if kind == "text":
            return TEXT_CAP if state.count >= self.max_text else TEXT
        return FIRST_TOKEN_KEY + token_id

    def advance(self, state: GrammarState, token_id: int) -> None:
        """Move past `token_id`; the caller only passes tokens the current mask allows."""
        if state.phase == "start":
            state.phase, state.count = "thought", 0
        elif state.phase == "thought":
            if token_id == self.action_id:
                state.phase = "name"
            else:
                state.count += 1
        elif state.phase == "name":
            state.slots = list(self.templates[token_id])
            state.phase, state.count = ("slots" if state.slots else "end"), 0
        elif state.phase == "slots":
            kind, _ = state.slots[0]
            if kind == "text" and token_id != self.text_close_id:
                state.count += 1
                return
            state.slots.pop(0)
            state.count = 0
            if not state.slots:
                state.phase = "end"
        elif state.phase == "end":
            state.phase = "done"

    def allows(self, state: GrammarState, token_id: int) -> bool:
        return bool(self.masks[self.mask_key(state), token_id])

    # targets --------------------------------------------------------------------------------
    def encode_response(self, text: str) -> list[int]:
        """Token ids (ending in EOS) of a `Thought: ...\\nAction: <call>` target, in the canonical
        split the state machine accepts; raises `GrammarError` for anything outside the subset."""
        match = re.fullmatch(r"Thought: ([^\n]*)\nAction: (.+)", text.strip("\n"), flags=re.DOTALL)
        if match is None:
            raise GrammarError(f"not 'Thought: ...\\nAction: ...': {text!r}")
        thought, call = match.group(1), match.group(2).strip()
        ids = [self.thought_id, *self.tok.encode_plain(thought), self.action_id]
        ids += self._encode_call(call)
        ids.append(self.tok.eos_id)
        state = GrammarState()
        for token_id in ids:
            if not self.allows(state, token_id):
                raise GrammarError(f"response exceeds the grammar limits: {text!r}")
            self.advance(state, token_id)
        return ids

    def _encode_call(self, call: str) -> list[int]:
        tok = self.tok
        lit = tok.literal_ids
        if call in BARE_CALLS:
            return [lit[call]]
        num = r"\s*(\d+)\s*"
        pt = rf"\(?{num},{num}\)?"
        match = re.fullmatch(rf"(\w+)\(start_box='{pt}'\)", call)
        if match and match.group(1) in POINT_CALLS:
            return [
                lit[f"{match.group(1)}(start_box='("],
                *self._point(match.group(2), match.group(3)),
                lit[POINT_CLOSE],
            ]
        match = re.fullmatch(rf"drag\(start_box='{pt}', end_box='{pt}'\)", call)
        if match:
            first, second = self._point(*match.group(1, 2)), self._point(*match.group(3, 4))
            return [lit["drag(start_box='("], *first, lit[DRAG_MID], *second, lit[POINT_CLOSE]]
        match = re.fullmatch(rf"scroll\(start_box='{pt}', direction='(up|down|left|right)'\)", call)
        if match:
            direction = lit[f"{match.group(3)}')"]
            return [lit["scroll(start_box='("], *self._point(*match.group(1, 2)), lit[SCROLL_MID], direction]
        match = re.fullmatch(r"(\w+)\((\w+)='([^'\n]*)'\)", call)
        if match and TEXT_CALLS.get(match.group(1)) == match.group(2):
            prefix = f"{match.group(1)}({match.group(2)}='"
            return [lit[prefix], *tok.encode_plain(match.group(3)), lit[TEXT_CLOSE]]
        raise GrammarError(f"action outside the embedded grammar: {call!r}")

    def _point(self, x: str, y: str) -> list[int]:
        try:
            return [self.tok.number_id(int(x)), self.comma_id, self.tok.number_id(int(y))]
        except ValueError as exc:
            raise GrammarError(str(exc)) from exc
