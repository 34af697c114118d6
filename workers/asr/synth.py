"""Synthetic think-aloud sessions with espeak-ng, with ground truth, for tests and the ASR benchmark.

A session is a timed action log plus speech narrating it, the way annotators think aloud: mostly
"say what I am about to do, then do it"; sometimes the action lands while the sentence is still
being finished (straddling); sometimes the next thought starts just before the click lands (lead);
sometimes a step is done silently or after a long pause; often a closing remark follows the last
action. Ground truth: every sentence belongs to the step it narrates (the final remark to the
trailing bucket, index = number of actions).

Audio is 16 kHz mono float32; `write_wav` stores it. Generate into a temporary directory: audio is
never committed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.asr.audio import SAMPLE_RATE, AudioChunk, decode_chunk, encode_audio
from workers.asr.wer import normalize_words

VOICES = ("en-us", "en-gb", "en-gb-x-rp", "en-us-nyc")
SPEEDS_WPM = (140, 155, 170, 185)
# Speech sets: "generator" (the templates below, which the ASR settings were chosen on) and
# "unscripted" (unlike them: technical words, pauses in the middle of sentences, slow and fast
# speakers), for a figure on speech no decision was made on.
SPEECH_SETS = ("generator", "unscripted", "technical")
UNSCRIPTED_SPEEDS_WPM = (110, 125, 215, 240)

_TARGETS = ("settings menu", "search box", "file menu", "save button", "address bar", "login form",
            "download folder", "print dialog", "network tab", "user profile", "calendar page",
            "shopping cart", "first result", "dropdown list", "share button", "display panel")  # fmt: skip
_NAMES = ("the report", "my password", "the invoice number", "John Smith", "the meeting notes", "hello world")
_PLAIN = (
    "I need to open the {t} first",
    "now I click the {t}",
    "let me scroll down to find the {t}",
    "I think the {t} is on the left side",
    "so the next thing is the {t}",
    "I will double click on the {t}",
    "the {t} should be right at the top",
    "I have to close the {t} again",
)
_TYPING = (
    "now I click the {t} and type {n}",
    "I type {n} into the {t}",
    "let me enter {n} here",
)
_NUMBERS = (
    "I select row {k} in the table",
    "I go to page {k} of the results",
    "I pick option {k} from the list",
)
# Longer sentences used when the action lands mid-sentence: the narration runs on past the click.
_STRADDLE = (
    "I click the {t} and then wait for the window to finish loading",
    "I open the {t} because the option I want should be somewhere inside it",
    "I press the {t} and hope that it saves everything I changed",
)
_FINAL = (
    "okay that looks right so the task is done",
    "good the changes are saved now",
    "that worked I am finished",
)
_TECH_FIELDS = ("bearer token", "endpoint", "webhook", "environment variable", "username", "API base URL")
_TECH_KEYS = ("created at", "user ID", "status code", "latency", "timestamp", "tenant")
_TECH = (
    "okay so I paste the API key into the {f} field",
    "hmm the {f} still gives me a four oh four error",
    "I need to check whether the JSON payload has the {k} key",
    "let me open the terminal and run npm install",
    "now the Kubernetes dashboard should list the {k} pod",
    "I copy the SSH key from the clipboard",
    "the regex does not match the {k} column yet",
    "so I set the timeout to thirty seconds in the YAML config",
    "wait the OAuth redirect goes to localhost port eight thousand",
    "I filter the CSV export by the {k} column",
    "I think PostgreSQL rejected the migration because of the {k} index",
    "right I toggle dark mode in the preferences",
    "I drag the {k} widget onto the canvas",
    "then I git push to the staging branch",
    "the {f} ends in slash callback",
    "I am going to clear the browser cache and reload the tab",
    "apparently the Docker container restarted twice",
    "let me grep the logs for the {k} field",
)
_BACKGROUND = (
    "did you see the game last night",
    "can you pass me the coffee please",
    "we should order lunch soon",
    "the meeting moved to three",
    "my phone is almost out of battery",
    "it is raining again outside",
)
_TECH_FINAL = (
    "alright the deploy went through",
    "great the build is green now",
    "fine that fixed the flaky test",
)


# Think-aloud around the names of a shipped task (its instruction's terms, workers.asr.vocab.terms).
_TASK_TALK = (
    "okay now I need {v} for this",
    "so the task says {v} here",
    "let me look for {v} first",
    "I type {v} into the field",
    "right {v} should be on the screen now",
    "I think {v} is what it wants",
)
TASK_DIRS = ("workers/envs/osworld_examples", "tests/envs/osworld_tasks")


@functools.lru_cache(maxsize=1)
def shipped_instructions() -> tuple[str, ...]:
    """The instructions of the OSWorld-style tasks shipped in the repository, in file order."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for folder in TASK_DIRS:
        for path in sorted((root / folder).glob("*.json")):
            instruction = json.loads(path.read_text()).get("instruction", "")
            if isinstance(instruction, str) and instruction:
                found.append(instruction)
    return tuple(found)


