"""The env host on real desktops (Xvfb + openbox): warm pool, leased calls, crash detection, replacement."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest
import redis
from django.conf import settings

from workers.actions.types import Action, Point
from workers.envs.base import EnvCrashed
from workers.envs.desktop.env import DesktopConfig, DesktopEnv
from workers.envs.host import EnvHost, UnknownEnv
from workers.envs.leases import LeaseRegistry
from workers.envs.wire import observation_from_wire, step_result_from_wire


def desktop() -> DesktopEnv:
    return DesktopEnv(DesktopConfig(vnc=False, apps=(), display_range=(400, 460)))


@pytest.fixture
def host():
    reg = LeaseRegistry(redis.Redis.from_url(settings.REDIS_URL), prefix=f"test:host:{uuid.uuid4().hex}")
    h = EnvHost(registry=reg, worker="w-test", factories={"desktop": desktop}, warm={"desktop": 1},
                capacity={"desktop": 2})  # fmt: skip
    yield h
    h.shutdown()
    reg.clear()


TASK = {"task_id": "t1", "instruction": "Look at the desktop.", "kind": "desktop", "source": "custom"}


def test_warm_pool_lease_and_act(host: EnvHost) -> None:
    booted = host.maintain()["booted"]
    assert len(booted) == 1 and host.registry.idle_count("desktop") == 1
    assert host.maintain()["booted"] == []  # warm pool already full
    lease = host.registry.acquire(kind="desktop", owner="test", task="t1")
    assert lease is not None and lease.worker == "w-test"
    host.maintain()  # the leased env no longer counts as idle: a second one boots
    assert host.registry.idle_count("desktop") == 1 and len(host.envs) == 2

    answer = host.call(lease.env_id, "reset", {"task": TASK})
    obs = observation_from_wire(answer["observation"])
    assert (obs.width, obs.height) == (1280, 800) and obs.screenshot[:2] == b"\xff\xd8"
    # what re-creates the episode besides task and seed (workers.envs.episode): no apps, this screen
    env = answer["env"]
    assert env["kind"] == "desktop" and env["start"] == {"screen": [1280, 800], "apps": []}
    assert env["version"]["xvfb"] and env["version"]["desktop-env"]
    result = step_result_from_wire(
        host.call(lease.env_id, "step", {"action": Action(kind="click", point=Point(640, 400)).to_json()})
    )
    assert result.observation.screenshot[:2] == b"\xff\xd8" and "error" not in result.info
    assert host.call(lease.env_id, "evaluate")["reward"] == 0.0
    with pytest.raises(UnknownEnv):
        host.call("desktop-nope", "observe")


def test_killed_xvfb_is_detected_and_replaced(host: EnvHost) -> None:
    host.maintain()
    lease = host.registry.acquire(kind="desktop", owner="test")
    assert lease is not None
    env = host.envs[lease.env_id].env
    host.call(lease.env_id, "reset", {"task": TASK})
    assert isinstance(env, DesktopEnv)
    os.kill(env._x.xvfb.pid, signal.SIGKILL)
    env._x.xvfb.wait(timeout=5)
    with pytest.raises(EnvCrashed):
        host.call(lease.env_id, "observe")
    assert host.registry.renew(lease_id=lease.lease_id) == "crashed"
    assert lease.env_id not in host.envs and host.stats.crashed == 1
    host.maintain()  # a replacement boots into the warm pool
    assert host.registry.idle_count("desktop") == 1
    assert host.registry.metrics()["crashed"] == 1


def test_health_check_finds_a_dead_idle_env(host: EnvHost) -> None:
    (env_id,) = host.maintain()["booted"]
    env = host.envs[env_id].env
    assert isinstance(env, DesktopEnv)
    os.kill(env._x.xvfb.pid, signal.SIGKILL)
    env._x.xvfb.wait(timeout=5)
    result = host.maintain()
    assert result["dead"] == [env_id] and len(result["booted"]) == 1
    assert host.stats.replaced == 1


def test_envs_the_registry_lost_are_registered_again(host: EnvHost) -> None:
    """Redis restarted (it keeps nothing on disk): the host's running envs go back into service,
    the lease from before is gone, and no needless env boots."""
    (env_id,) = host.maintain()["booted"]
    lease = host.registry.acquire(kind="desktop", owner="test")
    assert lease is not None and lease.env_id == env_id
    host.maintain()  # the leased env no longer counts as idle: a second one boots
    assert len(host.envs) == 2
    host.registry.clear()  # what a restart leaves of this registry
    assert host.registry.idle_count("desktop") == 0
    result = host.maintain()
    assert result["booted"] == [] and len(host.envs) == 2
    assert host.registry.idle_count("desktop") == 2
    assert {host.registry.env(e)["state"] for e in host.envs} == {"idle"}
    assert host.registry.renew(lease_id=lease.lease_id) == "gone"
    again = host.registry.acquire(kind="desktop", owner="test")
    assert again is not None and again.env_id in host.envs
    obs = observation_from_wire(host.call(again.env_id, "reset", {"task": TASK})["observation"])
    assert (obs.width, obs.height) == (1280, 800)


def test_a_used_env_is_rebooted_between_leases_not_at_the_next_reset(host: EnvHost) -> None:
    host.maintain()
    lease = host.registry.acquire(kind="desktop", owner="test", task="t1")
    assert lease is not None
    host.call(lease.env_id, "reset", {"task": TASK})
    host.call(lease.env_id, "step", {"action": Action(kind="type", text="left over").to_json()})
    env = host.envs[lease.env_id].env
    assert isinstance(env, DesktopEnv) and env.used
    assert host.recycle_idle() == []  # leased: never touched
    used_box = env.sandbox
    host.registry.release(lease_id=lease.lease_id)
    assert host.maintain()["recycled"] == [lease.env_id]  # idle again: a fresh session boots now
    fresh_box = env.sandbox
    assert fresh_box is not used_box and not env.used and host.stats.recycled == 1
    assert host.maintain()["recycled"] == []  # nothing to do for a fresh env
    again = host.registry.acquire(kind="desktop", owner="test", task="t2")
    assert again is not None and again.env_id == lease.env_id  # the only env here
    host.call(again.env_id, "reset", {"task": TASK})  # starts on the fresh session, no reboot
    assert env.sandbox is fresh_box


def test_a_reset_rebooting_a_used_desktop_is_not_taken_for_a_crash(host: EnvHost) -> None:
    """The upkeep thread health-checks envs while calls run. A reset of a used desktop reboots it in
    the call (no X server, then a new sandbox, for a moment); the health check took that for a dead
    env and closed it under the reset, which then failed with "the session's sandbox is not running"
    (or a missing log directory, "desktop not booted", ...) and lost the env: 14 % of RL episodes
    at the default 1 s upkeep period. Here the upkeep runs every 50 ms so that every reboot meets it."""
    host.period_s = 0.05
    host.start()  # its first upkeep boots the warm desktop before it returns
    lease = host.registry.acquire(kind="desktop", owner="test", task="t1")
    assert lease is not None
    env = host.envs[lease.env_id].env
    assert isinstance(env, DesktopEnv)
    host.call(lease.env_id, "reset", {"task": TASK})  # the warm session, no reboot
    for _ in range(3):
        box = env._box
        host.call(lease.env_id, "reset", {"task": TASK})  # used since the last one: reboots here
        assert env._box is not box
        result = step_result_from_wire(
            host.call(lease.env_id, "step", {"action": Action(kind="click", point=Point(5, 5)).to_json()})
        )
        assert "error" not in result.info
    assert host.stats.crashed == 0 and host.registry.renew(lease_id=lease.lease_id) == "active"


def test_a_call_waiting_for_an_env_taken_out_of_service_finds_it_gone(host: EnvHost, monkeypatch) -> None:
    """The health check and the recycle close an env while holding its lock; a call that waited for
    the lock meanwhile must not run on the closed env (a reset would boot a session nobody hosts):
    it raises UnknownEnv, which the Celery task reports as lost to the lease, like a crash."""
    import threading

    from webapp.fleet import host_worker, tasks

    (env_id,) = host.maintain()["booted"]
    hosted = host.envs[env_id]
    outcome: list[object] = []
    with hosted.lock:
        caller = threading.Thread(target=lambda: outcome.append(tasks.env_call(env_id, "observe")))
        monkeypatch.setattr(host_worker, "_host", host)
        caller.start()
        caller.join(timeout=0.5)
        assert caller.is_alive()  # waits for the lock
        host._discard(hosted, reason="taken out of service")
    caller.join(timeout=10)
    (result,) = outcome
    assert isinstance(result, dict) and result["ok"] is False and result["crashed"] is True
    assert "no longer hosted" in result["error"]
    assert not hosted.env.is_alive()  # closed, and nothing booted it again


def test_shutdown_waits_for_a_reset_in_progress(host: EnvHost) -> None:
    # A host shut down while a reset rebooted a used desktop closed the env under it: the reset
    # failed with its log directory or sandbox gone, and what it had started was left running.
    host.maintain()
    lease = host.registry.acquire(kind="desktop", owner="test")
    assert lease is not None
    env = host.envs[lease.env_id].env
    assert isinstance(env, DesktopEnv)
    host.call(lease.env_id, "reset", {"task": TASK})  # used: the next reset reboots it
    errors: list[BaseException] = []

    def reset() -> None:
        try:
            host.call(lease.env_id, "reset", {"task": TASK})
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    thread = threading.Thread(target=reset)
    thread.start()
    time.sleep(0.2)  # the reboot takes about a second
    host.shutdown()
    thread.join(timeout=30)
    assert errors == []
    assert env._x is None and env._box is None and not env._log_dir.exists()
