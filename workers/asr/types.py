"""Value types shared by the ASR pipeline (no heavy imports, so alignment code can use them cheaply)."""

from __future__ import annotations

from dataclasses import dataclass


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


def join_words(words: tuple[Word, ...] | list[Word]) -> str:
    """Verbatim text of a run of words, single-spaced."""
    return " ".join(w.text for w in words if w.text)


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

    @property
    def text(self) -> str:
        return join_words(self.words)

    @property
    def rtf(self) -> float:
        """Real-time factor: processing time per second of audio (lower is faster)."""
        return self.processing_s / self.audio_s if self.audio_s > 0 else 0.0
