"""Writes to the store. Media is written to storage before its row; a failed row write removes it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.expressions import RawSQL
from django.utils import timezone

from webapp.store.models import (
    UNTRAINABLE_REVIEW_STATES,
    Checkpoint,
    DecisionKind,
    Route,
    Step,
    Task,
    Trajectory,
    TrajectorySource,
    TrajectoryStatus,
)


def pg_safe(value: Any) -> Any:
    """`value` with every NUL character replaced by U+FFFD, through dicts, lists and tuples.

    PostgreSQL text and JSONB cannot hold NUL, and model output can contain it (a byte-level model
    samples any byte): without this one such candidate would fail the whole write."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {pg_safe(k): pg_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [pg_safe(v) for v in value]
    return value


class StoreError(ValueError):
    """A write to the store was refused; the message says why."""


# ---------------------------------------------------------------- tasks


def task_difficulty_score(*, steps: int, cross_page: bool, prerequisites: int, exceptions: bool) -> float:
    """Seed 000 §2.4.1 rubric folded into 0..1: more steps, cross-page work, prerequisites and
    exception handling each make a task harder. Steps saturate at 30 (the RL step cap)."""
    score = 0.4 * min(max(steps, 0), 30) / 30
    score += 0.2 * (1.0 if cross_page else 0.0)
    score += 0.2 * min(max(prerequisites, 0), 5) / 5
    score += 0.2 * (1.0 if exceptions else 0.0)
    return round(score, 4)


def task_rescore(*, task: Task) -> Task:
    task.difficulty = task_difficulty_score(
        steps=task.difficulty_steps,
        cross_page=task.difficulty_cross_page,
        prerequisites=task.difficulty_prerequisites,
        exceptions=task.difficulty_exceptions,
    )
    task.save(update_fields=["difficulty", "updated_at"])
    return task


def task_record_outcome(*, task_id: int, success: bool) -> None:
    """Update the running success statistics atomically (no read-modify-write race)."""
    Task.objects.filter(pk=task_id).update(
        attempts=F("attempts") + 1, successes=F("successes") + (1 if success else 0)
    )
    Task.objects.filter(pk=task_id, attempts__gt=0).update(success_rate=F("successes") * 1.0 / F("attempts"))


def task_disable(*, task_id: int, reason: str) -> bool:
    """Disable a task and mark it unsupported with `reason` (once: a reason already recorded is not
    added again). Returns whether the task was enabled before."""
    task = Task.objects.select_for_update().filter(pk=task_id).first()
    if task is None:
        return False
    was_enabled = task.enabled
    task.enabled = False
    task.supported = False
    if reason not in task.unsupported_reasons:
        task.unsupported_reasons = [*task.unsupported_reasons, reason]
    task.updated_at = timezone.now()
    task.save(update_fields=["enabled", "supported", "unsupported_reasons", "updated_at"])
    return was_enabled


def _no_action_pass_found(trajectory: Trajectory, final_reward: float) -> None:
    """An OSWorld task whose episode scored > 0 with no action passes without action: whatever the
    no-action check said at import, it is disabled with the reason (issue 33)."""
    if trajectory.num_steps != 0 or final_reward <= 0:
        return
    if not Task.objects.filter(pk=trajectory.task_id, source="osworld").exists():
        return
    with transaction.atomic():
        task_disable(
            task_id=trajectory.task_id,
            reason=f"passes without action: scored {final_reward:g} with no action (trajectory {trajectory.pk})",
        )


# ---------------------------------------------------------------- trajectories and steps


def trajectory_create(
    *,
    task: Task,
    source: str,
    annotator: Any = None,
    run_id: int | None = None,
    checkpoint: Checkpoint | None = None,
    policy_version: str = "",
    metadata: dict[str, Any] | None = None,
    instruction: str = "",
) -> Trajectory:
    if source not in TrajectorySource.values:
        raise StoreError(f"unknown trajectory source {source!r}; expected one of {TrajectorySource.values}")
    return Trajectory.objects.create(
        task=task,
        env_kind=task.env_kind,
        source=source,
        annotator=annotator,
        run_id=run_id,
        checkpoint=checkpoint,
        policy_version=policy_version or (checkpoint.version if checkpoint else ""),
        metadata=metadata or {},
        instruction=pg_safe(instruction),
    )


