"""Executability check against real processes: an env-host Celery worker (Chromium + MiniWoB++) and a
worker running the review replay task. A trajectory that clicks the button replays to reward 1 with
its recorded seed; one that clicks the instruction strip, without a recorded seed, replays to 0 and
says the seed was missing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.env_host import CELERY, _kill
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from tests.service_urls import subprocess_database_url
from webapp.fleet import services as fleet
from webapp.store.models import Trajectory
from webapp.store.taskspec import task_spec_wire

pytestmark = pytest.mark.django_db(transaction=True)
SEED = 1234


@pytest.fixture
def replay_stack() -> Iterator[str]:
    """An env host with one browser env and a worker for the review replay queue, isolated from
    other test runs by their own queue names and fleet prefix."""
    import os
    import subprocess

    name = f"rv{uuid.uuid4().hex[:8]}"
    prefix, queue = f"test:fleet:{name}", f"review.{name}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLEET_REDIS_PREFIX": prefix,
           "DATABASE_URL": subprocess_database_url()}  # fmt: skip
    host = subprocess.Popen(
        [*CELERY, "-n", f"{name}@%h", "-Q", f"env.{name}", "-P", "threads", "-c", "4"],
        env={**env, "FLYWHEEL_ENV_HOST": name, "FLEET_WARM_POOL": "browser=1", "FLEET_HOST_PERIOD_S": "0.5"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [*CELERY, "-n", f"w{name}@%h", "-Q", queue, "-P", "solo", "-I", "annotation.review.tasks"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    with override_settings(FLEET_REDIS_PREFIX=prefix, REVIEW_REPLAY_QUEUE=queue):
        fleet.registry.cache_clear()
        try:
            yield name
        finally:
            _kill(host)
            _kill(worker)
            fleet.registry().clear()
            fleet.registry.cache_clear()


def wait_idle(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while fleet.registry().idle_count("browser") < 1:
        assert time.monotonic() < deadline, f"no browser environment booted within {timeout} s"
        time.sleep(0.1)


def probe_observation(task, seed: int = SEED) -> dict:
    """The first observation of the episode of `seed` (screenshot and elements), from a real env."""
    lease = fleet.lease_acquire(kind="browser", owner="test:probe")
    try:
        out = fleet.env_call(lease=lease, op="reset", payload={"task": task_spec_wire(task), "seed": seed})
    finally:
        fleet.lease_release(lease_id=lease.lease_id)
    return out["observation"]


def button_centre(observation: dict) -> tuple[float, float]:
    """Where the click-test button is, read from the env's own elements."""
    button = next(e for e in observation["elements"] if "Click Me" in e["text"])
    return button["x"] + button["width"] / 2, button["y"] + button["height"] / 2


def _trajectory(task, point: tuple[float, float], metadata: dict) -> Trajectory:
    t = TrajectoryFactory(
        task=task, source="annotation", status="completed", review_state="pending", metadata=metadata
    )
    StepFactory(
        trajectory=t, index=0, action=[{"kind": "click", "point": list(point)}], coord_convention="screen",
        screen_width=160, screen_height=210, action_text=f"click(start_box='({point[0]:.0f},{point[1]:.0f})')",
    )  # fmt: skip
    Trajectory.objects.filter(pk=t.pk).update(num_steps=1)
    return t


def _wait_replay(client, trajectory_id: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = client.get(f"/api/review/trajectories/{trajectory_id}/executability/").json()["executability"]
        if state and state["status"] in ("done", "failed"):
            return state
        assert time.monotonic() < deadline, f"the replay did not finish: {state}"
        time.sleep(0.2)


def test_replay_reruns_the_verifier_in_a_fresh_env(api, replay_stack) -> None:
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    wait_idle()
    good = _trajectory(task, button_centre(probe_observation(task)), {"seed": SEED})
    bad = _trajectory(task, (80, 25), {})  # the instruction strip: never the button
    client = api("admin")

    assert client.post(f"/api/review/trajectories/{good.pk}/executability/").status_code == 202
    state = _wait_replay(client, good.pk)
    assert state["status"] == "done", state
    assert state["ok"] is True and state["reward"] == 1.0
    assert (state["replayed_steps"], state["total_steps"]) == (1, 1)
    assert state["seed"] == SEED and state["seed_recorded"] is True and "note" not in state

    assert client.post(f"/api/review/trajectories/{bad.pk}/executability/").status_code == 202
    state = _wait_replay(client, bad.pk)
    assert state["status"] == "done", state
    assert state["ok"] is False and state["reward"] == 0.0 and state["replayed_steps"] == 1
    assert state["seed_recorded"] is False and "no seed recorded" in state["note"]

    # The replay leased and gave back its env: it is idle again for the next user.
    wait_idle(timeout=10)
    good.refresh_from_db()
    assert good.review_state == "pending" and good.metadata["seed"] == SEED  # other metadata kept
