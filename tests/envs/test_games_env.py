"""GameEnv on real Chromium: verifiers report progress and episodes replay under a seed."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import pytest

from workers.actions.types import Action, Point
from workers.envs.base import TaskSpec
from workers.envs.browser.pool import BrowserPool
from workers.envs.games.env import GameEnv, list_games


def _task(game: str, **params: object) -> TaskSpec:
    return TaskSpec(task_id=game, instruction="", kind="game", source="games", setup={"params": params})


@pytest.fixture(scope="module")
def env() -> Iterator[GameEnv]:
    with BrowserPool() as pool:
        e = GameEnv(pool)
        yield e
        e.close()


def _play_whack(env: GameEnv, seed: int) -> list[int]:
    env.reset(_task("whack", moles=3), seed=seed)
    positions = []
    for _ in range(40):
        state = env.expert_state()["state"]
        if state["current"] >= 0:
            positions.append(state["current"])
            mole = next(e for e in env.observe().elements if e.text == "MOLE")
            result = env.step(Action("click", point=Point(*mole.center)))
        else:
            result = env.step(Action("wait"))
        if result.done:
            break
    return positions


def test_games_are_listed() -> None:
    assert set(list_games()) >= {"2048", "whack", "maze"}


def test_whack_progress_and_determinism(env: GameEnv) -> None:
    first = _play_whack(env, seed=4)
    assert env.evaluate() == 1.0 and env.done and len(first) == 3
    assert _play_whack(env, seed=4) == first


def test_2048_move_is_rewarded_and_deterministic(env: GameEnv) -> None:
    boards = []
    for _ in range(2):
        env.reset(_task("2048", target=64), seed=9)
        before = env.evaluate()
        for key in ("left", "up", "left", "up", "left", "up"):
            env.step(Action("hotkey", keys=(key,)))
        boards.append(env.expert_state()["state"]["board"])
        assert env.evaluate() >= before
    assert boards[0] == boards[1] and sum(boards[0]) > 4


def test_maze_walking_towards_goal_raises_reward(env: GameEnv) -> None:
    env.reset(_task("maze", size=4), seed=2)
    state = env.expert_state()["state"]
    size, nbrs = state["size"], state["neighbours"]
    # Shortest path by BFS over the page's own adjacency, then walk it with arrow keys.
    goal, prev = size * size - 1, {0: None}
    queue = [0]
    while queue:
        k = queue.pop(0)
        for n in nbrs[k]:
            if n not in prev:
                prev[n] = k
                queue.append(n)
    path = [goal]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    path.reverse()
    names = {1: "right", -1: "left", size: "down", -size: "up"}
    rewards = []
    for a, b in itertools.pairwise(path):
        rewards.append(env.step(Action("hotkey", keys=(names[b - a],))).reward)
    assert all(r > 0 for r in rewards) and env.done and env.evaluate() == 1.0


def test_a_task_can_run_its_game_in_real_time_and_the_next_task_gets_the_default(env: GameEnv) -> None:
    import time

    def page_clock_advance() -> float:
        now = env._require().call(lambda s: s.page.evaluate("performance.now()"), 10.0)
        time.sleep(0.3)
        return float(env._require().call(lambda s: s.page.evaluate("performance.now()"), 10.0)) - float(now)

    real = TaskSpec(
        task_id="maze", instruction="", kind="game", source="games", setup={"virtual_time": False}
    )
    env.reset(real, seed=3)
    assert not env.virtual_time and page_clock_advance() >= 250  # the page's clock runs on its own
    env.reset(_task("maze"), seed=3)
    assert env.virtual_time and page_clock_advance() < 50  # paused between steps again


def test_games_reset_together_on_a_fresh_pool(run_together) -> None:
    # The first resets of an env host's game envs arrive together on a pool with no Chromium yet:
    # each launched one, and episodes were lost ("lease crashed", "sandbox is not running").
    with BrowserPool() as pool:
        envs = [GameEnv(pool, virtual_time=False) for _ in range(4)]
        games = itertools.cycle(list_games())
        resets = [functools.partial(e.reset, _task(next(games)), seed=1) for e in envs]
        assert run_together(resets) == []
        assert pool.launches == 1
        assert all(e.is_alive() for e in envs)
        for e in envs:
            e.close()
