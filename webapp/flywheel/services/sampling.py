"""Rejection sampling (seed 004 §2.2): K episodes per task with a chosen checkpoint through the
environments, each stored as a `Trajectory(source=rejection_sampling)` with its steps, verified,
validated with the pool's V(s), and kept (V=1 → SFT, V=0 → CT, with the judge-marked correct prefix).

The episode runner is small and self-contained: the RL engine's rollout (rl_control/engine) is bound
to RL run slots and groups, which rejection sampling does not have. Environments come from the fleet
(webapp.fleet leases, `use_fleet=True`) or a local MiniWoB++ page; the policy is the checkpoint's
external endpoint, a given policy-server URL, or the embedded model in-process.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from webapp.flywheel.services.validation import ValidationError, trajectory_validate_auto
from webapp.store import services as store
from webapp.store.checkpoints import checkpoint_dir, policy_server_key
from webapp.store.models import Checkpoint, Task, Trajectory, TrajectorySource, TrajectoryStatus
from webapp.store.taskspec import task_spec_wire
from workers.envs.base import EnvError, Observation, StepResult, TaskSpec
from workers.envs.wire import observation_from_wire, step_result_from_wire

DEFAULT_MAX_STEPS = 6


class LeasedEnv:
    """An environment leased from the fleet, driven through `webapp.fleet.services.env_call`."""

    def __init__(self, kind: str, owner: str, task: str = "") -> None:
        from webapp.fleet.services import lease_acquire

        self.lease = lease_acquire(kind=kind, owner=owner, task=task, background=True)  # after annotators

    def _call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        from webapp.fleet.services import EnvCallFailed, env_call

        try:
            return env_call(lease=self.lease, op=op, payload=payload)
        except EnvCallFailed as exc:
            raise EnvError(str(exc)) from exc

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        return observation_from_wire(self._call("reset", {"task": asdict(task), "seed": seed})["observation"])

    def step(self, action: Any) -> StepResult:
        return step_result_from_wire(self._call("step", {"action": action.to_json()}))

    def evaluate(self) -> float:
        return float(self._call("evaluate")["reward"])

    def close(self) -> None:
        from webapp.fleet.services import lease_release

        lease_release(lease_id=self.lease.lease_id)


def open_env(*, use_fleet: bool, kind: str, owner: str) -> Any:
    if use_fleet:
        return LeasedEnv(kind, owner)
    if kind != "browser":
        raise EnvError(f"without the fleet only MiniWoB++ browser tasks run locally, not {kind!r}")
    from workers.envs.browser.miniwob import MiniWoBEnv

    return MiniWoBEnv(wait_s=0.0)


def open_policy(
    *,
    checkpoint: Checkpoint,
    policy_url: str = "",
    seed: int | None = None,
    max_new_tokens: int | None = None,
) -> Any:
    """The checkpoint's external endpoint, a policy server serving it, or the embedded model
    (optionally with `max_new_tokens` per response)."""
    from workers.policy.openai_client import EMBEDDED, OpenAIPolicy

    if checkpoint.endpoint_url:
        from workers.policy.profiles import PROFILES

        url = checkpoint.endpoint_url
        return OpenAIPolicy(
            url, checkpoint.version, PROFILES[checkpoint.profile], api_key=policy_server_key(url)
        )
    if policy_url:
        return OpenAIPolicy(policy_url, checkpoint.version, EMBEDDED, api_key=policy_server_key(policy_url))
    from workers.policy.embedded.policy import EmbeddedPolicy

    return EmbeddedPolicy.from_pretrained(
        checkpoint_dir(checkpoint), seed=seed, max_new_tokens=max_new_tokens or None
    )


def task_spec(task: Task) -> TaskSpec:
    return TaskSpec(**task_spec_wire(task))


def _elements(obs: Observation) -> list[dict[str, Any]]:
    return [asdict(e) for e in obs.elements]


def sample_episode(
    *,
    policy: Any,
    env: Any,
    task: Task,
    checkpoint: Checkpoint | None,
    seed: int,
    max_steps: int = DEFAULT_MAX_STEPS,
    temperature: float = 1.0,
    metadata: dict[str, Any] | None = None,
) -> Trajectory:
    """Play one episode with the policy's sampled candidate, storing every step (screenshot, element
    list in `Step.rl["elements"]` so SFT can rebuild the prompt), then verify and finish it."""
    from workers.policy.base import HistoryItem, instruction_of

    spec = task_spec(task)
    trajectory = store.trajectory_create(
        task=task, source=TrajectorySource.REJECTION_SAMPLING, checkpoint=checkpoint,
        metadata={"seed": seed, "temperature": temperature, **(metadata or {})},
    )  # fmt: skip
    status, reward = TrajectoryStatus.COMPLETED, 0.0
    try:
        obs = env.reset(spec, seed=seed)
        store.trajectory_set_instruction(trajectory=trajectory, instruction=obs.instruction)
        history: list[HistoryItem] = []
        for _ in range(max_steps):
            candidate = policy.propose(obs, history, spec, n=1, temperature=temperature)[0]
            actions = list(candidate.parsed.actions) if candidate.parsed.ok else []
            store.step_append(
                trajectory=trajectory,
                screenshot=obs.screenshot,
                image_format=obs.image_format,
                fields={
                    "raw_text": candidate.raw_text,
                    "thought": candidate.thought,
                    "action_text": candidate.action_text,
                    "action": [a.to_json() for a in actions],
                    "parse_error": candidate.parsed.error or "",
                    "coord_convention": str(candidate.convention.value),
                    "screen_width": obs.width,
                    "screen_height": obs.height,
                    "policy_version": candidate.model_version,
                    "rl": {
                        "elements": _elements(obs),
                        "instruction": instruction_of(obs, spec),
                        "logprob_sum": candidate.logprob_sum,
                    },
                },
            )
            if not actions:
                break  # unparseable: the episode ends as a failure
            done = False
            for action in actions:
                result = env.step(action)
                obs, done = result.observation, result.done
                if done:
                    break
            history.append(HistoryItem(candidate.thought, candidate.action_text))
            if done:
                break
        reward = float(env.evaluate())
    except EnvError as exc:
        status = TrajectoryStatus.CRASHED
        trajectory.metadata = {**trajectory.metadata, "error": str(exc)[:500]}
        Trajectory.objects.filter(pk=trajectory.pk).update(metadata=trajectory.metadata)
    return store.trajectory_finish(
        trajectory=trajectory,
        status=status,
        final_reward=reward if status == TrajectoryStatus.COMPLETED else None,
    )


def record_expert_episode(*, env: Any, task: Task, seed: int, thoughts: bool = True) -> Trajectory | None:
    """A scripted-expert demonstration stored as an annotation stand-in (labelled in metadata and
    `policy_version`), for running the flywheel without a human. None if the expert cannot plan it.
    `thoughts=False` stores empty thoughts (action-only demonstrations)."""
    from webapp.store.sft_jobs import expert_trajectory_store
    from workers.policy.expert import play_expert_episode

    spec = task_spec(task)
    play = play_expert_episode(env, spec, seed, thoughts)
    if play.error is not None:
        return None
    return expert_trajectory_store(
        task=task, spec=spec, play=play, source=TrajectorySource.ANNOTATION, decision="overridden",
        metadata={"seed": seed, "stand_in": "scripted MiniWoB++ expert standing in for a human annotation"},
    )  # fmt: skip


def sample_task(
    *,
    task: Task,
    checkpoint: Checkpoint,
    seeds: list[int],
    policy: Any,
    env: Any,
    max_steps: int = DEFAULT_MAX_STEPS,
    temperature: float = 1.0,
    job_id: int | None = None,
) -> list[Trajectory]:
    """K = len(seeds) episodes of one task, each validated right away (judge / verifier; human
    review leaves it pending in the review queue)."""
    out = []
    for k, seed in enumerate(seeds):
        trajectory = sample_episode(
            policy=policy, env=env, task=task, checkpoint=checkpoint, seed=seed, max_steps=max_steps,
            temperature=temperature, metadata={"job": job_id, "k": k},
        )  # fmt: skip
        try:
            trajectory = trajectory_validate_auto(trajectory=trajectory) or trajectory
        except ValidationError as exc:
            trajectory.metadata = {**trajectory.metadata, "validation_error": str(exc)[:500]}
            Trajectory.objects.filter(pk=trajectory.pk).update(metadata=trajectory.metadata)
        out.append(trajectory)
    return out
