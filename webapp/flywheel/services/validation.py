"""V(s) per trajectory (seed 000 §2.3): from the verifier reward, an LLM judge / ORM, or two agreeing
reviewers, as the pool's `validation_mode` says. Every decision records its validator and time
(`webapp.store.services.trajectory_validate`), and routes the trajectory (V=1 → SFT, V=0 → CT)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from webapp.flywheel.models import PoolValidation
from webapp.remote_calls import before_remote_call
from webapp.store import services as store
from webapp.store.models import (
    UNDECIDED_REVIEW_STATES,
    UNTRAINABLE_REVIEW_STATES,
    ReviewState,
    Trajectory,
    TrajectoryStatus,
    ValidationMode,
)

VERIFIER_VALIDATOR = "verifier"
HUMAN_VALIDATOR = "human-review"  # the name annotation.review records when two reviewers agree


class ValidationError(RuntimeError):
    """V(s) could not be decided (judge unreachable or unparseable, no judge configured)."""


@dataclass(frozen=True)
class JudgeVerdict:
    value: int
    correct_prefix: int
    raw: str


def parse_judge_reply(text: str, num_steps: int) -> JudgeVerdict:
    """V(s) and the correct prefix from a judge's answer (the one parser: workers.policy.judge);
    V=1 → every step is correct, V=0 → the judge's correct steps clipped to [0, num_steps]."""
    from workers.policy.judge import JudgeError, parse_verdict

    try:
        success, _reason, correct = parse_verdict(text, num_steps)
    except JudgeError as exc:
        raise ValidationError(str(exc)) from exc
    return JudgeVerdict(int(success), num_steps if success else (correct or 0), text)


def pool_validation(pool_id: int) -> PoolValidation:
    config, _ = PoolValidation.objects.get_or_create(pool_id=pool_id)
    return config


def pool_validation_set(
    *,
    pool_id: int,
    mode: str,
    judge_url: str = "",
    judge_model: str = "judge",
    keep_failure_prefix: bool = True,
) -> PoolValidation:
    """Choose the validator of a pool; the judge needs an http(s) URL."""
    from webapp.store.models import TaskPool

    if mode not in ValidationMode.values:
        raise ValidationError(f"unknown validator {mode!r}; expected one of {ValidationMode.values}")
    if mode == ValidationMode.JUDGE and not judge_url.startswith(("http://", "https://")):
        raise ValidationError("the judge validator needs an http(s) judge_url")
    TaskPool.objects.filter(pk=pool_id).update(validation_mode=mode)
    config = pool_validation(pool_id)
    config.judge_url, config.judge_model = judge_url, judge_model or "judge"
    config.keep_failure_prefix = keep_failure_prefix
    config.save()
    return config


def judge_trajectory(*, trajectory: Trajectory, config: PoolValidation) -> JudgeVerdict:
    """Ask the pool's judge (workers.policy.judge.LLMJudge: instruction, every thought and action, the
    last screenshots) for V(s); the verifier's reward and the status go along as notes."""
    from webapp.store.selectors import trajectory_judge_steps
    from workers.policy.judge import JudgeError, LLMJudge

    if not config.judge_url:
        raise ValidationError(f"pool {trajectory.task.pool_id} uses the judge but has no judge_url")
    try:
        judge = LLMJudge(config.judge_url, config.judge_model, timeout_s=60, max_retries=2)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc
    notes = [f"Verifier reward: {trajectory.final_reward}", f"Status: {trajectory.status}"]
    steps = trajectory_judge_steps(trajectory)
    before_remote_call("the LLM judge")  # a model call: no transaction, the connection given back
    try:
        verdict = judge.judge(trajectory.episode_instruction, steps, notes)
    except JudgeError as exc:
        raise ValidationError(f"judge at {config.judge_url} failed: {exc}") from exc
    finally:
        judge.close()
    n = trajectory.num_steps
    return JudgeVerdict(
        int(verdict.success), n if verdict.success else min(verdict.correct_steps or 0, n), verdict.raw
    )


