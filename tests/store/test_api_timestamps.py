"""Every timestamp the REST API answers has one format: UTC ISO 8601 with exactly 6 fractional
digits and `+00:00` (webapp/timestamps.py) — serializer fields, raw datetimes in hand-built dicts and
the exports' strings alike, whole seconds included."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from annotation.models import AnnotationSession
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from webapp.store.models import Trajectory
from webapp.timestamps import JSONRenderer, iso_utc

pytestmark = pytest.mark.django_db

FORMAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")
TIME_KEY = re.compile(r"(_at|^at)$")


def _times(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, value) of every string under a key named *_at / at."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and TIME_KEY.search(key):
                found.append((f"{path}.{key}", value))
            else:
                found += _times(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _times(value, f"{path}[{i}]")
    return found


def test_rest_timestamps_have_six_fractional_digits_in_utc(api, users) -> None:
    whole_second = dt.datetime(2026, 11, 26, 12, 0, 0, tzinfo=dt.UTC)  # isoformat() would drop ".000000"
    task = TaskFactory()
    t = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"], status="completed",
                          review_state="pending")  # fmt: skip
    Trajectory.objects.filter(pk=t.pk).update(created_at=whole_second)
    StepFactory(trajectory=t, index=0)
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=t, status="submitted"
    )
    AnnotationSession.objects.filter(pk=session.pk).update(created_at=whole_second)
    responses = {
        "trajectory": api("researcher").get(f"/api/trajectories/{t.pk}/"),
        "trajectories": api("researcher").get("/api/trajectories/"),
        "session": api("annotator").get(f"/api/annotation/sessions/{session.pk}/"),
        "sessions": api("annotator").get("/api/annotation/sessions/"),
        "review queue": api("reviewer").get("/api/review/queue/"),
    }
    seen = []
    for name, response in responses.items():
        assert response.status_code == 200, (name, response.content)
        for where, value in _times(response.json()):
            assert FORMAT.match(value), f"{name} {where} = {value!r}"
            seen.append(value)
    assert "2026-11-26T12:00:00.000000+00:00" in seen
    assert len(seen) >= 5


def test_raw_datetimes_in_a_response_dict_keep_microseconds() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    body = JSONRenderer().render({"at": at}).decode()
    assert body == '{"at":"2026-01-02T01:04:05.123456+00:00"}'  # DRF's own encoder writes ".123+02:00"
    assert iso_utc(at) == "2026-01-02T01:04:05.123456+00:00" and iso_utc(None) is None