@dataclass(frozen=True)
class SynthAction:
    """One action of the log: step index and the session-clock second it executed."""

    step: int
    time: float
    description: str


@dataclass(frozen=True)
class SynthSentence:
    """One spoken sentence: text, the step it narrates, and its clock span (trimmed of silence)."""

    text: str
    step: int
    start: float
    end: float


@dataclass(frozen=True)
class SynthSession:
    """A generated session: audio from `start_clock`, its action log and the spoken ground truth."""

    audio: np.ndarray
    start_clock: float
    actions: tuple[SynthAction, ...]
    sentences: tuple[SynthSentence, ...]
    voice: str
    speed_wpm: int
    instruction: str = ""  # the task being narrated ("technical" set): its terms are the vocabulary
    background: tuple[SynthSentence, ...] = ()  # another speaker in the room: not the annotator's thoughts

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE

    @property
    def action_times(self) -> list[float]:
        return [a.time for a in self.actions]

    @property
    def transcript(self) -> str:
        """The reference transcript: every sentence in spoken order."""
        return " ".join(s.text for s in sorted(self.sentences, key=lambda s: s.start))

    def reference_words(self) -> list[tuple[str, int]]:
        """Normalised reference tokens in spoken order, each with its ground-truth step index."""
        return [
            (tok, s.step)
            for s in sorted(self.sentences, key=lambda s: s.start)
            for tok in normalize_words(s.text)
        ]


@functools.lru_cache(maxsize=1024)
def speak(text: str, voice: str, speed_wpm: int) -> np.ndarray:
    """espeak-ng speech for `text` as 16 kHz mono float32, leading/trailing silence trimmed.

    Cached (sessions reuse sentences); the returned array is read-only for that reason.
    """
    result = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed_wpm), "--stdout", text],
        capture_output=True,
        check=True,
        timeout=60,
    )
    samples = trim_silence(decode_chunk(result.stdout))
    samples.flags.writeable = False
    return samples


def trim_silence(samples: np.ndarray, threshold: float = 1e-3) -> np.ndarray:
    """Cut leading/trailing samples quieter than `threshold` so sentence spans are exact."""
    loud = np.flatnonzero(np.abs(samples) > threshold)
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


def _sentence(
    rng: random.Random, step_kind: str, speech_set: str = "generator", vocabulary: tuple[str, ...] = ()
) -> str:
    if speech_set == "technical" and vocabulary:
        return rng.choice(_TASK_TALK).format(v=rng.choice(vocabulary))
    if speech_set == "unscripted":
        return rng.choice(_TECH).format(f=rng.choice(_TECH_FIELDS), k=rng.choice(_TECH_KEYS))
    target, name, k = rng.choice(_TARGETS), rng.choice(_NAMES), rng.randint(2, 12)
    pool = {"plain": _PLAIN, "typing": _TYPING, "number": _NUMBERS, "straddle": _STRADDLE}[step_kind]
    return rng.choice(pool).format(t=target, n=name, k=k)


