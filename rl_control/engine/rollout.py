"""One rollout: a claimed slot of a group played to the end on a leased environment.

Every policy call samples one response from a policy server (OpenAIPolicy with
`return_tokens_as_token_ids`, so the exact sampled token ids and their log-probs come back) and
records, on its `Step` row, the policy version that produced it (`Step.policy_version`, and
`Step.rl` = {version, token_ids, logprobs, elements}); the screenshot is stored with the step so the
trainer can rebuild the prompt exactly. The episode ends at a terminal action, when the environment
says done, or at the group's step limit; then the verifier scores it and the shaped reward
(workers.rl.rewards.total_reward) is stored in the trajectory's metadata.

A crashed environment fails only its own trajectory (status crashed, excluded from training); a
policy-server error fails it too (status failed). A task fenced off (its slot was reclaimed) stops
without touching the trajectory, which the reclaimer has already closed.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from rl_control.engine import judging
from rl_control.engine.data import Claim, pool_push
from rl_control.engine.keys import key, rds, version_of
from rl_control.engine.serving import external_urls, root_of, serving_key
from rl_control.models import RolloutGroup, Run
from rl_control.services import state
from webapp.fleet import services as fleet
from webapp.store import services as store
from webapp.store.models import Trajectory, TrajectoryStatus
from webapp.store.taskspec import task_spec_wire
from workers.actions.coords import OFF_SCREEN_PREFIX, action_to_screen, off_screen_error
from workers.actions.types import TERMINAL_KINDS, Action
from workers.envs.base import Observation
from workers.envs.wire import observation_from_wire
from workers.policy.base import HistoryItem, PolicyError
from workers.policy.openai_client import EMBEDDED, ModelProfile, OpenAIPolicy
from workers.rl.config import RewardConfig
from workers.rl.rewards import total_reward


class Fenced(RuntimeError):
    """This task no longer owns its slot (it was reclaimed); stop without writing anything more."""


@dataclass
class EpisodeResult:
    status: str
    reward: float | None
    steps: int
    busy_s: float


def run_profile(run: Run) -> ModelProfile:
    """How the run's rollouts prompt its policy, by the start checkpoint's kind: the embedded layout,
    or for an HF vision-language checkpoint the UI-TARS template with the last
    `env.context_screenshots` screenshots and token ids back (workers.policy.hf_vlm.profile_for).
    The trainer rebuilds prompts with the same profile (samples.trajectory_sample)."""
    from rl_control.engine.control import start_dir
    from workers.policy.hf_vlm import checkpoint_kind, profile_for

    directory = start_dir(run)
    if checkpoint_kind(directory) != "hf_vlm":
        return EMBEDDED
    vlm = run.config.get("vlm") or {}
    return profile_for(
        directory,
        max_tokens=int(vlm.get("max_tokens", 64)),
        max_screenshots=int(run.config["env"]["context_screenshots"]),
    )


def policy_for(base_url: str, run_id: int, profile: ModelProfile = EMBEDDED) -> OpenAIPolicy:
    """The run's client of `base_url`, with that server's key (`serving_key`)."""
    key = serving_key(run_id, base_url)
    return OpenAIPolicy(
        base_url=root_of(base_url), model=f"run{run_id}", profile=profile, api_key=key or None
    )


def episode_seed(config: dict[str, Any], group_ordinal: int, rollout_index: int) -> int:
    """The environment seed of a rollout: one per group when `env.shared_group_seed` (the group's
    rollouts start from the same task instance), else one per rollout. Keyed by the group's place
    among the run's groups (`group_ordinal`, 0 for its first) and the rollout's index in its group,
    not by database ids, so two runs of the same seed play the same task instances in the same
    order, whatever else the database holds (an async run and its sync baseline meet the same
    episodes: `bench rollout`)."""
    shared = bool(config.get("env", {}).get("shared_group_seed", True))
    unit = f"g{group_ordinal}" if shared else f"g{group_ordinal}:{rollout_index}"
    return random.Random(f"{config.get('seed', 0)}:{unit}").randrange(2**31)


def group_ordinal(group: RolloutGroup) -> int:
    """The group's place among its run's groups (0 for the first): groups are opened one at a time
    under the run's engine-state lock (data.rollout_claim), so this is the order they were opened in."""
    return RolloutGroup.objects.filter(run_id=group.run_id, pk__lt=group.pk).count()


