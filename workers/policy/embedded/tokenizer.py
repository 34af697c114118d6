"""The embedded policy's tokenizer: bytes, one token per integer 0..MAX_NUMBER, and grammar literals.

Why not BPE: coordinates must be single tokens so the decoder can copy them from the element list
(SPEC §7 "Measured": a byte model learned the grammar but not to copy multi-digit coordinates), and
the grammar pieces (`click(start_box='(`, `)')`, ...) are single tokens so the decoding state machine
in `grammar.py` works on token ids. The vocabulary is fully determined by this file; it is saved to
`vocab.json` in every checkpoint so a checkpoint stays readable if the list here ever grows.

Layout of ids: specials, then 256 bytes, then numbers 0..MAX_NUMBER, then literals.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<sep>", "<unk>")
MAX_NUMBER = 1280

# Grammar literals of the embedded action subset (see grammar.py); order matters only for ids.
THOUGHT = "Thought: "
ACTION = "\nAction: "
CALL_PREFIXES: tuple[str, ...] = (
    "click(start_box='(",
    "left_double(start_box='(",
    "right_single(start_box='(",
    "hover(start_box='(",
    "drag(start_box='(",
    "scroll(start_box='(",
    "type(content='",
    "hotkey(key='",
    "finished(content='",
    "wait()",
    "call_user()",
)
POINT_CLOSE = ")')"
TEXT_CLOSE = "')"
DRAG_MID = ")', end_box='("
SCROLL_MID = ")', direction='"
DIRECTIONS: tuple[str, ...] = ("up')", "down')", "left')", "right')")
LITERALS: tuple[str, ...] = (
    THOUGHT,
    ACTION,
    *CALL_PREFIXES,
    POINT_CLOSE,
    TEXT_CLOSE,
    DRAG_MID,
    SCROLL_MID,
    *DIRECTIONS,
)

_NUMBER_RE = re.compile(r"\d+")


class TokenizerError(ValueError):
    """A vocabulary file is missing or does not match this code."""


class FlywheelTokenizer:
    """Deterministic tokenizer; `decode(encode(s)) == s` for every string `s`."""

    vocab_file = "vocab.json"

    def __init__(self) -> None:
        self.tokens: list[str] = [*SPECIALS]
        self.tokens += [f"<0x{b:02X}>" for b in range(256)]
        self.tokens += [f"<n{i}>" for i in range(MAX_NUMBER + 1)]
        self.tokens += list(LITERALS)
        self.pad_id, self.bos_id, self.eos_id, self.sep_id, self.unk_id = range(len(SPECIALS))
        self.byte_offset = len(SPECIALS)
        self.number_offset = self.byte_offset + 256
        self.literal_offset = self.number_offset + MAX_NUMBER + 1
        self.literal_ids: dict[str, int] = {lit: self.literal_offset + i for i, lit in enumerate(LITERALS)}
        # Longest literal first so `)')` wins over `')` at the same position (a regex alternation
        # tries its branches in order at the leftmost position where any matches).
        by_length = sorted(LITERALS, key=len, reverse=True)
        self._literal_re = re.compile("|".join(re.escape(literal) for literal in by_length))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    # ids by kind ------------------------------------------------------------------------------
    def byte_id(self, value: int) -> int:
        return self.byte_offset + value

    def number_id(self, value: int) -> int:
        if not 0 <= value <= MAX_NUMBER:
            raise ValueError(f"number {value} outside 0..{MAX_NUMBER}")
        return self.number_offset + value

    def is_number(self, token_id: int) -> bool:
        return self.number_offset <= token_id < self.literal_offset

    # encoding ---------------------------------------------------------------------------------
    def encode_plain(self, text: str) -> list[int]:
        """Bytes and number tokens only (no literals): for free text inside thoughts and contents."""
        ids: list[int] = []
        pos = 0
        for match in _NUMBER_RE.finditer(text):
            ids += self._bytes(text[pos : match.start()])
            ids += self._digits(match.group())
            pos = match.end()
        ids += self._bytes(text[pos:])
        return ids

    def encode(self, text: str) -> list[int]:
        """Greedy: literals where they occur, numbers as single tokens, other text as UTF-8 bytes."""
        ids: list[int] = []
        plain_start = 0
        for match in self._literal_re.finditer(text):
            ids += self.encode_plain(text[plain_start : match.start()])
            ids.append(self.literal_ids[match.group()])
            plain_start = match.end()
        ids += self.encode_plain(text[plain_start:])
        return ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        """Inverse of `encode`; bytes are gathered so multi-byte UTF-8 characters survive."""
        out: list[str] = []
        pending = bytearray()
        for token_id in ids:
            if self.byte_offset <= token_id < self.number_offset:
                pending.append(token_id - self.byte_offset)
                continue
            if pending:
                out.append(pending.decode("utf-8", errors="replace"))
                pending.clear()
            if token_id < self.byte_offset:
                if not skip_special:
                    out.append(self.tokens[token_id])
            elif token_id < self.literal_offset:
                out.append(str(token_id - self.number_offset))
            elif token_id < self.vocab_size:
                out.append(self.tokens[token_id])
            else:
                out.append(self.tokens[self.unk_id])
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    def token_text(self, token_id: int) -> str:
        """Readable text of one token (vLLM's `logprobs.content[].token`)."""
        if self.byte_offset <= token_id < self.number_offset:
            return bytes([token_id - self.byte_offset]).decode("latin-1")
        return self.decode([token_id], skip_special=False)

    def _bytes(self, text: str) -> list[int]:
        return [self.byte_offset + b for b in text.encode("utf-8")]

    def _digits(self, digits: str) -> list[int]:
        # Leading zeros and out-of-range values stay bytes, so decoding reproduces them exactly.
        if (digits == "0" or not digits.startswith("0")) and int(digits) <= MAX_NUMBER:
            return [self.number_offset + int(digits)]
        return self._bytes(digits)

    # persistence ------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        (path / self.vocab_file).write_text(json.dumps({"tokens": self.tokens}, ensure_ascii=False))
        config = {"tokenizer_class": "FlywheelTokenizer", "max_number": MAX_NUMBER}
        (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> FlywheelTokenizer:
        path = Path(directory) / cls.vocab_file
        if not path.is_file():
            raise TokenizerError(f"no {cls.vocab_file} in {directory}")
        saved = json.loads(path.read_text())["tokens"]
        tokenizer = cls()
        if saved != tokenizer.tokens:
            raise TokenizerError(f"{path} does not match this code's vocabulary")
        return tokenizer
