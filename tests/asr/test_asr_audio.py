"""Chunk decoding and the session-clock timeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.asr.audio import (
    SAMPLE_RATE,
    AudioChunk,
    AudioDecodeError,
    build_timeline,
    decode_chunk,
    encode_audio,
)


def tone(seconds: float, hz: float = 440.0, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize("fmt", ["wav", "ogg", "webm"])
def test_browser_formats_decode_to_16k_mono_float32(fmt: str) -> None:
    samples = decode_chunk(encode_audio(tone(1.0), fmt))
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - SAMPLE_RATE) < 0.05 * SAMPLE_RATE
    # Lossy opus keeps the tone's level roughly: this fails if decoding produced silence or noise.
    assert 0.15 < float(np.sqrt(np.mean(samples**2))) < 0.3


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"not audio at all" * 50, "cannot decode"),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "cannot decode"),
    ],
)
def test_undecodable_chunks_raise_a_typed_error(data: bytes, message: str) -> None:
    with pytest.raises(AudioDecodeError, match=message):
        decode_chunk(data)


def test_truncated_webm_is_an_error_or_shorter_audio_never_a_crash() -> None:
    data = encode_audio(tone(2.0), "webm")
    try:
        samples = decode_chunk(data[: len(data) // 3])
    except AudioDecodeError:
        return
    assert 0 < len(samples) < 2 * SAMPLE_RATE


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(AudioDecodeError, match="no such audio file"):
        decode_chunk(tmp_path / "missing.webm")


def test_timeline_inserts_silence_for_gaps_and_keeps_clock() -> None:
    chunks = [
        AudioChunk(encode_audio(tone(1.0), "wav"), start_clock=100.0, name="a"),
        AudioChunk(encode_audio(tone(1.0, hz=880), "wav"), start_clock=102.5, name="b"),
    ]
    timeline = build_timeline(chunks)
    assert timeline.start_clock == 100.0
    assert timeline.duration_s == pytest.approx(3.5, abs=1e-3)
    gap = timeline.audio[round(1.05 * SAMPLE_RATE) : round(2.45 * SAMPLE_RATE)]
    assert np.all(gap == 0.0)
    assert np.abs(timeline.audio[round(2.6 * SAMPLE_RATE) : round(3.4 * SAMPLE_RATE)]).max() > 0.2
    assert timeline.spans == ((100.0, 101.0), (102.5, 103.5))
    assert timeline.errors == ()


def test_timeline_trims_overlap_and_ignores_upload_order() -> None:
    first, second = tone(2.0, hz=440), tone(2.0, hz=880)
    chunks = [
        AudioChunk(encode_audio(second, "wav"), start_clock=51.5, name="late"),
        AudioChunk(encode_audio(first, "wav"), start_clock=50.0, name="early"),
    ]
    timeline = build_timeline(chunks)
    # The earlier chunk is kept whole; the later one loses its first 0.5 s (the overlap).
    assert timeline.duration_s == pytest.approx(3.5, abs=1e-3)
    np.testing.assert_allclose(timeline.audio[: 2 * SAMPLE_RATE], first, atol=1e-4)
    np.testing.assert_allclose(timeline.audio[2 * SAMPLE_RATE :], second[SAMPLE_RATE // 2 :], atol=1e-4)


def test_bad_chunk_is_reported_and_the_rest_still_build() -> None:
    chunks = [
        AudioChunk(encode_audio(tone(1.0), "webm"), start_clock=10.0, name="ok-1"),
        AudioChunk(b"\x1aE\xdf\xa3 broken", start_clock=11.0, name="broken"),
        AudioChunk(encode_audio(tone(1.0), "ogg"), start_clock=12.0, name="ok-2"),
        AudioChunk(encode_audio(tone(1.0), "wav"), start_clock=float("nan"), name="no-clock"),
    ]
    timeline = build_timeline(chunks)
    assert [(e.index, e.name) for e in timeline.errors] == [(1, "broken"), (3, "no-clock")]
    assert len(timeline.spans) == 2
    assert timeline.duration_s == pytest.approx(3.0, abs=0.05)


def test_all_chunks_bad_gives_empty_timeline() -> None:
    timeline = build_timeline([AudioChunk(b"", 1.0, "empty")])
    assert timeline.audio.size == 0 and len(timeline.errors) == 1
