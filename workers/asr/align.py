"""Assign think-aloud words to the actions they explain.

Action i (0-based) executed at session-clock second t_i; t_{-1} = -inf. Window i is (t_{i-1}, t_i]:
what is said before an action, since the previous one, explains it. Speech after the last action
falls in window n (n = number of actions), the trailing bucket.

The rule, in order:

1. Words are sorted by start time; a word repeated by overlapping chunk transcriptions (same
   normalised text, overlapping more than half of the shorter one) is kept once, the more
   confident copy.
2. Words are grouped into phrases: a phrase ends where a word ends a sentence (`.`, `?`, `!`), or
   where the silence to the next word is at least `phrase_gap_s` (0.35 s). A phrase is never
   split: the review UI can still move single words with `move_boundary`. (Commas are no signal:
   Whisper, conditioned on earlier text, often joins separate sentences with commas.)
3. Each word votes for the window holding its midpoint (a midpoint exactly at t_i votes for step
   i: speech up to the moment of the click explains the click).
4. A phrase whose words all vote for one window goes to that step.
5. A phrase that crosses exactly one action t_i (words in windows i and i+1):
   - straddling, "lag": it began before t_i and every word after t_i starts within `lag_s`
     (1.5 s) of it -> step i (the annotator was finishing the sentence while clicking);
   - "lead": every word before t_i starts within `lead_s` before it -> step i+1 (the next thought
     began as the click landed);
   - both or neither: the step whose window holds most of the phrase's speech time (the action it
     mostly precedes); a tie goes to the earlier step.
6. A phrase crossing several actions goes to the window holding most of its speech time.
7. Trailing speech (window n): `trailing="final"` (default) returns it in an extra bucket with
   `step_index == n` and `action_time is None` (closing remarks such as "okay, done" are kept apart
   rather than rewriting the last step's thought); `trailing="last"` appends it to the last step.
   With no actions at all, everything is trailing and lands in the final bucket.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from workers.asr.types import Word, join_words
from workers.asr.wer import normalize_words

_SENTENCE_END = (".", "?", "!")


class AlignmentError(ValueError):
    """Inputs to alignment are inconsistent (unsorted action times, bad step index, ...)."""


@dataclass(frozen=True)
class StepSpeech:
    """The speech assigned to one step: its words (session clock, time order) and verbatim text.

    `action_time` is None for the trailing bucket.
    """

    step_index: int
    action_time: float | None
    words: tuple[Word, ...]

    @property
    def text(self) -> str:
        return join_words(self.words)

    @property
    def is_final(self) -> bool:
        return self.action_time is None


def _overlap(a: Word, b: Word) -> float:
    return max(0.0, min(a.end, b.end) - max(a.start, b.start))


def dedupe_words(words: Sequence[Word]) -> list[Word]:
    """Sort by start and drop duplicates from overlapping chunks (rule 1 of the module docstring)."""
    kept: list[Word] = []
    for word in sorted(words, key=lambda w: (w.start, w.end)):
        twin = next(
            (
                k
                for k, prev in enumerate(kept[-3:], start=max(0, len(kept) - 3))
                if normalize_words(prev.text) == normalize_words(word.text)
                and _overlap(prev, word) > 0.5 * min(prev.end - prev.start, word.end - word.start)
            ),
            None,
        )
        if twin is None:
            kept.append(word)
        elif word.probability > kept[twin].probability:
            kept[twin] = word
    return kept


def split_phrases(words: Sequence[Word], gap_s: float) -> list[list[Word]]:
    """Group time-ordered words into phrases (rule 2)."""
    phrases: list[list[Word]] = []
    for word in words:
        if phrases:
            last = phrases[-1][-1]
            if word.start - last.end < gap_s and not last.text.endswith(_SENTENCE_END):
                phrases[-1].append(word)
                continue
        phrases.append([word])
    return phrases


def window_of(t: float, action_times: Sequence[float]) -> int:
    """Index of the window (t_{i-1}, t_i] holding t; len(action_times) when after the last action."""
    return bisect.bisect_left(action_times, t)


def _majority_window(phrase: list[Word], windows: list[int]) -> int:
    weight: dict[int, float] = {}
    for word, window in zip(phrase, windows, strict=True):
        # A zero-length word still counts a little, so a phrase of such words is not a 0-0 tie.
        weight[window] = weight.get(window, 0.0) + max(word.end - word.start, 1e-3)
    best = max(weight.values())
    return min(w for w, v in weight.items() if v == best)


def phrase_step(phrase: list[Word], action_times: Sequence[float], lead_s: float, lag_s: float) -> int:
    """The window a phrase belongs to (rules 3-6)."""
    windows = [window_of(w.midpoint, action_times) for w in phrase]
    first, last = windows[0], windows[-1]
    if first == last:
        return first
    if last == first + 1:
        t = action_times[first]
        lag = all(w.start <= t + lag_s for w, win in zip(phrase, windows, strict=True) if win == last)
        lead = all(w.start >= t - lead_s for w, win in zip(phrase, windows, strict=True) if win == first)
        if lag != lead:
            return first if lag else last
    return _majority_window(phrase, windows)


def _check_times(action_times: Sequence[float], lead_s: float, lag_s: float) -> list[float]:
    times = [float(t) for t in action_times]
    if any(not math.isfinite(t) for t in times):
        raise AlignmentError("action times must be finite numbers")
    if any(b < a for a, b in itertools.pairwise(times)):
        raise AlignmentError("action times must be in non-decreasing order")
    if lead_s < 0 or lag_s < 0:
        raise AlignmentError(f"lead_s and lag_s must be >= 0, got {lead_s}, {lag_s}")
    return times


def align_words(
    words: Sequence[Word],
    action_times: Sequence[float],
    *,
    lead_s: float = 0.5,
    lag_s: float = 1.5,
    phrase_gap_s: float = 0.35,
    trailing: Literal["final", "last"] = "final",
) -> list[StepSpeech]:
    """Assign words to steps by the rule in the module docstring.

    `words` and `action_times` are on the same (session) clock. Returns one StepSpeech per action,
    in order, plus the trailing bucket when `trailing == "final"` (or when there are no actions).
    """
    times = _check_times(action_times, lead_s, lag_s)
    if trailing not in ("final", "last"):
        raise AlignmentError(f"trailing must be 'final' or 'last', got {trailing!r}")
    buckets: list[list[Word]] = [[] for _ in range(len(times) + 1)]
    for phrase in split_phrases(dedupe_words(words), phrase_gap_s):
        buckets[phrase_step(phrase, times, lead_s, lag_s)].extend(phrase)
    steps = [StepSpeech(i, t, tuple(buckets[i])) for i, t in enumerate(times)]
    final = StepSpeech(len(times), None, tuple(buckets[-1]))
    if trailing == "last" and steps:
        steps[-1] = replace(steps[-1], words=steps[-1].words + final.words)
        return steps
    return [*steps, final]


def move_boundary(
    steps: Sequence[StepSpeech],
    *,
    step_index: int,
    direction: Literal["previous", "next"],
    count: int = 1,
) -> list[StepSpeech]:
    """Move `count` boundary words of one step to its neighbour; returns a new list.

    "next" moves the step's last words to the start of the following step; "previous" moves its
    first words to the end of the preceding step, so words stay in time order in both steps.
    `step_index` is a position in `steps`. Raises AlignmentError when there is no such neighbour
    or the step has fewer than `count` words.
    """
    if not 0 <= step_index < len(steps):
        raise AlignmentError(f"no step at position {step_index} (have {len(steps)})")
    if direction not in ("previous", "next"):
        raise AlignmentError(f"direction must be 'previous' or 'next', got {direction!r}")
    target = step_index + (1 if direction == "next" else -1)
    if not 0 <= target < len(steps):
        raise AlignmentError(f"step at position {step_index} has no {direction} step")
    source = steps[step_index]
    if count < 1 or count > len(source.words):
        raise AlignmentError(f"cannot move {count} word(s): step {step_index} has {len(source.words)}")
    result = list(steps)
    if direction == "next":
        moved, remaining = source.words[-count:], source.words[:-count]
        result[target] = replace(steps[target], words=moved + steps[target].words)
    else:
        moved, remaining = source.words[:count], source.words[count:]
        result[target] = replace(steps[target], words=steps[target].words + moved)
    result[step_index] = replace(source, words=remaining)
    return result