def trajectory_set_instruction(*, trajectory: Trajectory, instruction: str) -> Trajectory:
    """Record the episode's instruction as the environment gave it at reset, once (a later
    observation never rewrites it). Empty input keeps the task's instruction as the fallback."""
    text = pg_safe(str(instruction or "")).strip()
    if text and not trajectory.instruction:
        Trajectory.objects.filter(pk=trajectory.pk, instruction="").update(instruction=text)
        trajectory.instruction = text
    return trajectory


def trajectory_record_episode(
    *, trajectory: Trajectory, task_spec: dict[str, Any], seed: int, env: dict[str, Any] | None = None
) -> Trajectory:
    """Record what re-creates the episode, as the environment was reset: `metadata.seed` and
    `metadata.episode` {task (the task on the wire), env_kind, seed, env}; `env` is the env host's
    answer to the reset ({kind, version, start}: workers.envs.episode). Merged into the metadata in
    one UPDATE, so keys others wrote (the engine's, the session's) stay."""
    episode = pg_safe(
        {"task": task_spec, "env_kind": task_spec.get("kind", ""), "seed": int(seed),
         **({"env": env} if isinstance(env, dict) else {})}
    )  # fmt: skip
    added = {"seed": int(seed), "episode": episode}
    Trajectory.objects.filter(pk=trajectory.pk).update(
        metadata=RawSQL("COALESCE(metadata, '{}'::jsonb) || %s::jsonb", (json.dumps(added),))
    )
    meta = {**(trajectory.metadata or {}), **added}
    trajectory.metadata = meta
    return trajectory


def trajectory_last_step_outcome(*, trajectory: Trajectory, reward: float) -> int:
    """Mark the episode's last step as its end: `done` true and the episode's reward (the steps before
    keep reward 0, done false). Returns the rows changed (0 for a trajectory without steps)."""
    last = trajectory.steps.order_by("-index").values_list("pk", flat=True).first()
    if last is None:
        return 0
    return Step.objects.filter(pk=last).update(done=True, reward=float(reward))


def _screenshot_name(trajectory_id: int, index: int, image_format: str) -> str:
    ext = "png" if image_format == "png" else "jpg"
    return f"screenshots/t{trajectory_id}/{index:05d}-{uuid.uuid4().hex[:8]}.{ext}"


def step_append(
    *,
    trajectory: Trajectory,
    screenshot: bytes | None = None,
    image_format: str = "jpeg",
    screenshot_name: str = "",
    fields: dict[str, Any],
) -> Step:
    """Append the next step. The screenshot is stored first; if the row cannot be written the file is
    deleted again, so a failure leaves neither a half row nor an orphan file.

    `fields` are Step model fields (thought, action_text, action, candidates, decision, ...); `index`
    defaults to the next free index. `screenshot_name` references a file already in storage (e.g. the
    observation an annotation session stored when it became current) instead of writing bytes.
    """
    unknown = set(fields) - {f.name for f in Step._meta.get_fields()}
    if unknown:
        raise StoreError(f"unknown step fields: {sorted(unknown)}")
    if "decision" in fields and fields["decision"] not in DecisionKind.values:
        raise StoreError(f"unknown decision {fields['decision']!r}; expected one of {DecisionKind.values}")
    fields = {name: pg_safe(v) for name, v in fields.items()}
    index = fields.pop("index", None)
    if index is None:
        index = trajectory.num_steps
    saved_name = ""
    if screenshot_name:
        if screenshot:
            raise StoreError("give screenshot bytes or a stored screenshot name, not both")
        if not default_storage.exists(screenshot_name):
            raise StoreError(f"no stored file {screenshot_name!r}")
    if screenshot:
        saved_name = default_storage.save(
            _screenshot_name(trajectory.pk, index, image_format), ContentFile(screenshot)
        )
    try:
        with transaction.atomic():
            step = Step.objects.create(
                trajectory=trajectory, index=index, screenshot=saved_name or screenshot_name, **fields
            )
            Trajectory.objects.filter(pk=trajectory.pk, num_steps__lte=index).update(num_steps=index + 1)
    except IntegrityError as exc:
        if saved_name:
            default_storage.delete(saved_name)
        raise StoreError(f"step {index} of trajectory {trajectory.pk} could not be written: {exc}") from exc
    except BaseException:
        if saved_name:
            default_storage.delete(saved_name)
        raise
    trajectory.num_steps = max(trajectory.num_steps, index + 1)
    return step


