"""Reward shaping around the verifier's outcome (seed 000 §2.5.4, seed 004 §2.3.3, SPEC §8).

Actions arrive as hashable canonical strings (e.g. ``click(start_box='(10,20)')``), so "the same
action" means the same type AND the same parameters: seed 004 does not penalise repeated action
types with different parameters. Parsing is someone else's job; the format reward takes booleans.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

from workers.rl.config import RewardConfig


def format_reward(parse_ok: bool) -> float:
    """1.0 when the model's output parsed into a valid action, else 0.0."""
    if not isinstance(parse_ok, bool):
        raise TypeError(f"parse_ok must be a bool, got {type(parse_ok).__name__}")
    return 1.0 if parse_ok else 0.0


def format_penalty(parse_oks: Sequence[bool]) -> float:
    """Share of steps whose output did not parse, in [0, 1]; 0 for an empty trajectory."""
    if not parse_oks:
        return 0.0
    return 1.0 - sum(format_reward(ok) for ok in parse_oks) / len(parse_oks)


def length_penalty(n_steps: int, soft_limit: int, hard_limit: int) -> float:
    """Overlong penalty in [0, 1] (DAPO's soft overlong punishment, applied to steps).

    0 up to `soft_limit` steps, rising linearly to 1 at `hard_limit`, 1 beyond.
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be ≥ 0, got {n_steps}")
    if not 0 <= soft_limit < hard_limit:
        raise ValueError(f"need 0 ≤ soft_limit < hard_limit, got {soft_limit}, {hard_limit}")
    return min(1.0, max(0.0, (n_steps - soft_limit) / (hard_limit - soft_limit)))


def repeated_action_steps(actions: Sequence[Hashable]) -> set[int]:
    """Indices t ≥ 1 whose action equals the action at t − 1 (a single action repeated)."""
    return {t for t in range(1, len(actions)) if actions[t] == actions[t - 1]}


def cycle_steps(actions: Sequence[Hashable], min_len: int = 3, max_len: int = 5) -> set[int]:
    """Indices of steps that replay an action cycle of length p ∈ [min_len, max_len].

    A step t repeats period p when a_t = a_{t−p}. A run of at least p consecutive such steps means a
    whole cycle of p actions was played again (A B C A B C …); every step of such a run is returned.
    Shorter runs (a single coincidental match) are not loops and are ignored.
    """
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 ≤ min_len ≤ max_len, got {min_len}, {max_len}")
    looping: set[int] = set()
    n = len(actions)
    for p in range(min_len, max_len + 1):
        run: list[int] = []
        for t in range(p, n + 1):
            if t < n and actions[t] == actions[t - p]:
                run.append(t)
                continue
            if len(run) >= p:
                looping.update(run)
            run = []
    return looping


def repetition_penalty(actions: Sequence[Hashable], cycle_min: int = 3, cycle_max: int = 5) -> float:
    """Share of steps, in [0, 1], that repeat the previous action or replay a 3–5 action cycle."""
    if not actions:
        return 0.0
    bad = repeated_action_steps(actions) | cycle_steps(actions, cycle_min, cycle_max)
    return len(bad) / len(actions)


@dataclass(frozen=True)
class RewardBreakdown:
    """A trajectory's total reward and its parts (penalties are unweighted, in [0, 1])."""

    task: float
    format_penalty: float
    length_penalty: float
    repetition_penalty: float
    total: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def total_reward(
    task_reward: float,
    actions: Sequence[Hashable],
    parse_oks: Sequence[bool],
    config: RewardConfig,
) -> RewardBreakdown:
    """total = w_task·task − w_format·format − w_length·length − w_rep·repetition (weights from config).

    Args:
        task_reward: the verifier / judge / ORM outcome for the trajectory.
        actions: canonical action strings, one per executed step.
        parse_oks: whether each step's output parsed (len may exceed len(actions): unparsed outputs
            execute nothing).
        config: the shaping weights and limits (valid: a RewardConfig is checked when built).
    """
    if not math.isfinite(task_reward):
        raise ValueError(f"task_reward must be finite, got {task_reward}")
    fmt = format_penalty(parse_oks)
    n_steps = max(len(actions), len(parse_oks))
    length = length_penalty(n_steps, config.length_soft_limit, config.length_hard_limit)
    rep = repetition_penalty(actions, config.cycle_min, config.cycle_max)
    total = (
        config.task_weight * task_reward
        - config.format_weight * fmt
        - config.length_weight * length
        - config.repetition_weight * rep
    )
    return RewardBreakdown(task_reward, fmt, length, rep, total)
