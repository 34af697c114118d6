"""Issue 30, finding 1, through the product: an annotator's terminal session on a pool whose homes
are capped at 16 MiB (`TaskPool.disk_mb`) cannot write past it, and the decide answer says why
(`disk_full`), on a live env host (the pool's cap reaches the env through the task spec)."""

from __future__ import annotations

import pytest

from annotation.models import Assignment
from tests.annotation.test_annotation_flow import _wait_candidates, _wait_idle
from tests.factories import TaskFactory, TaskPoolFactory
from workers.envs.sandbox import sandbox_available

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.security,
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]


@pytest.fixture
def warm_pool() -> str:
    return "terminal=1"


def test_a_full_home_is_reported_to_the_annotator(api, users, live_stack) -> None:
    task = TaskFactory(pool=TaskPoolFactory(disk_mb=16), external_id="fill", env_kind="terminal",
                       source="custom", instruction="Fill the disk")  # fmt: skip
    Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")
    _wait_idle("terminal")
    started = client.post("/api/annotation/sessions/", {"task": task.pk}, format="json")
    assert started.status_code == 201, started.content
    sid = started.json()["id"]
    _wait_candidates(client, sid, 1)
    fill = "type(content='dd if=/dev/zero of=big bs=1M count=64\\n')"
    decided = client.post(f"/api/annotation/sessions/{sid}/decide/",
                          {"kind": "override", "obs_version": 1, "thought": "fill it", "action_text": fill},
                          format="json")  # fmt: skip
    assert decided.status_code == 200, decided.content
    assert "home is full (16 MiB" in decided.json()["disk_full"]