def trajectory_finish(
    *,
    trajectory: Trajectory,
    status: str,
    final_reward: float | None,
    success: bool | None = None,
    final_screenshot: bytes | None = None,
    image_format: str = "jpeg",
    final_screenshot_name: str = "",
) -> Trajectory:
    """Close a trajectory once; the task's success statistics count it exactly once.

    `final_screenshot` (bytes) or `final_screenshot_name` (a file already in storage) is the screen
    after the last action; it is kept only if this call closed the trajectory."""
    if status == TrajectoryStatus.RUNNING:
        raise StoreError("a trajectory cannot be finished as 'running'")
    saved = ""
    if final_screenshot:
        saved = default_storage.save(
            _screenshot_name(trajectory.pk, trajectory.num_steps, image_format), ContentFile(final_screenshot)
        )
    changed = Trajectory.objects.filter(pk=trajectory.pk, status=TrajectoryStatus.RUNNING).update(
        status=status,
        final_reward=final_reward,
        finished_at=timezone.now(),
        final_screenshot=saved or final_screenshot_name,
    )
    if changed != 1 and saved:
        default_storage.delete(saved)
    trajectory.refresh_from_db()
    if changed == 1 and status == TrajectoryStatus.COMPLETED and final_reward is not None:
        task_record_outcome(
            task_id=trajectory.task_id, success=bool(success if success is not None else final_reward > 0)
        )
        _no_action_pass_found(trajectory, final_reward)
    return trajectory


def trajectory_validate(*, trajectory: Trajectory, value: int, validator: str) -> Trajectory:
    """Record V(s) ∈ {0, 1}, who decided it, and route the trajectory (V=1 → SFT, V=0 → CT).

    Refused (StoreError) for V=1 when reviewers rejected the trajectory or asked for a fix: such a
    trajectory never becomes SFT data. The state is read from the row, not the caller's copy."""
    if value not in (0, 1):
        raise StoreError(f"V(s) must be 0 or 1, got {value!r}")
    state = Trajectory.objects.filter(pk=trajectory.pk).values_list("review_state", flat=True).first()
    if value == 1 and state in UNTRAINABLE_REVIEW_STATES:
        raise StoreError(f"trajectory {trajectory.pk} is {state} in review: it cannot be validated V(s)=1")
    trajectory.validation = value
    trajectory.validator = validator
    trajectory.validated_at = timezone.now()
    trajectory.route = "sft" if value == 1 else "ct"
    trajectory.save(update_fields=["validation", "validator", "validated_at", "route"])
    return trajectory


def trajectory_unroute(*, trajectory_id: int, reason: str) -> int:
    """Clear V(s) and the route of a trajectory the reviewers sent back (needs fix, superseded):
    a validation recorded before the review (e.g. by the verifier) must not keep it in SFT data."""
    return (
        Trajectory.objects.filter(pk=trajectory_id)
        .exclude(validation__isnull=True, route=Route.NONE)
        .update(
            validation=None,
            validator=f"cleared: {reason}"[:100],
            validated_at=timezone.now(),
            route=Route.NONE,
        )
    )
