"""Think-aloud upload API and corrections, on the real PostgreSQL: audio type, size and ownership
checks, idempotent chunk indices, clock checks, finish, thought edits and word moves, the reviewer's
view; and the live pass (one chunk through real Whisper, tiny.en) aligning words to the steps.

These tests run without a Celery worker: in a non-transactional test `on_commit` never fires, so no
job is queued; tests/annotation/test_thinkaloud_worker.py runs the jobs on a real worker.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from django.conf import settings
from django.test import override_settings

from annotation.models import AnnotationSession, ThinkAloudChunk, ThinkAloudRecording
from annotation.thinkaloud import transcribe as passes
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from workers.asr.audio import SAMPLE_RATE, encode_audio
from workers.asr.synth import generate_session, split_into_chunks

pytestmark = pytest.mark.django_db


def tone(seconds: float = 1.0, fmt: str = "webm") -> bytes:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return encode_audio((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), fmt)


def make_session(user, *, age_s: float = 60.0, status: str = "active", steps: list[float] | None = None):
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=user)
    for i, t in enumerate(steps or []):
        StepFactory(trajectory=traj, index=i, clock_start=t - 1.0, clock_end=t)
    return AnnotationSession.objects.create(
        user=user, task=task, trajectory=traj, status=status, clock_origin=time.time() - age_s
    )


def put(client, session_id: int, index: int, data: bytes, ctype: str = "audio/webm;codecs=opus", **query):
    qs = "&".join(f"{k}={v}" for k, v in {"start_clock": 1.0, **query}.items())
    url = f"/api/annotation/sessions/{session_id}/thinkaloud/chunks/{index}/?{qs}"
    return client.put(url, data=data, content_type=ctype)


def test_upload_stores_chunk_and_is_idempotent_by_index(api, users) -> None:
    session = make_session(users["annotator"])
    client = api("annotator")
    data = tone(1.0, "webm")
    first = put(client, session.pk, 0, data, rtt_ms=12.5)
    assert first.status_code == 201, first.content
    assert first.json()["created"] is True
    assert abs(first.json()["duration_s"] - 1.0) < 0.1
    again = put(client, session.pk, 0, data)  # a retried upload whose answer was lost
    assert again.status_code == 200 and again.json()["created"] is False
    other = put(client, session.pk, 0, tone(2.0, "webm"))
    assert other.status_code == 409
    assert "different audio" in other.json()["detail"]
    assert put(client, session.pk, 1, tone(1.0, "ogg"), "audio/ogg", start_clock=2.0).status_code == 201
    assert put(client, session.pk, 2, tone(1.0, "wav"), "audio/wav", start_clock=3.0).status_code == 201
    recording = ThinkAloudRecording.objects.get(session=session)
    chunks = list(recording.chunks.order_by("index"))
    assert [c.index for c in chunks] == [0, 1, 2]
    assert [c.content_type for c in chunks] == ["audio/webm", "audio/ogg", "audio/wav"]
    assert chunks[0].file.read() == data  # in media storage, byte for byte
    assert recording.clock_rtt_ms == 12.5
    state = client.get(f"/api/annotation/sessions/{session.pk}/thinkaloud/").json()
    assert state["next_index"] == 3 and state["status"] == "recording"
    assert 59 < state["server_clock"] < 120


def test_upload_refuses_bad_requests_clearly(api, users) -> None:
    session = make_session(users["annotator"], age_s=30.0)
    client = api("annotator")
    bad_type = put(client, session.pk, 0, tone(), "video/mp4")
    assert bad_type.status_code == 415 and "unsupported audio type" in bad_type.json()["detail"]
    garbage = put(client, session.pk, 0, b"\x1aE\xdf\xa3 this is not audio at all" * 20)
    assert garbage.status_code == 400 and "not playable audio" in garbage.json()["detail"]
    empty = put(client, session.pk, 0, b"")
    assert empty.status_code == 400
    with override_settings(THINKALOUD_MAX_CHUNK_BYTES=1000):
        big = put(client, session.pk, 0, tone(2.0, "wav"), "audio/wav")
    assert big.status_code == 413 and "limit" in big.json()["detail"]
    future = put(client, session.pk, 0, tone(), start_clock=500)
    assert future.status_code == 400 and "future" in future.json()["detail"]
    nan = put(client, session.pk, 0, tone(), start_clock="abc")
    assert nan.status_code == 400 and "number" in nan.json()["detail"]
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/0/"
    missing = client.put(url, data=tone(), content_type="audio/webm")
    assert missing.status_code == 400 and "start_clock" in missing.json()["detail"]
    assert not ThinkAloudChunk.objects.exists()
    # Someone else's session is not found; a non-annotator may not upload at all.
    assert put(api("annotator2"), session.pk, 0, tone()).status_code == 404
    assert put(api("reviewer"), session.pk, 0, tone()).status_code == 403
    assert put(api(None), session.pk, 0, tone()).status_code in (401, 403)
    ended = make_session(users["annotator"], status="abandoned")
    assert put(client, ended.pk, 0, tone()).status_code == 409
    # A submitted session still takes its last chunk (the upload may land after submit).
    submitted = make_session(users["annotator"], status="submitted")
    assert put(client, submitted.pk, 0, tone()).status_code == 201


def test_finish_needs_audio(api, users) -> None:
    session = make_session(users["annotator"])
    client = api("annotator")
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/finish/"
    assert client.post(url).status_code == 409
    put(client, session.pk, 0, tone())
    answer = client.post(url)
    assert answer.status_code == 202
    assert answer.json()["status"] == "queued" and answer.json()["finished"] is True


def words(*spec: tuple[str, float, float]) -> list[dict]:
    return [{"w": w, "start": s, "end": e, "p": 0.9} for w, s, e in spec]


def test_edit_and_move_words_and_the_reviewers_view(api, users) -> None:
    from annotation.models import Review

    session = make_session(users["annotator"], steps=[10.0, 20.0])
    steps = list(session.trajectory.steps.order_by("index"))
    steps[0].human_words = words(("open", 8.0, 8.3), ("the", 8.3, 8.4), ("menu", 8.4, 8.8))
    steps[0].human_thought_verbatim = "open the menu"
    steps[1].human_words = words(("then", 18.0, 18.3), ("save", 18.3, 18.7))
    steps[1].human_thought_verbatim = "then save"
    for s in steps:
        s.save()
    client = api("annotator")
    base = f"/api/annotation/sessions/{session.pk}/thinkaloud/steps"
    moved = client.post(f"{base}/0/move/", {"direction": "next", "count": 1}, format="json")
    assert moved.status_code == 200, moved.content
    by_index = {s["index"]: s for s in moved.json()["steps"]}
    assert by_index[0]["verbatim"] == "open the" and by_index[1]["verbatim"] == "menu then save"
    assert by_index[1]["moved"] is True
    assert client.post(f"{base}/0/move/", {"direction": "previous"}, format="json").status_code == 409
    assert client.post(f"{base}/0/move/", {"direction": "up"}, format="json").status_code == 400
    edited = client.patch(f"{base}/1/", {"thought": "  I open the menu and save.  "}, format="json")
    assert edited.status_code == 200
    step1 = session.trajectory.steps.get(index=1)
    assert step1.human_thought_refined == "I open the menu and save."
    assert step1.human_thought_verbatim == "menu then save"  # verbatim is kept
    assert {s["index"]: s for s in edited.json()["steps"]}[1]["refined_by"] == "annotator"
    assert client.patch(f"{base}/7/", {"thought": "x"}, format="json").status_code == 404
    assert api("annotator2").patch(f"{base}/1/", {"thought": "x"}, format="json").status_code == 404
    # The full pass leaves edited and re-cut steps alone.
    recording = ThinkAloudRecording.objects.get(session=session)
    fresh = passes.align_words([], [10.0, 20.0])
    passes._store_steps(recording, list(session.trajectory.steps.order_by("index")), fresh, {})
    assert session.trajectory.steps.get(index=1).human_thought_verbatim == "menu then save"
    # A reviewer sees it only when holding a review of the trajectory.
    review_url = f"/api/annotation/thinkaloud/trajectories/{session.trajectory_id}/"
    assert api("reviewer").get(review_url).status_code == 404
    Review.objects.create(trajectory=session.trajectory, reviewer=users["reviewer"])
    seen = api("reviewer").get(review_url)
    assert seen.status_code == 200 and [s["index"] for s in seen.json()["steps"]] == [0, 1]
    assert api("annotator").get(review_url).status_code == 403
    back = api("reviewer").post(f"{review_url}steps/1/move/", {"direction": "previous"}, format="json")
    assert back.status_code == 200
    assert session.trajectory.steps.get(index=0).human_thought_verbatim == "open the menu"


def test_live_pass_aligns_a_chunk_with_real_whisper(api, users) -> None:
    """Two chunks of synthesized think-aloud through real Whisper: the second is decoded with the
    first's tail in front (THINKALOUD_LIVE_OVERLAP_S), and the words land on the right steps."""
    synth = generate_session(seed=5, n_steps=3, voice="en-us", speed_wpm=160, start_clock=5.0)
    session = make_session(
        users["annotator"], age_s=synth.start_clock + synth.duration_s + 5, steps=synth.action_times
    )
    chunks = split_into_chunks(synth, synth.duration_s / 2 + 0.1, ("webm",))
    assert len(chunks) == 2
    for index, chunk in enumerate(chunks):
        answer = put(api("annotator"), session.pk, index, chunk.data, start_clock=chunk.start_clock)
        assert answer.status_code == 201
    for stored in ThinkAloudChunk.objects.order_by("index"):
        assert passes.chunk_transcribe(stored.pk)
    first, second = ThinkAloudChunk.objects.order_by("index")
    assert first.live_cut == first.start_clock
    assert second.live_cut == pytest.approx(second.start_clock - settings.THINKALOUD_LIVE_OVERLAP_S / 2)
    steps = list(session.trajectory.steps.order_by("index"))
    from workers.asr.wer import normalize_words, word_error_counts

    for step in steps:
        said = [s.text for s in synth.sentences if s.step == step.index]
        ref = normalize_words(" ".join(said))
        hyp = normalize_words(step.human_thought_verbatim)
        if not ref:
            assert len(hyp) <= 2, step.human_thought_verbatim
            continue
        counts = word_error_counts(ref, hyp)
        assert counts.errors / counts.ref_words <= 0.3, (said, step.human_thought_verbatim)
        assert all(w["start"] >= synth.start_clock for w in step.human_words)
        assert {"w", "start", "end", "p"} <= set(step.human_words[0])


