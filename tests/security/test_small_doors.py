"""Issue 30, finding 10 (the small ones): a negative think-aloud start_clock was accepted; production
sent no HSTS; the verifier's message at submit (text a task can control) was logged on the host at
WARNING as it came."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from annotation.models import AnnotationSession, ThinkAloudChunk
from annotation.services.sessions import session_submit
from tests.factories import TaskFactory, TrajectoryFactory
from workers.asr.audio import SAMPLE_RATE, encode_audio

pytestmark = [pytest.mark.django_db, pytest.mark.security]


def _session(user, **fields) -> AnnotationSession:
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=user)
    return AnnotationSession.objects.create(user=user, task=task, trajectory=traj, status="active", **fields)


def test_a_negative_start_clock_is_refused(api, users) -> None:
    session = _session(users["annotator"], clock_origin=time.time() - 60)
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    tone = encode_audio((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), "webm")
    for clock in ("-1", "-0.001", "-4.9"):
        url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/0/?start_clock={clock}"
        response = api("annotator").put(url, data=tone, content_type="audio/webm")
        assert response.status_code == 400, (clock, response.status_code)
        assert "not a session-clock second (>= 0)" in response.json()["detail"]
    assert not ThinkAloudChunk.objects.exists()
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/0/?start_clock=0"
    assert api("annotator").put(url, data=tone, content_type="audio/webm").status_code == 201


def test_production_settings_send_hsts_over_https(client) -> None:
    code = (
        "from django.conf import settings as s; print(s.SECURE_HSTS_SECONDS, s.SECURE_CONTENT_TYPE_NOSNIFF)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.prod", "SECRET_KEY": "k" * 50}
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env=env, capture_output=True, text=True, check=True, cwd=django_settings.BASE_DIR,
    )  # fmt: skip
    seconds, nosniff = out.stdout.split()[-2:]
    assert int(seconds) >= 180 * 24 * 3600 and nosniff == "True"
    with override_settings(SECURE_HSTS_SECONDS=int(seconds), SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):  # fmt: skip
        response = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")
        assert response["Strict-Transport-Security"] == f"max-age={seconds}"
        assert "Strict-Transport-Security" not in client.get("/login/")  # never over plain HTTP


def test_the_verifier_message_is_kept_with_the_trajectory_not_logged_as_a_warning(users, caplog) -> None:
    session = _session(
        users["annotator"], lease_id="gone\nFAKE 2026-01-01 CRITICAL root: owned", lease_env="e1"
    )
    with caplog.at_level(logging.INFO, logger="annotation.services.sessions"):
        session_submit(session=session)
    mine = [r for r in caplog.records if r.name == "annotation.services.sessions"]
    assert mine and all(r.levelno < logging.WARNING for r in mine), [(r.levelname, r.message) for r in mine]
    assert all("\n" not in r.getMessage() for r in mine)
    session.trajectory.refresh_from_db()
    assert "FAKE 2026-01-01" in session.trajectory.metadata["verifier_error"]