def generate_session(
    seed: int,
    *,
    n_steps: int = 6,
    voice: str | None = None,
    speed_wpm: int | None = None,
    start_clock: float = 1000.0,
    speech_set: str = "generator",
) -> SynthSession:
    """Generate one deterministic think-aloud session (same seed, same session).

    The step modes are: "after" (speech, then the action 0.2-0.8 s after it ends), "straddle" (the
    action lands 60-85 % of the way through a long sentence), "lead" (the next step's first
    sentence starts 0.15-0.4 s before this action lands), "silent" (no speech), with occasional
    long pauses of 3-5 s and a closing remark after the last action. `speech_set` "unscripted" takes
    its sentences from technical think-aloud instead of the templates, stops for 0.7-2.5 s in the
    middle of half of them, and speaks at 110-240 words per minute.
    """
    if speech_set not in SPEECH_SETS:
        raise ValueError(f"speech_set must be one of {SPEECH_SETS}, not {speech_set!r}")
    unscripted = speech_set == "unscripted"
    rng = random.Random(seed)
    instruction, vocabulary = "", tuple[str, ...]()
    if speech_set == "technical":
        from workers.asr.vocab import terms  # the same extraction the pipeline uses for hotwords

        instruction = rng.choice([i for i in shipped_instructions() if len(terms([i])) >= 2])
        vocabulary = tuple(terms([instruction]))
    voice = voice or rng.choice(VOICES)
    speed_wpm = speed_wpm or rng.choice(UNSCRIPTED_SPEEDS_WPM if unscripted else SPEEDS_WPM)
    clips: list[tuple[float, np.ndarray]] = []  # (seconds from start, samples)
    sentences: list[SynthSentence] = []
    actions: list[SynthAction] = []
    cursor = rng.uniform(0.4, 1.2)
    pending_lead = False  # previous action must land just after this step's first sentence starts

    def say(text: str, step: int, at: float) -> float:
        samples = speak(text, voice, speed_wpm)
        words = text.split()
        if unscripted and len(words) >= 4 and rng.random() < 0.5:  # a pause in the middle of the sentence
            cut = rng.randint(2, len(words) - 2)
            gap = np.zeros(round(rng.uniform(0.7, 2.5) * SAMPLE_RATE), dtype=np.float32)
            samples = np.concatenate([speak(" ".join(words[:cut]), voice, speed_wpm), gap,
                                      speak(" ".join(words[cut:]), voice, speed_wpm)])  # fmt: skip
        clips.append((at, samples))
        end = at + len(samples) / SAMPLE_RATE
        sentences.append(SynthSentence(text, step, start_clock + at, start_clock + end))
        return end

    for step in range(n_steps):
        mode = rng.choices(["after", "straddle", "lead", "silent"], weights=[6, 2, 2, 1])[0]
        if step == n_steps - 1 and mode == "lead":
            mode = "after"  # a lead needs a next step to lead into
        if pending_lead and mode == "silent":
            mode = "after"
        kind = rng.choices(["plain", "typing", "number"], weights=[5, 2, 1])[0]
        texts = (
            []
            if mode == "silent"
            else [_sentence(rng, "straddle" if mode == "straddle" else kind, speech_set, vocabulary)]
        )
        if mode == "after" and rng.random() < 0.3:
            texts.insert(0, _sentence(rng, "plain", speech_set, vocabulary))
        end = tail_end = cursor
        for index, text in enumerate(texts):
            start = cursor if index == 0 else end + rng.uniform(0.5, 0.9)
            spoken_end = say(text, step, start)
            if index == 0 and pending_lead:
                actions.append(
                    SynthAction(
                        step - 1, start_clock + start + rng.uniform(0.15, 0.4), actions_desc(step - 1)
                    )
                )
                pending_lead = False
            if mode == "straddle":
                end = start + (spoken_end - start) * rng.uniform(0.6, 0.85)  # the action lands mid-sentence
                tail_end = spoken_end
            else:
                end = spoken_end
                tail_end = spoken_end
        if mode == "lead":
            pending_lead = True
            cursor = end + rng.uniform(0.6, 1.2)  # the next sentence; the action follows its start
            continue
        action_at = end + (0.0 if mode == "straddle" else rng.uniform(0.2, 0.8))
        if mode == "silent":
            action_at = cursor + rng.uniform(0.5, 1.5)
        actions.append(SynthAction(step, start_clock + action_at, actions_desc(step)))
        after = tail_end if texts else action_at
        cursor = max(after, action_at) + rng.uniform(0.4, 1.0)
        if rng.random() < 0.15:
            cursor += rng.uniform(3.0, 5.0)  # a long think before the next step
    if rng.random() < 0.7:
        cursor = say(rng.choice(_TECH_FINAL if unscripted else _FINAL), n_steps, cursor) + 0.5
    total = max(cursor, max(a.time for a in actions) - start_clock + 0.5)
    audio = np.zeros(round(total * SAMPLE_RATE) + 1, dtype=np.float32)
    for at, samples in clips:
        begin = round(at * SAMPLE_RATE)
        audio[begin : begin + len(samples)] += samples
    return SynthSession(
        audio, start_clock, tuple(sorted(actions, key=lambda a: a.time)), tuple(sentences), voice, speed_wpm,
        instruction,
    )  # fmt: skip


