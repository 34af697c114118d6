"""Word error rate with one normalisation for reference and hypothesis.

Normalisation (applied identically to both sides, so the score measures recognition, not spelling):
lower case; digits spelled out as words ("25" -> "twenty five", "3rd" -> "third"); hyphens and
slashes split words; every other punctuation mark removed except apostrophes inside a word
("I'm" stays one token); contractions expanded as Whisper's English normaliser expands them ("i'm" ->
"i am", "won't" -> "will not", "they'll" -> "they will"; "'s" is left alone: it is "is", "has" or a
possessive); a few spelling variants folded ("okay" -> "ok", "dropdown" -> "drop down").

The edit-distance alignment is exposed (`align_tokens`) because the ASR benchmark also uses it to
decide which hypothesis word stands for which reference word when scoring step alignment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINAL_ENDINGS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                    "nine": "ninth", "twelve": "twelfth"}  # fmt: skip
# Spelling variants of one spoken form, folded both ways consistently (compounds split).
_VARIANTS = {
    "okay": "ok",
    "alright": "all right",
    "dropdown": "drop down",
    "login": "log in",
    "popup": "pop up",
}
# Whisper's EnglishTextNormalizer contractions (whole words first, then endings), minus "'s".
_CONTRACTIONS = {
    "won't": "will not",
    "can't": "can not",
    "let's": "let us",
    "ain't": "aint",
    "y'all": "you all",
}
_ENDINGS = (
    ("n't", " not"),
    ("'re", " are"),
    ("'d", " would"),
    ("'ll", " will"),
    ("'ve", " have"),
    ("'m", " am"),
)
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")

Op = Literal["ok", "sub", "del", "ins"]


def number_to_words(n: int) -> str:
    """Spell a non-negative integer below one million in English words ("105" -> "one hundred five")."""
    if n < 0 or n >= 1_000_000:
        raise ValueError(f"number out of supported range: {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + number_to_words(rest))
    thousands, rest = divmod(n, 1000)
    return number_to_words(thousands) + " thousand" + ("" if rest == 0 else " " + number_to_words(rest))


def _ordinal_words(n: int) -> str:
    words = number_to_words(n).split()
    last = words[-1]
    if last in _ORDINAL_ENDINGS:
        words[-1] = _ORDINAL_ENDINGS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def _spell_token(token: str) -> list[str]:
    if token.isdigit():
        return number_to_words(int(token)).split() if len(token) <= 6 else list(token)
    ordinal = _ORDINAL.match(token)
    if ordinal and len(ordinal.group(1)) <= 6:
        return _ordinal_words(int(ordinal.group(1))).split()
    if token in _CONTRACTIONS:
        return _CONTRACTIONS[token].split()
    for ending, expansion in _ENDINGS:
        if token.endswith(ending) and len(token) > len(ending):
            return (token[: -len(ending)] + expansion).split()
    return _VARIANTS.get(token, token).split()


def normalize_words(text: str) -> list[str]:
    """Normalised tokens of a text: see the module docstring for the rules."""
    # Thousands separators would otherwise split "1,000" into "1" and "000".
    lowered = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower()).replace("’", "'")
    tokens: list[str] = []
    for raw in _TOKEN.findall(re.sub(r"[-/_]", " ", lowered)):
        tokens.extend(_spell_token(raw))
    return tokens


@dataclass(frozen=True)
class EditStep:
    """One column of the edit alignment: indices into the token lists, None on the missing side."""

    op: Op
    ref_index: int | None
    hyp_index: int | None


@dataclass(frozen=True)
class WerResult:
    """Counts of one comparison; `wer` is (sub + del + ins) / reference length (0 when both are empty)."""

    substitutions: int
    deletions: int
    insertions: int
    ref_words: int
    hyp_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        if self.ref_words == 0:
            return 0.0 if self.hyp_words == 0 else 1.0
        return self.errors / self.ref_words


def align_tokens(ref: Sequence[str], hyp: Sequence[str]) -> list[EditStep]:
    """Minimum edit-distance alignment (Levenshtein, unit costs) of two token lists, in order.

    Ties prefer a match/substitution over insert/delete so that equal-length stretches pair up
    one-to-one, which is what the step-alignment scoring wants.
    """
    n, m = len(ref), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        cost[i][0] = i
    for j in range(1, m + 1):
        cost[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            diagonal = cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            cost[i][j] = min(diagonal, cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    steps: list[EditStep] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and cost[i][j] == cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            steps.append(EditStep("ok" if ref[i - 1] == hyp[j - 1] else "sub", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and cost[i][j] == cost[i - 1][j] + 1:
            steps.append(EditStep("del", i - 1, None))
            i -= 1
        else:
            steps.append(EditStep("ins", None, j - 1))
            j -= 1
    steps.reverse()
    return steps


def word_error_counts(ref_tokens: Sequence[str], hyp_tokens: Sequence[str]) -> WerResult:
    """WER counts for already-normalised token lists."""
    steps = align_tokens(ref_tokens, hyp_tokens)
    return WerResult(
        substitutions=sum(s.op == "sub" for s in steps),
        deletions=sum(s.op == "del" for s in steps),
        insertions=sum(s.op == "ins" for s in steps),
        ref_words=len(ref_tokens),
        hyp_words=len(hyp_tokens),
    )


def word_error_rate(reference: str, hypothesis: str) -> WerResult:
    """Normalise both texts and count substitutions, deletions and insertions."""
    return word_error_counts(normalize_words(reference), normalize_words(hypothesis))
