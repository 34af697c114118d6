"""Reward shaping: format, overlong and repetition penalties, weighted total."""

import pytest

from workers.rl.config import RewardConfig
from workers.rl.rewards import (
    cycle_steps,
    format_penalty,
    format_reward,
    length_penalty,
    repeated_action_steps,
    repetition_penalty,
    total_reward,
)


def test_format_reward_takes_a_bool() -> None:
    assert format_reward(True) == 1.0 and format_reward(False) == 0.0
    with pytest.raises(TypeError):
        format_reward("yes")  # type: ignore[arg-type]
    assert format_penalty([True, False, True, True]) == 0.25
    assert format_penalty([]) == 0.0


@pytest.mark.parametrize(("steps", "expected"), [(0, 0.0), (20, 0.0), (25, 0.5), (30, 1.0), (40, 1.0)])
def test_length_penalty(steps: int, expected: float) -> None:
    assert length_penalty(steps, 20, 30) == expected


def test_length_penalty_rejects_bad_limits() -> None:
    with pytest.raises(ValueError):
        length_penalty(5, 30, 30)
    with pytest.raises(ValueError):
        length_penalty(-1, 20, 30)


def test_repeated_action_steps() -> None:
    assert repeated_action_steps(["a", "a", "b", "a", "a", "a"]) == {1, 4, 5}
    assert repeated_action_steps([]) == set()
    # same action type, different parameters: not a repeat (seed 004)
    assert repeated_action_steps(["click(1,2)", "click(3,4)", "click(1,2)"]) == set()


def test_cycle_steps() -> None:
    assert cycle_steps(list("abcabcd")) == {3, 4, 5}
    assert cycle_steps(list("abcabd")) == set()  # only two of three actions came back
    assert cycle_steps(list("abcdabcd")) == {4, 5, 6, 7}
    assert cycle_steps(list("abcdeabcde")) == {5, 6, 7, 8, 9}
    assert cycle_steps(list("abcdefabcdef")) == set()  # period 6 is beyond 3–5
    assert cycle_steps(list("xabcabcabc")) == {4, 5, 6, 7, 8, 9}
    assert cycle_steps([]) == set()
    with pytest.raises(ValueError):
        cycle_steps(list("abc"), 4, 3)


def test_repetition_penalty() -> None:
    assert repetition_penalty(list("abcabc")) == 0.5
    assert repetition_penalty(list("xxxx")) == 0.75
    assert repetition_penalty(list("abcdef")) == 0.0
    assert repetition_penalty([]) == 0.0


def test_total_reward_combines_weighted_parts() -> None:
    config = RewardConfig(
        task_weight=1.0, format_weight=0.2, length_weight=0.5, length_soft_limit=2, length_hard_limit=4,
        repetition_weight=0.1,
    )  # fmt: skip
    out = total_reward(1.0, list("abcabc"), [True] * 5 + [False], config)
    # format 1/6, length 1.0 (6 ≥ 4), repetition 0.5 → 1 − 0.2/6 − 0.5 − 0.05 = 0.4166667
    assert (out.format_penalty, out.length_penalty, out.repetition_penalty) == (
        pytest.approx(1 / 6),
        1.0,
        0.5,
    )
    assert out.total == pytest.approx(0.4166667, abs=1e-6)
    assert set(out.to_dict()) == {"task", "format_penalty", "length_penalty", "repetition_penalty", "total"}


def test_total_reward_defaults_and_errors() -> None:
    clean = total_reward(1.0, ["a", "b"], [True, True], RewardConfig())
    assert clean.total == 1.0
    with pytest.raises(ValueError, match="task_reward"):
        total_reward(float("nan"), [], [], RewardConfig())
    with pytest.raises(ValueError, match="must be > length_soft_limit"):
        total_reward(1.0, [], [], RewardConfig(length_soft_limit=40, length_hard_limit=30))
