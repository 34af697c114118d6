"""MiniWoBEnv on real Chromium: task listing, click-test, enter-text, expert state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.actions.types import Action, Point
from workers.envs.base import EnvError, TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv, list_miniwob_tasks
from workers.envs.browser.pool import BrowserPool


def _task(name: str) -> TaskSpec:
    return TaskSpec(task_id=name, instruction="", kind="browser", source="miniwob")


@pytest.fixture(scope="module")
def env() -> Iterator[MiniWoBEnv]:
    with BrowserPool() as pool:
        e = MiniWoBEnv(pool)
        yield e
        e.close()


def test_lists_every_shipped_task() -> None:
    tasks = list_miniwob_tasks()
    assert len(tasks) > 100
    assert {"click-test", "enter-text", "click-tab"} <= set(tasks)


def test_click_test_solved_by_clicking_the_button_centre(env: MiniWoBEnv) -> None:
    obs = env.reset(_task("click-test"), seed=7)
    assert obs.instruction == "Click the button." and (obs.width, obs.height) == (160, 210)
    button = next(e for e in obs.elements if e.tag == "button")
    result = env.step(Action("click", point=Point(*button.center)))
    assert result.done and result.reward > 0 and env.evaluate() == 1.0


def test_click_test_failed_by_clicking_elsewhere(env: MiniWoBEnv) -> None:
    obs = env.reset(_task("click-test"), seed=7)
    button = next(e for e in obs.elements if e.tag == "button")
    far = Point(5 if button.x > 20 else 155, 60)
    result = env.step(Action("click", point=far))
    assert not result.done and result.reward == 0.0
    assert env.step(Action("finished")).done and env.evaluate() == 0.0


def test_enter_text_solved_by_typing(env: MiniWoBEnv) -> None:
    obs = env.reset(_task("enter-text"), seed=3)
    target = dict(env.expert_state()["fields"])["target"]
    assert target in obs.instruction
    field = next(e for e in obs.elements if e.tag == "input:text")
    env.step(Action("click", point=Point(*field.center)))
    env.step(Action("type", text=target))
    submit = next(e for e in obs.elements if e.tag == "button")
    assert env.step(Action("click", point=Point(*submit.center))).done and env.evaluate() == 1.0


def test_same_seed_same_problem_and_bad_input(env: MiniWoBEnv) -> None:
    first = env.reset(_task("click-test"), seed=11).elements
    assert env.reset(_task("click-test"), seed=11).elements == first
    with pytest.raises(EnvError, match="outside"):
        env.step(Action("click", point=Point(500, 10)))
    with pytest.raises(EnvError, match="unknown MiniWoB"):
        env.reset(_task("no-such-task"))


def test_transition_pause_waits_after_each_action_and_bad_values_are_refused(env: MiniWoBEnv) -> None:
    task = TaskSpec(task_id="click-test", instruction="", kind="browser", source="miniwob",
                    setup={"transition_pause_ms": 300})  # fmt: skip
    obs = env.reset(task, seed=7)
    button = next(e for e in obs.elements if e.tag == "button")
    result = env.step(Action("click", point=Point(*button.center)))
    # the pause sits between the action and the readout: counted in the step's action time
    assert result.done and result.observation.timings_ms["action"] >= 300.0
    env.reset(_task("click-test"), seed=7)  # the next task without a pause does not inherit it
    assert env.pause_s == 0.0
    for bad in (-1, 20_000, "soon", True):
        broken = TaskSpec(task_id="click-test", instruction="", kind="browser", source="miniwob",
                          setup={"transition_pause_ms": bad})  # fmt: skip
        with pytest.raises(EnvError, match="transition_pause_ms"):
            env.reset(broken, seed=1)