def screen_action(action: Action, candidate: Any, obs: Observation) -> tuple[Action | None, str]:
    """The policy's action in screen pixels, or (None, why) when a point lies outside the screen:
    such an action is refused (the step records the error, nothing runs), never clamped onto the
    edge, so no step trains on a click the model did not mean."""
    mapped = action_to_screen(
        action, candidate.convention, obs.width, obs.height, *(candidate.image_size or (None, None))
    )
    if mapped.clamped:
        return None, off_screen_error(action, candidate.convention, obs.width, obs.height)
    return mapped.action, ""


def run_episode(
    *,
    run: Run,
    claim: Claim,
    lease: Any,
    policy: OpenAIPolicy,
    beat: Any,
    current_version: int,
) -> EpisodeResult:
    """Play `claim` on the leased env. `beat()` renews the slot heartbeat and returns False once the
    slot was reclaimed (then `Fenced` is raised). Raises fleet.LeaseLost when the env crashed (the
    trajectory is closed as crashed first)."""
    started = time.perf_counter()
    trajectory = claim.trajectory
    parse_oks: list[bool] = []  # per step: the response parsed and every action ran
    actions_done: list[str] = []
    try:
        reward, last_screen, judged = _play(
            run, claim, lease, policy, beat, current_version, parse_oks, actions_done
        )
    except fleet.LeaseLost as exc:
        _close(trajectory, TrajectoryStatus.CRASHED, None, {"error": f"the environment was lost: {exc}"})
        raise
    except (PolicyError, fleet.EnvCallFailed, judging.JudgeFailed) as exc:
        _close(trajectory, TrajectoryStatus.FAILED, None, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        return EpisodeResult(TrajectoryStatus.FAILED, None, len(parse_oks), time.perf_counter() - started)
    _complete(run, claim, reward, judged, actions_done, parse_oks, last_screen)
    return EpisodeResult(TrajectoryStatus.COMPLETED, reward, len(parse_oks), time.perf_counter() - started)


def _play(
    run: Run, claim: Claim, lease: Any, policy: OpenAIPolicy, beat: Any, current_version: int,
    parse_oks: list[bool], actions_done: list[str],
) -> tuple[float, Observation, dict[str, Any] | None]:  # fmt: skip
    """Reset the env, then one sampled response per step up to the group's step limit, each stored;
    returns the reward (the judge's verdict where it scores the task), the final screen and that
    verdict. `parse_oks` and `actions_done` fill as the episode goes, also when it fails."""
    trajectory, group = claim.trajectory, claim.group
    algo = run.config.get(run.algorithm) or {}
    temperature = float(algo.get("temperature", 1.0))
    thought_temperature = algo.get("thought_temperature")  # None: the thought is sampled at `temperature`
    context = int(run.config["env"]["context_screenshots"])
    seed = episode_seed(run.config, group_ordinal(group), claim.slot)
    wire = task_spec_wire(group.task)
    out = fleet.env_call(lease=lease, op="reset", payload={"task": wire, "seed": seed})
    store.trajectory_record_episode(trajectory=trajectory, task_spec=wire, seed=seed, env=out.get("env"))
    obs = observation_from_wire(out["observation"])
    store.trajectory_set_instruction(trajectory=trajectory, instruction=obs.instruction)
    history: list[HistoryItem] = []
    last_screen = obs
    for index in range(group.step_limit):
        if not beat():
            raise Fenced(f"trajectory {trajectory.pk}: slot reclaimed")
        candidate = policy.propose(
            obs, history, None, n=1, temperature=temperature, thought_temperature=thought_temperature
        )[0]
        version = _sample_version(run, candidate.model_version, current_version)
        step = _act(candidate, obs, lease)
        last_screen = step.next_obs if step.next_obs is not None else obs
        _store_step(trajectory, index, obs, candidate, version, step)
        parse_oks.append(step.parsed_ok)
        actions_done.append(candidate.action_text.strip())
        history.append(
            HistoryItem(thought=candidate.thought, action=candidate.action_text,
                        screenshot=obs.screenshot if context > 1 else None, image_format=obs.image_format)
        )  # fmt: skip
        if step.terminal or step.done:
            break
        obs = (
            step.next_obs
            if step.next_obs is not None
            else observation_from_wire(fleet.env_call(lease=lease, op="observe")["observation"])
        )
    reward = float(fleet.env_call(lease=lease, op="evaluate")["reward"])
    judged = _judge(run, trajectory, group.task, last_screen.screenshot, reward)
    return (judged["reward"] if judged else reward), last_screen, judged


def _sample_version(run: Run, served_by: str, current_version: int) -> int:
    """The run version that made a sample, from the server's label; an external server (vLLM) names
    none and counts as the current version, the run's own server must name one of this run's."""
    version = version_of(run.pk, served_by)
    if version is not None:
        return version
    if not external_urls(run):
        raise PolicyError(
            f"the policy server answered as {served_by[:100]!r}, not a version "
            f"of run {run.pk}: refusing a sample another run's weights made"
        )
    return current_version


@dataclass
class _Acted:
    """What executing one response did: the actions that ran (the model's convention; a terminal one
    included) and the screen points they touched, the observation after them (None when none ran),
    why the env refused one, a terminal action, the env's episode end."""

    parsed_ok: bool
    ran: list[Action] = field(default_factory=list)
    points: list[list[float]] = field(default_factory=list)  # screen pixels the executed actions touched
    next_obs: Observation | None = None
    env_error: str = ""
    terminal: bool = False
    done: bool = False


def _act(candidate: Any, obs: Observation, lease: Any) -> _Acted:
    """Run the candidate's actions on the leased env in screen coordinates, up to a terminal action
    (sent too: an OSWorld task is scored from the last action, FAIL / DONE, as DesktopEnv.step
    records them), a refused one or the end of the episode."""
    acted = _Acted(parsed_ok=candidate.parsed.error is None and bool(candidate.parsed.actions))
    if not acted.parsed_ok:
        return acted
    for action in candidate.parsed.actions:
        acted.terminal = action.kind in TERMINAL_KINDS
        screen, refusal = screen_action(action, candidate, obs)
        if screen is None:  # never execute (and train on) a corner the model did not mean
            acted.env_error, acted.parsed_ok = refusal, False
            break
        try:
            result = fleet.env_call(lease=lease, op="step", payload={"action": screen.to_json()})
        except fleet.EnvCallFailed as exc:  # the env refused the action: a policy mistake
            acted.env_error, acted.parsed_ok = str(exc)[:500], False
            break
        acted.ran.append(action)
        acted.points += [[p.x, p.y] for p in (screen.point, screen.end_point) if p is not None]
        acted.done = bool(result.get("done"))
        acted.next_obs = observation_from_wire(result["observation"])
        if acted.done or acted.terminal:
            break
    return acted


def _complete(
    run: Run, claim: Claim, reward: float, judged: dict[str, Any] | None, actions_done: list[str],
    parse_oks: list[bool], last_screen: Observation,
) -> None:  # fmt: skip
    """Close the trajectory as completed with its reward breakdown; the first close pushes it to the
    run's pool and counts it in the rollout accounting."""
    trajectory, group = claim.trajectory, claim.group
    breakdown = total_reward(
        reward, actions_done, parse_oks, RewardConfig.model_validate(run.config["reward"])
    )
    success = reward >= float(run.config["curation"]["success_min_reward"])
    closed = _close(
        trajectory, TrajectoryStatus.COMPLETED, reward,
        {"reward": breakdown.to_dict(), "success": success, "steps": len(parse_oks),
         **({"judge": judged} if judged else {})},
        success=success, final_screen=last_screen,
    )  # fmt: skip
    if closed:
        pool_push(run_id=run.pk, trajectory_id=trajectory.pk, group_id=group.pk)
        pipe = rds().pipeline()
        pipe.hincrby(key(run.pk, "acct"), "episodes", 1)
        pipe.hincrby(key(run.pk, "acct"), "actions", len(parse_oks))
        pipe.execute()
        state.run_episode_done(run_id=run.pk)


def _judge(
    run: Run, trajectory: Trajectory, task: Any, final_screen: bytes, env_reward: float
) -> dict[str, Any] | None:
    """The run's LLM judge's verdict when it scores this task (rl_control.engine.judging), else None.
    `final_screen` is the screen after the episode's last action."""
    if not judging.judge_applies(run.config, task):
        return None
    return judging.judge_episode(
        config=run.config, trajectory=trajectory, task=task, final_screen=final_screen, env_reward=env_reward
    )


def _text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; a sampled response may (the token ids keep the exact sample)."""
    return value.replace("\x00", "\ufffd")


def _store_step(
    trajectory: Trajectory,
    index: int,
    obs: Observation,
    candidate: Any,
    version: int,
    acted: _Acted,
) -> None:
    """One RL step as every trajectory stores it: `action` the actions that ran, in the model's
    coordinate convention (a terminal `finished` / `call_user` included; a refused one and those after
    it left out, as in annotation steps: replaying `action` re-creates the episode; the whole response
    stays in `raw_text`), `executed_points` the screen pixels that ran, `done` when the episode
    ended here (the final reward lands on the last step at close), the sample's tokens under `rl`."""
    env_error = acted.env_error
    width, height = candidate.image_size or (None, None)
    store.step_append(
        trajectory=trajectory,
        screenshot=obs.screenshot,
        image_format=obs.image_format,
        fields={
            "index": index,
            "raw_text": _text(candidate.raw_text),
            "thought": _text(candidate.thought),
            "action_text": _text(candidate.action_text),
            "action": [a.to_json() for a in acted.ran],
            "executed_points": acted.points,
            "done": acted.terminal or acted.done,
            "parse_error": _text(candidate.parsed.error.message if candidate.parsed.error else env_error),
            "coord_convention": str(candidate.convention),
            "model_image_width": width,
            "model_image_height": height,
            "screen_width": obs.width,
            "screen_height": obs.height,
            "policy_version": str(version),
            "rl": {
                "off_screen": env_error.startswith(OFF_SCREEN_PREFIX),
                "version": version,
                "served_by": _text(candidate.model_version or "")[:200],  # the server's label: run<id>-v<n>
                "token_ids": list(candidate.token_ids or []),
                "logprobs": list(candidate.token_logprobs or []),
                "value": candidate.value,
                "instruction": obs.instruction,
                "elements": [
                    {
                        "index": e.index,
                        "tag": e.tag,
                        "text": e.text,
                        "x": e.x,
                        "y": e.y,
                        "width": e.width,
                        "height": e.height,
                    }
                    for e in obs.elements
                ],
            },
        },
    )


def _close(
    trajectory: Trajectory,
    status: str,
    reward: float | None,
    engine: dict[str, Any],
    success: bool | None = None,
    final_screen: Observation | None = None,
) -> bool:
    """Finish the trajectory once (False if it was already closed, e.g. by a reclaimer);
    `final_screen` is the observation after the last action."""
    with transaction.atomic():
        store.trajectory_finish(
            trajectory=trajectory, status=status, final_reward=reward, success=success,
            final_screenshot=final_screen.screenshot if final_screen is not None else None,
            image_format=final_screen.image_format if final_screen is not None else "jpeg",
        )  # fmt: skip
        if trajectory.status != status or (
            status == TrajectoryStatus.COMPLETED and trajectory.final_reward != reward
        ):
            return False
        store.trajectory_last_step_outcome(trajectory=trajectory, reward=reward or 0.0)
        steps = trajectory.steps.values_list("policy_version", flat=True)
        versions = [int(v) for v in steps if v.isdigit()]
        meta = dict(trajectory.metadata)
        meta["engine"] = {**meta.get("engine", {}), **engine,
                          "min_version": min(versions) if versions else None,
                          "max_version": max(versions) if versions else None}  # fmt: skip
        Trajectory.objects.filter(pk=trajectory.pk).update(metadata=meta)
        trajectory.metadata = meta
    return True