def add_noise(session: SynthSession, snr_db: float, seed: int) -> SynthSession:
    """The session with white + pink noise (half the power each) at `snr_db` below the speech."""
    rng = np.random.default_rng(seed)
    n = len(session.audio)
    white = rng.standard_normal(n)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))  # 1/f power
    pink = np.fft.irfft(spectrum, n)
    noise = white / white.std() + pink / pink.std()
    speech = session.audio[np.abs(session.audio) > 1e-3]
    power = float(np.mean(speech**2)) if speech.size else 1e-4
    noise *= np.sqrt(power / 10 ** (snr_db / 10) / float(np.mean(noise**2)))
    return dataclasses.replace(session, audio=(session.audio + noise).astype(np.float32))


def add_background_speaker(session: SynthSession, level_db: float, seed: int, voice: str) -> SynthSession:
    """Another person talking in the room at `level_db` relative to the annotator, in pauses after
    about half of the annotator's sentences (the pause is lengthened to hold it, later times move
    on); their sentences are `session.background`, not part of the reference."""
    rng = random.Random(seed)
    gain = 10 ** (level_db / 20)
    origin = session.start_clock
    ends = sorted(s.end - origin for s in session.sentences)
    pieces: list[np.ndarray] = []
    inserts: list[tuple[float, float]] = []  # (original second, inserted seconds)
    said: list[SynthSentence] = []
    cursor = 0
    shift = 0.0
    for end in ends:
        if rng.random() >= 0.6:
            continue
        text = rng.choice(_BACKGROUND)
        samples = speak(text, voice, 170)
        at = end + 0.15
        cut = min(round(at * SAMPLE_RATE), len(session.audio))
        pieces.append(session.audio[cursor:cut])
        block = np.zeros(len(samples) + round(0.9 * SAMPLE_RATE), dtype=np.float32)
        block[round(0.45 * SAMPLE_RATE) : round(0.45 * SAMPLE_RATE) + len(samples)] = gain * samples
        pieces.append(block)
        start = origin + at + shift + 0.45
        said.append(SynthSentence(text, -1, start, start + len(samples) / SAMPLE_RATE))
        cursor = cut
        inserts.append((at, len(block) / SAMPLE_RATE))
        shift += len(block) / SAMPLE_RATE
    pieces.append(session.audio[cursor:])

    def moved(t: float) -> float:
        return t + sum(d for at, d in inserts if origin + at <= t)

    return dataclasses.replace(
        session,
        audio=np.concatenate(pieces).astype(np.float32),
        actions=tuple(dataclasses.replace(a, time=moved(a.time)) for a in session.actions),
        sentences=tuple(
            dataclasses.replace(x, start=moved(x.start), end=moved(x.end)) for x in session.sentences
        ),
        background=tuple(said),
    )


def actions_desc(step: int) -> str:
    """A readable label for a synthetic action (the log only needs times; the label aids debugging)."""
    return f"step-{step}"


def write_wav(samples: np.ndarray, path: Path) -> Path:
    """Write float32 mono 16 kHz samples as a 16-bit PCM WAV file."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.tobytes())
    return path


def write_session(session: SynthSession, directory: Path, name: str = "session") -> tuple[Path, Path]:
    """Write `<name>.wav` (16 kHz mono) and `<name>.json` (action log, sentences, ground truth).

    The JSON holds `actions` [{step, time, description}], `sentences` [{text, step, start, end}],
    `reference_words` [[token, step], ...], `transcript`, `voice`, `speed_wpm`, `start_clock`.
    """
    directory.mkdir(parents=True, exist_ok=True)
    wav_path = write_wav(session.audio, directory / f"{name}.wav")
    meta = {
        "start_clock": session.start_clock,
        "duration_s": session.duration_s,
        "voice": session.voice,
        "speed_wpm": session.speed_wpm,
        "actions": [dataclasses.asdict(a) for a in session.actions],
        "sentences": [dataclasses.asdict(s) for s in session.sentences],
        "reference_words": session.reference_words(),
        "transcript": session.transcript,
    }
    json_path = directory / f"{name}.json"
    json_path.write_text(json.dumps(meta, indent=1))
    return wav_path, json_path


def split_into_chunks(
    session: SynthSession, chunk_s: float, formats: tuple[str, ...] = ("webm",)
) -> list[AudioChunk]:
    """Cut the session audio into encoded chunks with clock times, as the browser would upload them.

    Chunk k uses `formats[k % len(formats)]`, so a mix of containers can be exercised.
    """
    step = round(chunk_s * SAMPLE_RATE)
    chunks = []
    for k, begin in enumerate(range(0, len(session.audio), step)):
        fmt = formats[k % len(formats)]
        data = encode_audio(session.audio[begin : begin + step], fmt)
        chunks.append(AudioChunk(data, session.start_clock + begin / SAMPLE_RATE, f"chunk-{k}.{fmt}"))
    return chunks
