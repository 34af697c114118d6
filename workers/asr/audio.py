"""Decode recorded audio chunks and lay them on the session clock as one 16 kHz mono timeline.

The browser uploads a recording as chunks (webm/opus from Chrome's MediaRecorder, ogg/opus from
Firefox, or wav). Each chunk carries `start_clock`: the session-clock second (server monotonic
clock after the client's offset correction) at which its first sample was captured. The timeline
puts every decodable chunk at its own clock position, fills gaps with silence and trims overlaps,
so a time `t` seconds into the timeline is session-clock second `timeline.start_clock + t`.

Each chunk must be decodable on its own (a complete container). MediaRecorder with a `timeslice`
emits continuation pieces without a header; the client restarts the recorder per chunk, or joins
the pieces of one stream into one chunk before upload. Undecodable chunks are reported in
`Timeline.errors` and left out (their span stays silent); the rest still transcribe.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from faster_whisper import decode_audio

SAMPLE_RATE = 16_000
# A chunk longer than this is refused: a recording is cut into chunks of seconds to minutes, and an
# absurd length almost always means a broken start_clock or a file that is not a chunk.
MAX_TIMELINE_S = 4 * 3600.0


class AudioDecodeError(ValueError):
    """A chunk could not be decoded into audio (empty, corrupt, or not an audio container)."""


@dataclass(frozen=True)
class AudioChunk:
    """One uploaded piece of a recording: encoded bytes (any container PyAV reads) and its clock time."""

    data: bytes
    start_clock: float
    name: str = ""


@dataclass(frozen=True)
class ChunkError:
    """Why one chunk was left out of the timeline."""

    index: int
    name: str
    start_clock: float
    message: str


@dataclass(frozen=True)
class Timeline:
    """Audio of one recording on the session clock.

    `audio` is float32 mono 16 kHz, shape (n,); sample k was captured at session-clock second
    `start_clock + k / 16000`. `spans` lists (start, end) clock seconds actually covered by decoded
    audio (the rest is inserted silence).
    """

    audio: np.ndarray
    start_clock: float
    spans: tuple[tuple[float, float], ...]
    errors: tuple[ChunkError, ...]

    @property
    def duration_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE


def probe_duration(data: bytes, limit_s: float) -> float | None:
    """Length in seconds of an encoded chunk read from its container, without decoding any audio.

    The container header's duration when it has one (wav, ogg, most files); otherwise (a live webm
    from MediaRecorder has none) the audio packets' durations summed while demuxing, which stops
    as soon as the sum passes `limit_s`. None when the data is not a readable container or carries
    no timing at all (the caller decodes it, which reports why).
    """
    import av  # PyAV ships with faster-whisper

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if container.duration is not None and container.duration > 0:
                return container.duration / 1_000_000  # av.time_base
            if not container.streams.audio:
                return None
            stream = container.streams.audio[0]
            if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
                return float(stream.duration * stream.time_base)
            total = 0.0
            for packet in container.demux(stream):
                if packet.duration and packet.time_base is not None:
                    total += float(packet.duration * packet.time_base)
                    if total > limit_s:
                        break
            return total or None
    except Exception:  # PyAV raises many error types; decoding reports the reason to the client
        return None


def decode_chunk(data: bytes | str | Path) -> np.ndarray:
    """Decode one encoded chunk (webm/opus, ogg, wav, ... anything PyAV reads) to float32 mono 16 kHz.

    Raises AudioDecodeError for empty input, unreadable containers or files with no audio samples.
    """
    if isinstance(data, (str, Path)):
        path = Path(data)
        if not path.is_file():
            raise AudioDecodeError(f"no such audio file: {path}")
        data = path.read_bytes()
    if not data:
        raise AudioDecodeError("empty audio chunk (0 bytes)")
    try:
        samples = decode_audio(io.BytesIO(data), sampling_rate=SAMPLE_RATE)
    except Exception as exc:  # PyAV raises many error types (InvalidDataError, EOFError, ...)
        raise AudioDecodeError(f"cannot decode audio chunk ({len(data)} bytes): {exc}") from exc
    if not isinstance(samples, np.ndarray) or samples.size == 0:
        raise AudioDecodeError(f"audio chunk has no audio samples ({len(data)} bytes)")
    samples = np.asarray(samples, dtype=np.float32)
    if not np.all(np.isfinite(samples)):
        raise AudioDecodeError("decoded audio contains NaN or infinite samples")
    return samples


def place_on_clock(
    pieces: Sequence[tuple[float, np.ndarray]],
) -> tuple[np.ndarray, float, list[tuple[float, float]]]:
    """Lay decoded pieces (start_clock, samples) on one timeline; returns (audio, start_clock, spans).

    Gaps between pieces become silence. Where a piece starts before the previous one ended (clock
    jitter, or a client that re-sent audio) its overlapping head is dropped: the audio already
    placed wins, so no sound is played twice and later word times do not drift.
    """
    if not pieces:
        return np.zeros(0, dtype=np.float32), 0.0, []
    ordered = sorted(pieces, key=lambda p: p[0])
    origin = ordered[0][0]
    end_clock = max(start + len(samples) / SAMPLE_RATE for start, samples in ordered)
    if end_clock - origin > MAX_TIMELINE_S:
        raise AudioDecodeError(f"chunks span {end_clock - origin:.0f} s, more than {MAX_TIMELINE_S:.0f} s")
    out = np.zeros(round((end_clock - origin) * SAMPLE_RATE), dtype=np.float32)
    filled_to = 0  # first sample index not yet written
    spans: list[tuple[float, float]] = []
    for start, samples in ordered:
        at = round((start - origin) * SAMPLE_RATE)
        skip = max(0, filled_to - at)
        body = samples[skip:]
        if body.size == 0:
            continue
        begin = at + skip
        out[begin : begin + body.size] = body[: out.size - begin]
        filled_to = begin + body.size
        spans.append((origin + begin / SAMPLE_RATE, origin + filled_to / SAMPLE_RATE))
    return out, origin, spans


def build_timeline(chunks: Sequence[AudioChunk]) -> Timeline:
    """Decode every chunk and place the decodable ones on the session clock (see module docstring)."""
    pieces: list[tuple[float, np.ndarray]] = []
    errors: list[ChunkError] = []
    for index, chunk in enumerate(chunks):
        if not np.isfinite(chunk.start_clock):
            errors.append(
                ChunkError(index, chunk.name, chunk.start_clock, "start_clock is not a finite number")
            )
            continue
        try:
            pieces.append((chunk.start_clock, decode_chunk(chunk.data)))
        except AudioDecodeError as exc:
            errors.append(ChunkError(index, chunk.name, chunk.start_clock, str(exc)))
    audio, origin, spans = place_on_clock(pieces)
    return Timeline(audio=audio, start_clock=origin, spans=tuple(spans), errors=tuple(errors))


def encode_audio(samples: np.ndarray, fmt: str = "wav", bit_rate: int = 128_000) -> bytes:
    """Encode float32 mono 16 kHz samples as `wav`, `ogg` (opus) or `webm` (opus), like a browser would.

    `bit_rate` applies to opus; 128 kb/s is Chrome's MediaRecorder default for audio.

    Used by the synthetic think-aloud generator and tests to produce the formats the client sends.
    """
    import av  # PyAV ships with faster-whisper; imported here because only encoding needs it directly

    if samples.ndim != 1:
        raise ValueError(f"expected mono samples of shape (n,), got {samples.shape}")
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype(np.int16)
    codec, rate = {
        "wav": ("pcm_s16le", SAMPLE_RATE),
        "ogg": ("libopus", 48_000),
        "webm": ("libopus", 48_000),
    }[fmt]
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate, layout="mono")
        assert isinstance(stream, av.AudioStream)  # an audio codec name always gives an audio stream
        if codec == "libopus":
            stream.bit_rate = bit_rate
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        frame_len = 960  # 60 ms at 16 kHz; any size works, the encoder re-frames
        for at in range(0, len(pcm), frame_len):
            frame = av.AudioFrame.from_ndarray(pcm[None, at : at + frame_len], format="s16", layout="mono")
            frame.sample_rate = SAMPLE_RATE
            for resampled in resampler.resample(frame):
                for packet in stream.encode(resampled):
                    container.mux(packet)
        for resampled in resampler.resample(None):
            for packet in stream.encode(resampled):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()
