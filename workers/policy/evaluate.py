"""Success rate of a policy on MiniWoB++ tasks: play episodes with its top (greedy) candidate.

    evaluate(policy, ["click-test", "enter-text"], seeds=range(1000, 1010)) -> EvalReport

Each step asks the policy for one candidate at `temperature` (0 = greedy), executes the parsed
action(s) in the environment and stops when the page ends the episode, the policy answers something
the grammar cannot parse, or after `max_steps`. Success is `env.evaluate()` (raw MiniWoB reward > 0).
Seeds used for evaluation must not overlap the seeds the demonstrations came from (held out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from workers.envs.base import EnvError, TaskSpec
from workers.policy.base import HistoryItem, Policy

DEFAULT_MAX_STEPS = 6


@dataclass
class EpisodeResult:
    task: str
    seed: int
    success: bool
    steps: int
    actions: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class EvalReport:
    """Per-task success rates and the individual episodes."""

    episodes: list[EpisodeResult]

    @property
    def per_task(self) -> dict[str, float]:
        tasks: dict[str, list[bool]] = {}
        for ep in self.episodes:
            tasks.setdefault(ep.task, []).append(ep.success)
        return {task: sum(results) / len(results) for task, results in tasks.items()}

    @property
    def mean(self) -> float:
        rates = self.per_task
        return sum(rates.values()) / len(rates) if rates else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "per_task": self.per_task,
            "mean": self.mean,
            "episodes": len(self.episodes),
            "successes": sum(ep.success for ep in self.episodes),
        }


def run_episode(
    policy: Policy,
    env: Any,
    task: str,
    seed: int,
    max_steps: int = DEFAULT_MAX_STEPS,
    temperature: float = 0.0,
) -> EpisodeResult:
    """One episode of `task` with `policy`'s first candidate at every step."""
    spec = TaskSpec(task_id=task, instruction="", kind="browser", source="miniwob")
    obs = env.reset(spec, seed=seed)
    history: list[HistoryItem] = []
    result = EpisodeResult(task, seed, False, 0)
    for _ in range(max_steps):
        candidate = policy.propose(obs, history, None, n=1, temperature=temperature)[0]
        result.steps += 1
        result.actions.append(candidate.action_text)
        if not candidate.parsed.ok:
            result.error = f"unparseable: {candidate.raw_text[:120]!r}"
            break
        done = False
        try:
            for action in candidate.parsed.actions:
                step = env.step(action)
                obs, done = step.observation, step.done
                if done:
                    break
        except EnvError as exc:
            result.error = f"env refused the action: {exc}"
            break
        history.append(HistoryItem(candidate.thought, candidate.action_text))
        if done:
            break
    result.success = env.evaluate() > 0
    return result


def evaluate(
    policy: Policy,
    tasks: Iterable[str],
    seeds: Iterable[int],
    env: Any | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    temperature: float = 0.0,
) -> EvalReport:
    """Play every (task, seed) once; a `MiniWoBEnv` is created (and closed) when none is given."""
    own = env is None
    if env is None:
        from workers.envs.browser.miniwob import MiniWoBEnv

        env = MiniWoBEnv(wait_s=0.0)
    seeds = list(seeds)
    episodes: list[EpisodeResult] = []
    try:
        for task in tasks:
            for seed in seeds:
                episodes.append(run_episode(policy, env, task, seed, max_steps, temperature))
    finally:
        if own:
            env.close()
    return EvalReport(episodes)
