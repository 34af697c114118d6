"""Value types shared by the ASR pipeline (no heavy imports, so alignment code can use them cheaply)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Word:
    """One recognised word on the session clock.

    `text` is verbatim as the recogniser wrote it (punctuation kept, surrounding spaces stripped);
    `start`/`end` are session-clock seconds with start <= end; `probability` is the recogniser's
    confidence in [0, 1].
    """

    text: str
    start: float
    end: float
    probability: float

    @property
    def midpoint(self) -> float:
        return (self.start + self.end) / 2.0

    def shifted(self, offset_s: float) -> Word:
        """The same word moved by `offset_s` seconds (e.g. from clip time to session time)."""
        return Word(self.text, self.start + offset_s, self.end + offset_s, self.probability)


def continues(previous: str, piece: str) -> bool:
    """True when `piece` is the tail of the word `previous`, split by the recogniser: ".14" after
    "3", ".0" after "2" (decimals, versions, times), "+T" after "Ctrl+Shift" or "T" after "Ctrl+"."""
    if not previous or not piece:
        return False
    if piece[0] in ".:," and piece[1:2].isdigit():
        return previous[-1].isdigit()
    return piece[0] == "+" or previous[-1] == "+"


def join_words(words: tuple[Word, ...] | list[Word]) -> str:
    """Verbatim text of a run of words: single-spaced, except that the pieces of one number,
    version or shortcut are joined ("3" ".14" -> "3.14", "2" ".0" ".1" -> "2.0.1")."""
    out = ""
    for w in words:
        if not w.text:
            continue
        if out and not continues(out, w.text):
            out += " "
        out += w.text
    return out


def merge_pieces(pieces: list[tuple[str, float, float, float]]) -> list[Word]:
    """Recogniser word pieces (raw text with Whisper's leading space, start, end, probability) to
    words: a piece without a leading space continues the previous word (text joined, span
    extended, the lower confidence kept)."""
    words: list[Word] = []
    for raw, start, end, probability in pieces:
        text = raw.strip()
        if not text:
            continue
        if words and not raw[:1].isspace():
            prev = words[-1]
            words[-1] = Word(
                prev.text + text, prev.start, max(prev.end, end), min(prev.probability, probability)
            )
        else:
            words.append(Word(text, start, end, probability))
    return words


def word_json(w: Word) -> dict[str, Any]:
    """A word as every stored transcript holds it (steps, the trailing bucket, chunks): {w, start, end, p}."""
    return {"w": w.text, "start": round(w.start, 3), "end": round(w.end, 3), "p": round(w.probability, 4)}


def word_of(d: dict[str, Any]) -> Word:
    """The inverse of `word_json`."""
    return Word(str(d["w"]), float(d["start"]), float(d["end"]), float(d.get("p", 1.0)))


@dataclass(frozen=True)
class Transcript:
    """Result of one transcription.

    `words` are in time order on the session clock; `text` is the verbatim transcript of exactly
    those words; `audio_s` is the length of the audio given, `processing_s` the wall time spent.
    """

    words: tuple[Word, ...]
    audio_s: float
    processing_s: float
    model: str
    dropped_words: int = 0
    retried_spans: int = 0  # speech regions decoded again because the first pass found nothing sure
    lost_spans: int = 0  # ... of which the second decode found nothing either (speech left out)
    looped_words: int = 0  # words of the decoder's repetition loops left out (transcribe.collapse_loops)

    @property
    def text(self) -> str:
        return join_words(self.words)

    @property
    def rtf(self) -> float:
        """Real-time factor: processing time per second of audio (lower is faster)."""
        return self.processing_s / self.audio_s if self.audio_s > 0 else 0.0
