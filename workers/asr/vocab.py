"""The task's own vocabulary for the recogniser: hotwords before decoding, snapping near misses after.

Think-aloud names what is on the screen ("LibreOffice Calc", "B12", "Ctrl+Shift+T") and a small
Whisper mishears it ("the office call", "beat well", "control plus shift plus D") although the task
instruction and the screen spell it out. Two uses of that text:

1. `terms(texts)`: the distinctive terms of the instruction, element names and typed text (words
   with capitals inside, digits or symbols, runs of capitalised words); `hotwords(terms)` gives
   them to faster-whisper's `hotwords`, which biases decoding towards them, each term written
   otherwise than it is said followed by how it is said ("~/notes.txt, tilde slash notes dot txt").
2. `snap_words(words, terms)`: after decoding, a run of 1-7 words is replaced by a term when the two
   *sound* alike: both are spelled out as spoken ("B12" -> "bee twelve", "Ctrl+Shift+T" -> "control
   plus shift plus tee", "3.14" -> "three point one four") and compared letter by letter and by
   consonant skeleton (`likeness`). A run whose mean confidence is below `max_probability` (0.95)
   needs a likeness of `min_ratio` (0.7); a confident run needs `sure_ratio` (0.8): a larger Whisper
   repeats its own mishearing of a term with full confidence once it has written it ("the low-not
   txt" for hello.txt, four more times at p 0.96-1.0), so confidence alone cannot protect a run.
   A short term (spelled out in fewer than SHORT_TERM_LETTERS letters: "3D", "B5", "Flywheel")
   needs `sure_ratio` from any run: at 0.7 too many everyday words sound like it ("the user" ->
   "3D"). A run holding a term heard right ("LibreOffice first") is compared with a longer term
   ("LibreOffice Impress") by the words in which the two differ. Only terms from the given texts
   can come out.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workers.asr.types import Word

# Chosen on the hard set's validation sessions, raw transcripts of tiny.en and base cached and
# snapped again (benchmarks/HISTORY.md, asr): a likeness of 0.75 no longer snaps "the office call"
# to "LibreOffice Calc", issue 32's own example.
RUN_BONUS = 0.01  # per word of a run: a longer run that sounds almost as alike is preferred
MAX_SNAP_PROBABILITY = 0.95  # a run at least this sure on average needs SURE_SNAP_RATIO
MIN_SNAP_RATIO = 0.7
SURE_SNAP_RATIO = 0.8
SHORT_TERM_LETTERS = 10  # a term that sounds shorter needs SURE_SNAP_RATIO from any run
MAX_SNAP_SPAN = 7  # "till the slash notes dot m d" is 7 words for ~/notes.md
SHORT_TEXT_WORDS = 3
MIN_LENGTH_RATIO = 0.75
MAX_TERMS = 40  # hotwords share Whisper's 224-token prompt; the rest of the list is ignored
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_LETTERS = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        "a bee see dee e ef gee aitch i jay kay el em en o pee queue ar es tee you vee doubleyou ex why zed".split(),
        strict=True,
    )
)
_KEYS = {"ctrl": "control", "alt": "alt", "del": "delete", "esc": "escape", "cmd": "command", "pgup": "page up",
         "pgdn": "page down", "+": " plus ", "/": " slash ", "_": " underscore ", "@": " at ", "#": " hash ",
         "&": " and ", "%": " percent ", "~": " tilde ", ":": " colon "}  # fmt: skip
_MODIFIER_HYPHEN = re.compile(r"(?i)\b(ctrl|control|alt|shift|cmd|command|super|meta|win|option|fn)-(?=\w)")
_CAPITALISED_RUN = re.compile(r"\b[A-Z][\w+.\-]*(?:\s+[A-Z][\w+.\-]*){0,2}")
_DISTINCT = re.compile(r"\S*(?:\d|[a-z][A-Z]|[+/_@#.:]\w)\S*")
_EDGE = ".,;:!?\"'()[]{}"
_SENTENCE_END = (".", "?", "!")


def number_words(n: int) -> str:
    """0..9999 spelled out ("480" -> "four hundred eighty"); larger numbers digit by digit."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))
    if n < 10000:
        return _ONES[n // 1000] + " thousand" + ("" if n % 1000 == 0 else " " + number_words(n % 1000))
    return " ".join(_ONES[int(d)] for d in str(n))


def _spoken_token(token: str) -> str:
    low = token.lower()
    if low in _KEYS:
        return _KEYS[low]
    if re.fullmatch(r"\d+(\.\d+)+", low):  # 3.14 / 2.0.1: each part, "point" between
        parts = low.split(".")
        return " point ".join(
            [number_words(int(parts[0]))] + [" ".join(_ONES[int(d)] for d in p) for p in parts[1:]]
        )
    if low.isdigit():
        return number_words(int(low))
    if len(low) == 1 and low in _LETTERS:
        return _LETTERS[low]
    if any(ch.isdigit() for ch in low):  # B12, A4: letters named, numbers spoken
        return " ".join(_spoken_token(p) for p in re.findall(r"\d+|[a-z]+", low))
    return low


def spoken(text: str) -> str:
    """How `text` sounds, as plain words: digits, key names and symbols spelled out. A key
    combination written with hyphens ("Ctrl-Shift-T": how Whisper writes "control shift T") sounds
    like the one written with "+" ("control plus shift plus tee")."""
    text = _MODIFIER_HYPHEN.sub(r"\1+", text)
    for symbol in "+/_@#&%~:":
        text = text.replace(symbol, f" {symbol} ")
    text = re.sub(r"(?<=[a-zA-Z])\.(?=[a-zA-Z])", " dot ", text)  # notes.txt, org.gnome
    text = re.sub(r"(?<=[a-zA-Z])(?=\d)|(?<=\d)(?=[a-zA-Z])", " ", text)
    tokens = re.findall(r"\d+(?:\.\d+)+|[^\s]+", text)
    return " ".join(
        _spoken_token(t if t in _KEYS else t.strip(_EDGE)) for t in tokens if t.strip(_EDGE) or t in _KEYS
    )


@functools.lru_cache(maxsize=4096)
def _sound(text: str) -> str:
    """`spoken(text)` as letters only (cached: a transcript's runs are compared with every term)."""
    return re.sub(r"[^a-z]", "", spoken(text).lower())


def terms(texts: Iterable[str]) -> list[str]:
    """Distinctive terms of the given texts (first seen first, at most MAX_TERMS): a short text as a
    whole (an element name, typed text), runs of capitalised words (a sentence's first word left
    out), and words with digits, inner capitals or symbols."""
    found: list[str] = []
    seen: set[str] = set()
    for text in texts:
        if not text:
            continue
        candidates = [m.group(0) for m in _DISTINCT.finditer(text)]
        if len(text.split()) <= SHORT_TEXT_WORDS and not re.search(r"[.!?]\s", text):
            candidates.insert(0, text.strip())  # an element name or typed text is a term as a whole
        for m in _CAPITALISED_RUN.finditer(text):
            run = m.group(0)
            sentence_start = m.start() == 0 or text[: m.start()].rstrip()[-1:] in ".!?:"
            if sentence_start:  # "Open LibreOffice Calc": the first word is capitalised as a start
                run = run.partition(" ")[2]
            if run:
                candidates.append(run)
        for term in candidates:
            term = term.strip(_EDGE)
            if len(_sound(term)) >= 2 and term.lower() not in seen:
                seen.add(term.lower())
                found.append(term)
    return found[:MAX_TERMS]


def hotwords(vocabulary: Sequence[str]) -> str | None:
    """The hotwords string for faster-whisper (None when there is no vocabulary): a punctuated list
    ("B12, Ctrl+Shift+T."): Whisper copies its prompt's style, and a bare "8" made it drop every
    full stop, which the step alignment splits phrases on. A term written otherwise than it is said
    is followed by how it is said ("~/notes.txt, tilde slash notes dot txt"): primed with the words
    it will hear, Whisper writes them ("tilde slash notes dot txt") where, primed with the symbols
    only, it wrote "till the session will start"; snapping then puts the term back. At most
    MAX_TERMS entries, a term and its spoken form counting as two."""
    if not vocabulary:
        return None
    entries: list[str] = []
    for term in vocabulary[:MAX_TERMS]:
        said = " ".join(spoken(term).split())
        entries += [term] if said.replace(" ", "") == term.lower().replace(" ", "") else [term, said]
    return ", ".join(entries[:MAX_TERMS]) + "."


def _skeleton(sound: str) -> str:
    """Consonants only, doubled letters once ("beatwell" -> "btwl"): what survives mishearing."""
    return re.sub(r"(.)\1+", r"\1", re.sub(r"[aeiouy]", "", sound))


@functools.lru_cache(maxsize=1024)
def _term_sounds(term: str) -> tuple[str, ...]:
    """The ways a term is said, as letters: `_sound`, and without the "underscore" that a speaker
    (and Whisper) leaves out of a name like line_count.txt."""
    full = _sound(term)
    bare = _sound(term.replace("_", " "))
    return (full,) if bare == full else (full, bare)


def likeness(heard: str, term: str) -> float:
    """How alike two texts sound, 0..1: the better of their spelled-out letters' and their
    consonant skeletons' similarity (the latter only for skeletons of 4+ letters); 0 when one is
    much longer than the other when spelled out. The best over the ways the term is said."""
    return max(_likeness(_sound(heard), b) for b in _term_sounds(term))


def _likeness(a: str, b: str) -> float:
    if not a or not b or min(len(a), len(b)) / max(len(a), len(b)) < MIN_LENGTH_RATIO:
        return 0.0  # a part of the term, or the term plus other words, is no near miss
    best = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    ka, kb = _skeleton(a), _skeleton(b)
    if min(len(ka), len(kb)) >= 4:
        best = max(best, difflib.SequenceMatcher(None, ka, kb, autojunk=False).ratio())
    return best


def _run_likeness(said: str, got: Sequence[str], term: str, vocabulary: set[str]) -> float:
    """`likeness` of a run to a term, 0 when the run holds the term heard right. A run holding
    another term heard right ("LibreOffice" in "LibreOffice first" against "LibreOffice Impress")
    is compared by the words in which it differs from the term, with the words they share at either
    end left out; 0 when nothing is left or the rest holds a term too: a right word is not misheard.
    `got`: the run's words, bare and lower-case (computed once per run, not once per term)."""
    want = term.lower().split()
    if list(got) == want or term.lower() in got:
        return 0.0  # the term was heard right
    if not any(w in vocabulary and w in want for w in got):
        return likeness(said, term)
    lead = 0
    while lead < min(len(got), len(want)) and got[lead] == want[lead]:
        lead += 1
    trail = 0
    while trail < min(len(got), len(want)) - lead and got[-1 - trail] == want[-1 - trail]:
        trail += 1
    rest = got[lead : len(got) - trail]
    if not rest or any(w in vocabulary for w in rest):
        return 0.0
    return likeness(" ".join(rest), " ".join(want[lead : len(want) - trail]))


def _loose_edge(run: Sequence[Word], term: str, ratio: float) -> bool:
    """True when the run's first or last word is not part of the term: the run without it sounds
    clearly more like the term ("I type B5" is not B5; "type" and "I" stay)."""
    if len(run) < 2:
        return False
    trimmed = (run[1:], run[:-1])
    return any(likeness(" ".join(w.text for w in part), term) > ratio + RUN_BONUS for part in trimmed)


@dataclass(frozen=True)
class Snap:
    """One replacement: the words replaced (their text) and the term put in."""

    said: str
    term: str
    ratio: float


def snap_words(
    words: Sequence[Word],
    vocabulary: Sequence[str],
    *,
    max_probability: float = MAX_SNAP_PROBABILITY,
    min_ratio: float = MIN_SNAP_RATIO,
    max_span: int = MAX_SNAP_SPAN,
    sure_ratio: float = SURE_SNAP_RATIO,
) -> tuple[list[Word], list[Snap]]:
    """Replace runs of words that sound like a vocabulary term (module docstring): a run whose mean
    confidence is below `max_probability` at a likeness of `min_ratio`, a surer one at `sure_ratio`.

    A run never crosses a sentence end (a word ending in . ? ! other than its last): a term is said
    inside one sentence, and a run across two merged their phrases into one word that the step
    alignment then filed whole under one step.
    The best-sounding match (plus RUN_BONUS per word of the run) anywhere is taken first, then the next best that
    does not overlap it, and so on. A replacement keeps the run's first start, last end, mean
    confidence and the last word's closing punctuation.
    """
    usable = [t for t in vocabulary if len(_sound(t)) >= 3]
    known = {t.lower() for t in vocabulary}
    found: list[tuple[float, int, int, str]] = []  # (ratio, run length, first word, term)
    for i in range(len(words)):
        for n in range(1, min(max_span, len(words) - i) + 1):
            run = words[i : i + n]
            if any(w.text.endswith(_SENTENCE_END) for w in run[:-1]):
                break  # a term is said inside one sentence: a run across its end merged two phrases
            needed = sure_ratio if sum(w.probability for w in run) / n >= max_probability else min_ratio
            said = " ".join(w.text for w in run)
            got = [w.text.strip(_EDGE).lower() for w in run]
            for term in usable:
                ratio = _run_likeness(said, got, term, known)
                floor = max(needed, sure_ratio) if len(_sound(term)) < SHORT_TERM_LETTERS else needed
                if ratio >= floor and not _loose_edge(run, term, ratio):
                    found.append((ratio, n, i, term))
    taken: dict[int, tuple[int, str, float]] = {}
    used: set[int] = set()
    # A run one word longer that sounds almost as alike is preferred ("control plus shift plus D"
    # over "control plus shift plus" for Ctrl+Shift+T): the mishearing usually spans the whole term.
    for ratio, n, i, term in sorted(found, key=lambda f: (-(f[0] + RUN_BONUS * f[1]), f[2])):
        if used.isdisjoint(range(i, i + n)):
            used.update(range(i, i + n))
            taken[i] = (n, term, ratio)
    out: list[Word] = []
    snaps: list[Snap] = []
    i = 0
    while i < len(words):
        if i not in taken:
            out.append(words[i])
            i += 1
            continue
        n, term, ratio = taken[i]
        run = words[i : i + n]
        tail = run[-1].text[len(run[-1].text.rstrip(".,;:!?")) :]
        mean_p = sum(w.probability for w in run) / n
        out.append(Word(term + tail, run[0].start, run[-1].end, mean_p))
        snaps.append(Snap(" ".join(w.text for w in run), term, round(ratio, 3)))
        i += n
    return out, snaps