def trajectory_validate_auto(*, trajectory: Trajectory, revalidate: bool = False) -> Trajectory | None:
    """Decide V(s) with the pool's validator. Returns None when it is not decided yet (human review
    pending: the trajectory is put in the review queue) or the trajectory is still running.

    The review state gates every validator: a trajectory waiting for its reviewers is left to them,
    one they sent back for a fix (or replaced by a fixed branch) is never validated, and one they
    rejected is V(s)=0 whatever the verifier or judge would say."""
    if trajectory.status == TrajectoryStatus.RUNNING:
        return None
    if trajectory.review_state in UNDECIDED_REVIEW_STATES:
        return None
    if trajectory.review_state in UNTRAINABLE_REVIEW_STATES:
        if trajectory.review_state != ReviewState.REJECTED:
            return None
        if trajectory.validation == 0 and not revalidate:
            return trajectory
        return store.trajectory_validate(trajectory=trajectory, value=0, validator=HUMAN_VALIDATOR)
    if trajectory.validation is not None and not revalidate:
        return trajectory
    mode = trajectory.task.pool.validation_mode
    if mode == ValidationMode.VERIFIER:
        success = trajectory.status == TrajectoryStatus.COMPLETED and (trajectory.final_reward or 0) > 0
        return store.trajectory_validate(
            trajectory=trajectory, value=int(success), validator=VERIFIER_VALIDATOR
        )
    if mode == ValidationMode.JUDGE:
        config = pool_validation(trajectory.task.pool_id)
        verdict = judge_trajectory(trajectory=trajectory, config=config)
        judged = {
            "value": verdict.value,
            "correct_prefix": verdict.correct_prefix,
            "reply": verdict.raw[:2000],
        }
        # Stored after the call, in its own short transaction; trajectory_validate reads the review
        # state from the row then (a rejection made while the judge ran still wins).
        with transaction.atomic():
            Trajectory.objects.filter(pk=trajectory.pk).update(
                metadata={**trajectory.metadata, "judge": judged}
            )
            trajectory.metadata = {**trajectory.metadata, "judge": judged}
            return store.trajectory_validate(
                trajectory=trajectory, value=verdict.value, validator=f"judge:{config.judge_model}"
            )
    # Human: two agreeing reviewers decide (annotation.review.services.review_conclude records V(s)).
    if trajectory.review_state == ReviewState.APPROVED:
        return store.trajectory_validate(trajectory=trajectory, value=1, validator=HUMAN_VALIDATOR)
    if trajectory.review_state == ReviewState.REJECTED:
        return store.trajectory_validate(trajectory=trajectory, value=0, validator=HUMAN_VALIDATOR)
    if trajectory.review_state == ReviewState.NONE:
        Trajectory.objects.filter(pk=trajectory.pk, review_state=ReviewState.NONE).update(
            review_state=ReviewState.PENDING
        )
    return None


def validate_pending(
    *, trajectory_ids: list[int] | None = None, pool_id: int | None = None
) -> dict[str, int]:
    """Validate every finished, unvalidated trajectory (optionally of some ids / one pool)."""
    qs = Trajectory.objects.filter(validation__isnull=True).exclude(status=TrajectoryStatus.RUNNING)
    if trajectory_ids is not None:
        qs = qs.filter(pk__in=trajectory_ids)
    if pool_id is not None:
        qs = qs.filter(task__pool_id=pool_id)
    counts = {"validated": 0, "v1": 0, "pending": 0, "errors": 0}
    for trajectory in _in_chunks(qs.select_related("task__pool"), 200):
        try:
            done = trajectory_validate_auto(trajectory=trajectory)  # no transaction around the judge
        except (ValidationError, store.StoreError):  # judge down, or reviewers decided meanwhile
            counts["errors"] += 1
            continue
        if done is None:
            counts["pending"] += 1
        else:
            counts["validated"] += 1
            counts["v1"] += int(done.validation == 1)
    return counts


def _in_chunks(qs: Any, size: int) -> Iterator[Trajectory]:
    """The rows of `qs`, fetched `size` at a time by primary key: no server-side cursor stays open
    across the judge's calls (which give the connection back)."""
    ids = list(qs.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), size):
        yield from list(qs.filter(pk__in=ids[start : start + size]).order_by("pk"))
