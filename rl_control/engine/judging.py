"""The LLM judge as an RL outcome reward (seed 000 §2.5, seed 004): for tasks with no verifier (or
every episode, when the run says so) the run's judge (workers.policy.judge.LLMJudge, any
OpenAI-compatible server) reads the instruction, every thought and action and the last screenshots,
and its verdict (success = 1, failure = 0) replaces the environment's reward. The verdict is kept in
the trajectory's metadata (`engine.judge`) and shown in replay."""

from __future__ import annotations

from typing import Any

from webapp.store.models import Task, TaskSource, Trajectory
from webapp.store.selectors import trajectory_judge_steps
from workers.policy.judge import JudgeError, LLMJudge

# Sources whose environments score every task themselves (MiniWoB++ rewards, game scores).
_SCORED_SOURCES = {TaskSource.MINIWOB, TaskSource.GAME}


class JudgeFailed(RuntimeError):
    """The judge gave no verdict (unreachable, or an answer without one): the episode has no reward."""


def task_has_verifier(task: Task) -> bool:
    return bool(task.verifier) or task.source in _SCORED_SOURCES


def judge_applies(config: dict[str, Any], task: Task) -> bool:
    judge = config.get("judge") or {}
    if not str(judge.get("url") or "").strip():
        return False
    return judge.get("use", "no_verifier") == "always" or not task_has_verifier(task)


def judge_episode(
    *,
    config: dict[str, Any],
    trajectory: Trajectory,
    task: Task,
    final_screen: bytes | None,
    env_reward: float,
) -> dict[str, Any]:
    """The judge's verdict on a finished episode: {reward, success, reason, correct_steps, model,
    model_version, raw}. Raises JudgeFailed."""
    settings = config["judge"]
    try:
        judge = LLMJudge(str(settings["url"]).strip(), str(settings.get("model") or "judge"),
                         max_screenshots=int(settings.get("max_screenshots", 3)), timeout_s=60.0, max_retries=2)  # fmt: skip
    except ValueError as exc:
        raise JudgeFailed(str(exc)) from exc
    notes = [f"Environment reward: {env_reward:g}"] if task_has_verifier(task) else []
    try:
        verdict = judge.judge(
            trajectory.episode_instruction, trajectory_judge_steps(trajectory, final_screen), notes
        )
    except JudgeError as exc:
        raise JudgeFailed(f"the judge gave no verdict: {exc}") from exc
    finally:
        judge.close()
    return {
        "reward": verdict.reward,
        "success": verdict.success,
        "reason": verdict.reason[:1000],
        "correct_steps": verdict.correct_steps,
        "model": str(settings.get("model") or "judge"),
        "model_version": verdict.model_version,
        "raw": verdict.raw[:2000],
        "env_reward": env_reward,
    }
