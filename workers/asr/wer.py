"""Word error rate with one normalisation for reference and hypothesis: Whisper's own English
normaliser (`EnglishTextNormalizer`, as shipped with transformers; the one the Whisper paper scores
with), applied identically to both sides, so the score measures recognition, not spelling. It lower-
cases, removes punctuation and filler words ("um", "hmm"), expands contractions ("i'm" -> "i am",
"won't" -> "will not") and standardises numbers to digits ("twenty five" and "25" -> "25", "third" ->
"3rd"). Whisper's optional British-to-American spelling map is not shipped offline and is not used.

Numbers spanning several words ("twenty five") normalise as a whole only when normalised together,
so callers normalise whole sentences or runs of words, never single words of a longer number.

The edit-distance alignment is exposed (`align_tokens`) because the ASR benchmark also uses it to
decide which hypothesis word stands for which reference word when scoring step alignment.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Op = Literal["ok", "sub", "del", "ins"]


@functools.cache
def _normalizer() -> Any:
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    return EnglishTextNormalizer({})


def normalize_words(text: str) -> list[str]:
    """Whisper-normalised tokens of a text."""
    return str(_normalizer()(text.replace("\u2019", "'"))).split()


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
