"""The remote-VM workload of `bench rollout` (benchmarks/remote_vm.py): the stated latency
distribution, and a real MiniWoB++ environment that answers only after its drawn time, idle meanwhile."""

from __future__ import annotations

import random
import resource
import time

import pytest

from benchmarks.harness.config import RolloutBenchConfig
from benchmarks.remote_vm import RemoteLatency, RemoteVM, wrap_factories
from workers.actions.types import Action, Point
from workers.envs.base import TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.envs.factory import FACTORIES, shutdown_shared


def test_draws_follow_the_stated_osworld_like_distribution() -> None:
    latency, rng = RemoteLatency(), random.Random(0)
    steps = [latency.draw(rng, "step") for _ in range(4000)]
    resets = [latency.draw(rng, "reset") for _ in range(4000)]
    assert 1.0 <= min(steps) and max(steps) <= 3.0 * 2.5 and 5.0 <= min(resets) and max(resets) <= 50.0
    assert 0.03 < sum(s > 3.0 for s in steps) / len(steps) < 0.05  # the tail: 5 % of calls, most above 3 s
    assert 0.9 * 12.5 < sum(resets) / len(resets) < 1.2 * 12.5 * 1.1


def test_a_real_environment_answers_after_its_drawn_time_without_using_the_cpu() -> None:
    """The env host's own factories, wrapped: a browser environment is MiniWoB++ in Chromium."""
    latency = RemoteLatency(step_s=(1.0, 1.0), reset_s=(2.0, 2.0), tail_p=0.0)
    factories = dict(FACTORIES)
    wrap_factories(factories, latency, seed=1)
    assert set(factories) == set(FACTORIES)
    try:
        env = factories["browser"]()
        assert isinstance(env, RemoteVM) and isinstance(env.env, MiniWoBEnv)
        task = TaskSpec(task_id="click-test", instruction="", kind="browser", source="miniwob")
        env.env.reset(task, seed=6)  # Chromium's start, not part of a call's time
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        obs = env.reset(
            TaskSpec(task_id="click-test", instruction="", kind="browser", source="miniwob"), seed=7
        )
        reset_s = time.monotonic() - t0
        button = next(e for e in obs.elements if e.tag == "button")
        t1 = time.monotonic()
        result = env.step(Action("click", point=Point(*button.center)))
        step_s, cpu1 = time.monotonic() - t1, resource.getrusage(resource.RUSAGE_SELF)
        assert result.done and env.evaluate() == 1.0  # the real environment's answer, delegated
        env.close()
    finally:
        shutdown_shared()
    assert 2.0 <= reset_s < 4.0 and 1.0 <= step_s < 3.0
    cpu_s = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    assert cpu_s < 0.5 * (reset_s + step_s), cpu_s  # this process mostly waited


def test_the_workload_is_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_ROLLOUT_WORKLOAD", "remote")
    config = RolloutBenchConfig.for_run(True)
    assert config.workload == "remote" and config.window_s == 480.0
    # DART's shape, scaled: a fleet of 16, its 30-step cap, groups of 4, sync batches of 4 groups
    assert (config.envs, config.step_cap, config.group_size, config.batch_groups) == (16, 30, 4, 4)
    monkeypatch.setenv("FLYWHEEL_ROLLOUT_WORKLOAD", "starter")
    config = RolloutBenchConfig.for_run(True)
    assert (config.envs, config.step_cap) == (4, 8)
