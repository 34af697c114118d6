"""`play_steps`, the one way stored actions are played back (replay_check, the OSWorld reference
check, review's executability check): where it stops, what it sends and what it counts. The step
function here records what an environment would be sent and ends the episode where told to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from workers.actions.types import Action
from workers.envs.replay import play_steps


def _click(x: int) -> dict[str, Any]:
    return {"kind": "click", "point": [x, 10]}


class Recorder:
    def __init__(self, done_after: int | None = None) -> None:
        self.sent: list[Action] = []
        self.done_after = done_after

    def __call__(self, action: Action) -> bool:
        self.sent.append(action)
        return self.done_after is not None and len(self.sent) >= self.done_after


def test_every_step_runs_in_order_and_is_counted() -> None:
    env = Recorder()
    assert play_steps(env, [[_click(1), _click(2)], [], [_click(3)]]) == 3
    assert [a.point.x for a in env.sent if a.point] == [1, 2, 3]


def test_the_episode_end_stops_the_replay_and_counts_its_step() -> None:
    env = Recorder(done_after=2)
    assert play_steps(env, [[_click(1)], [_click(2), _click(3)], [_click(4)]]) == 2
    assert len(env.sent) == 2  # the rest of step 1 and step 2 were never sent


def test_a_terminal_action_is_sent_and_stops_the_replay() -> None:
    """Sent, as annotation and rollouts send it: OSWorld scores an infeasible task from it (FAIL)."""
    env = Recorder()
    steps = [[_click(1)], [{"kind": "call_user"}, _click(2)], [_click(3)]]
    assert play_steps(env, steps) == 2
    assert [a.kind for a in env.sent] == ["click", "call_user"]


def test_steps_are_read_lazily_so_a_caller_sees_how_far_it_got() -> None:
    taken: list[int] = []

    def steps() -> Iterator[list[dict[str, Any]]]:
        for i in range(5):
            taken.append(i)
            yield [_click(i)]

    assert play_steps(Recorder(done_after=2), steps()) == 2
    assert taken == [0, 1]  # step 2 was never built


def test_an_unreadable_action_is_refused_before_anything_is_sent() -> None:
    env = Recorder()
    with pytest.raises((KeyError, TypeError, ValueError)):
        play_steps(env, [[{"kind": "click", "point": ["left", 1]}]])
    assert env.sent == []
