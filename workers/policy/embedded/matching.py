"""Instruction–element match features of the embedded model's prompt (`config.instruction_match`).

A task like click-button, click-link or click-tab is solved by the element whose text the
instruction names. Matching a byte-level instruction against byte-level element texts is something
a small transformer trained on a handful of demonstrations does not learn (measured: a 120-step SFT
model solves those tasks on 0-13 % of held-out seeds, and 30 minutes of RL moved their sampled
success but not the greedy choice). DOM-based MiniWoB agents give the network that alignment as an
input instead (Liu et al. 2018, "Reinforcement Learning on Web Interfaces Using Workflow-Guided
Exploration", DOMNet's utterance/element alignment features); this module computes two such
features per prompt token, from the token ids alone, so training, serving and scoring share them:

- word: 1.0 for a token of an element's quoted text whose word also occurs in the instruction;
- line: for every token of an element line (`[i] tag "text" (x,y)`, prompts.format_elements), the
  fraction of the words of that element's text that occur in the instruction — so the coordinate
  tokens the copy head points at carry "my element is the one the instruction names".

An instruction can name an element by its kind rather than its text ('Click on a "textarea"
widget.'): an element whose tag (`textarea`, `input:checkbox`) has a word the instruction quotes
is fully named (line 1.0, whatever its label says). Only quoted words: 'Click the "OK" button.'
names the text OK, and every button would otherwise match "button".

An element that merely repeats the instruction (MiniWoB shows it in a banner that is part of the
element list) gets neither feature: otherwise it would be the best match on every page.

Words are runs of ASCII letters, digits or non-ASCII bytes, compared case-insensitively; each number
token (the tokenizer's single-token integers) is a word of its own. The prompt layout is
prompts.build_embedded_prompt: "Instruction: …\\nElements:\\n<lines>\\n(Summary: …\\n)History: …".
A prompt without that layout gets zeros.
"""

from __future__ import annotations

import re

import torch

from workers.policy.embedded.tokenizer import FlywheelTokenizer

N_FEATURES = 2
ECHO_WORDS = 3
ECHO_SHARE = 0.6
_NUMBER = "\ue000"  # one character per number token, so string index == token index
_OTHER = "\ue001"  # literals and specials
_WORD = re.compile(r"[0-9A-Za-z\x80-\xff]+|" + _NUMBER)
_INSTRUCTION = "Instruction: "
_ELEMENTS = "\nElements:\n"
_SECTION_ENDS = ("\nSummary: ", "\nHistory:")


def _as_text(ids: list[int], tok: FlywheelTokenizer) -> str:
    """One character per token: bytes as latin-1 characters, numbers and literals as markers."""
    chars = []
    for t in ids:
        if tok.byte_offset <= t < tok.number_offset:
            chars.append(chr(t - tok.byte_offset))
        elif tok.is_number(t):
            chars.append(_NUMBER)
        else:
            chars.append(_OTHER)
    return "".join(chars)


def _words(text: str, ids: list[int], start: int, end: int) -> list[tuple[int, int, str]]:
    """(start, end, key) of each word in text[start:end]; a number token's key is its value."""
    out = []
    for m in _WORD.finditer(text, start, end):
        key = f"#{ids[m.start()]}" if m.group() == _NUMBER else m.group().lower()
        out.append((m.start(), m.end(), key))
    return out


def _echoes(words: list[tuple[int, int, str]], hits: list[tuple[int, int]], wanted: set[str]) -> bool:
    """An element that repeats most of the instruction (MiniWoB's own instruction banner, a page
    title quoting the task) is the instruction's display, not what it names: at least ECHO_WORDS
    words of its own, covering at least ECHO_SHARE of the instruction's distinct words."""
    if len(words) < ECHO_WORDS or not wanted:
        return False
    covered = {key for a, b, key in words if (a, b) in hits}
    return len(covered) / len(wanted) >= ECHO_SHARE


def _quoted_words(text: str, ids: list[int], start: int, end: int) -> set[str]:
    """The words inside the instruction's double quotes (text[start:end])."""
    out: set[str] = set()
    q = text.find('"', start, end)
    while q >= 0:
        close = text.find('"', q + 1, end)
        if close < 0:
            break
        out.update(key for _, _, key in _words(text, ids, q + 1, close))
        q = text.find('"', close + 1, end)
    return out


def row_features(ids: list[int], tok: FlywheelTokenizer) -> list[tuple[float, float]]:
    """Features of one prompt's token ids (no padding): [(word, line)] per token."""
    feats = [(0.0, 0.0)] * len(ids)
    text = _as_text(ids, tok)
    boundary = text.find(_ELEMENTS)
    if boundary < 0:
        return feats
    first = len(_INSTRUCTION) if text.startswith(_INSTRUCTION) else 0
    wanted = {key for _, _, key in _words(text, ids, first, boundary)}
    quoted = _quoted_words(text, ids, first, boundary)
    start = boundary + len(_ELEMENTS)
    ends = [i for i in (text.find(mark, start) for mark in _SECTION_ENDS) if i >= 0]
    end = min(ends, default=len(text))
    feats = list(feats)
    line_start = start
    while line_start < end:
        line_end = text.find("\n", line_start, end)
        line_end = end if line_end < 0 else line_end
        q1, q2 = text.find('"', line_start, line_end), text.rfind('"', line_start, line_end)
        words = _words(text, ids, q1 + 1, q2) if 0 <= q1 < q2 else []
        hits = [(a, b) for a, b, key in words if key in wanted]
        if _echoes(words, hits, wanted):
            hits = []
        kind = _words(text, ids, line_start, q1) if q1 >= 0 else []
        kind_hits = [(a, b) for a, b, key in kind if key in quoted and not key.startswith("#")]
        line = 1.0 if kind_hits else len(hits) / len(words) if words else 0.0
        for j in range(line_start, line_end):
            feats[j] = (0.0, line)
        for a, b in hits + kind_hits:
            for j in range(a, b):
                feats[j] = (1.0, line)
        line_start = line_end + 1
    return feats


def instruction_match_features(
    prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, tok: FlywheelTokenizer
) -> torch.Tensor:
    """prompt_ids / prompt_mask [B, Lp] (right-padded) -> [B, Lp, N_FEATURES] float (word, line);
    padding gets zeros."""
    b, lp = prompt_ids.shape
    out = torch.zeros(b, lp, N_FEATURES)
    lengths = prompt_mask.long().sum(dim=1).tolist()
    for row, (ids, n) in enumerate(zip(prompt_ids.tolist(), lengths, strict=True)):
        feats = row_features(ids[:n], tok)
        if feats:
            out[row, :n] = torch.tensor(feats)
    return out.to(prompt_ids.device)