def test_a_worker_process_of_a_think_aloud_queue_loads_whisper_as_it_starts(monkeypatch) -> None:
    """The live pass's first chunk does not wait for the model: a worker process that consumes a
    think-aloud queue loads Whisper at start (celery's worker_process_init); others do not."""
    from annotation import tasks
    from webapp.celery import app
    from workers.asr import transcribe

    monkeypatch.setattr(transcribe, "_MODELS", {})
    queues = app.amqp.queues
    monkeypatch.setattr(queues, "_consume_from", None)  # what the test process consumed: put back after
    queues.select(["default", "export"])
    tasks._preload_whisper()
    assert transcribe._MODELS == {}
    queues.select([settings.THINKALOUD_LIVE_QUEUE])
    tasks._preload_whisper()
    assert len(transcribe._MODELS) == 1
    live = passes.transcriber(live=True).config
    assert live.beam_size == settings.THINKALOUD_LIVE_BEAM_SIZE == 1 and not live.redecode_weak
    assert passes.transcriber().config.redecode_weak  # the full pass keeps its second decode


def test_a_noisy_room_is_reported_to_the_annotator_and_after_the_full_pass(api, users) -> None:
    """Speech 13 dB above white + pink noise through the real path (webm chunks, the live pass, the
    full pass): the state says noisy with the measured figure, the live chunks' while recording,
    the whole recording's after the full pass; a clean recording's state does not."""
    from workers.asr.synth import add_noise

    synth = add_noise(
        generate_session(seed=6, n_steps=3, voice="en-us", speed_wpm=160, start_clock=5.0), 13.0, 6
    )
    session = make_session(
        users["annotator"], age_s=synth.start_clock + synth.duration_s + 5, steps=synth.action_times
    )
    for index, chunk in enumerate(split_into_chunks(synth, 10.0, ("webm",))):
        assert (
            put(api("annotator"), session.pk, index, chunk.data, start_clock=chunk.start_clock).status_code
            == 201
        )
    for stored in ThinkAloudChunk.objects.order_by("index"):
        assert passes.chunk_transcribe(stored.pk)
    measured = [c.snr_db for c in ThinkAloudChunk.objects.order_by("index") if c.snr_db is not None]
    assert measured and all(abs(v - 13.0) <= 3.0 for v in measured), measured
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/"
    state = api("annotator").get(url).json()
    assert state["noisy"] is True and abs(state["snr_db"] - 13.0) <= 3.0, state["snr_db"]
    with override_settings(THINKALOUD_NOISY_SNR_DB=10.0):  # a deploy may set the line lower
        assert api("annotator").get(url).json()["noisy"] is False
    assert api("annotator").post(f"{url}finish/").status_code == 202
    recording = ThinkAloudRecording.objects.get(session=session)
    assert passes.recording_transcribe(recording.pk)
    recording.refresh_from_db()
    assert abs(recording.transcript["snr_db"] - 13.0) <= 2.0, recording.transcript["snr_db"]
    state = api("annotator").get(url).json()
    assert state["noisy"] is True and state["snr_db"] == recording.transcript["snr_db"]

    clean = generate_session(seed=7, n_steps=2, voice="en-us", speed_wpm=160, start_clock=5.0)
    quiet = make_session(
        users["annotator"], age_s=clean.start_clock + clean.duration_s + 5, steps=clean.action_times
    )
    chunk = split_into_chunks(clean, clean.duration_s + 1, ("webm",))[0]
    assert put(api("annotator"), quiet.pk, 0, chunk.data, start_clock=chunk.start_clock).status_code == 201
    assert passes.chunk_transcribe(ThinkAloudChunk.objects.get(recording__session=quiet).pk)
    state = api("annotator").get(f"/api/annotation/sessions/{quiet.pk}/thinkaloud/").json()
    assert state["noisy"] is False and state["snr_db"] is None  # silent pauses: nothing to measure


def test_while_recording_the_noise_is_read_over_the_last_chunks(users) -> None:
    from annotation.thinkaloud.selectors import speech_to_noise

    rows = [ThinkAloudChunk(index=i, start_clock=i * 10.0, duration_s=10.0, snr_db=v)
            for i, v in enumerate([35.0, None, 30.0, 12.0, None, 14.0, 13.0])]  # fmt: skip
    assert speech_to_noise({}, rows) == 13.0  # the room as it is now: 12, 14, 13
    assert speech_to_noise({}, rows[:3]) == 35.0  # 35, 30: the upper of two
    assert speech_to_noise({}, [ThinkAloudChunk(index=0, start_clock=0.0, duration_s=10.0)]) is None
    assert speech_to_noise({"snr_db": 22.5}, rows) == 22.5  # the full pass's figure once it has run
    assert speech_to_noise({"snr_db": None}, rows) is None
