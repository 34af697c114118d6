"""PhoneEnv on real Chromium with Pixel 7 emulation: tap, long press, swipe, back, home, open_app."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.actions.types import Action, Point
from workers.envs.base import EnvError, TaskSpec
from workers.envs.browser.pool import BrowserPool
from workers.envs.phone.env import PhoneEnv

TASK = TaskSpec(
    task_id="wifi",
    instruction="Turn Wi-Fi off",
    kind="phone",
    source="phone",
    setup={"apps": {"settings": "settings.html?goal=wifi_off", "dark": "settings.html?goal=dark_on"}},
)


@pytest.fixture(scope="module")
def env() -> Iterator[PhoneEnv]:
    with BrowserPool() as pool:
        e = PhoneEnv(pool)
        yield e
        e.close()


def test_tap_toggles_and_verifier_rewards(env: PhoneEnv) -> None:
    obs = env.reset(TASK)
    assert (obs.width, obs.height) == (412, 839)
    wifi = next(e for e in obs.elements if e.tag == "input:checkbox")
    result = env.step(Action("click", point=Point(*wifi.center)))
    assert result.done and result.reward == 1.0


def test_long_press_swipe_back_home_open_app(env: PhoneEnv) -> None:
    apps = {"settings": "settings.html?goal=long_press", "dark": "settings.html?goal=dark_on"}
    obs = env.reset(
        TaskSpec(task_id="lp", instruction="", kind="phone", source="phone", setup={"apps": apps})
    )
    label = next(e for e in obs.elements if e.text == "Wi-Fi")
    pressed = env.step(Action("long_press", point=Point(*label.center)))
    assert pressed.info["long_pressed"] and pressed.done
    apps["settings"] = "settings.html?goal=never"
    env.reset(TaskSpec(task_id="nav", instruction="", kind="phone", source="phone", setup={"apps": apps}))
    swiped = env.step(Action("swipe", point=Point(200, 600), direction="up"))
    assert swiped.info["scroll_y"] > 0
    env.step(Action("open_app", text="dark"))
    assert "dark_on" in env.observe().url
    env.step(Action("press_back"))
    assert "never" in env.observe().url
    env.step(Action("open_app", text="dark"))
    env.step(Action("press_home"))
    assert "never" in env.observe().url
    with pytest.raises(EnvError, match="unknown app"):
        env.step(Action("open_app", text="maps"))
