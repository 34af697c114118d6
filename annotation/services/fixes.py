"""The fix loop: an annotator answers a `needs_fix` review.

Thought edits change the trajectory in place and the trajectory re-enters review
(`fix_resubmit`: needs_fix → pending, review round + 1). A changed action cannot be patched into
the recording (everything after it was observed on the old action), so it re-executes as a branch
(`fix_branch`): a new trajectory linked to the original (`metadata.branch_of` / `branch_step`),
a fresh environment reset with the original seed, the steps before the changed one replayed and
copied, the changed action executed, and a live session the annotator continues in the workspace.
Submitting the branch puts it in review and marks the original `superseded` (`fix_supersede`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.models import AnnotationSession, SessionStatus
from annotation.review.selectors import step_screen_actions
from annotation.services.common import SessionConflict, session_abandon, session_lease
from annotation.services.decisions import DecisionInvalid, session_decide
from annotation.services.sessions import session_activate, session_open, session_reset
from webapp.fleet import services as fleet
from webapp.store import services as store
from webapp.store.models import ReviewState, Step, Trajectory, TrajectoryStatus
from webapp.timestamps import now_utc
from workers.actions.types import TERMINAL_KINDS

# Step fields a branch copies from the original for the steps before the changed one.
_COPIED_STEP_FIELDS = (
    "clock_start", "clock_end", "observation_refs", "raw_text", "thought", "action_text", "action",
    "parse_error", "coord_convention", "model_image_width", "model_image_height", "screen_width",
    "screen_height", "executed_points", "candidates", "decision", "decision_index", "decision_meta",
    "policy_version", "human_thought_verbatim", "human_thought_refined", "human_words", "reward", "done",
)  # fmt: skip


def _locked_needs_fix(trajectory_id: int) -> Trajectory:
    trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
    if trajectory.review_state != ReviewState.NEEDS_FIX:
        raise SessionConflict(f"trajectory {trajectory_id} is {trajectory.review_state}, not needs_fix")
    return trajectory


def fix_step_thought(*, trajectory_id: int, index: int, thought: str) -> Step:
    """Replace step `index`'s thought; the earlier text is kept in `decision_meta.fix_history`."""
    text = store.pg_safe(thought).strip()
    if not text:
        raise DecisionInvalid("the thought is empty")
    with transaction.atomic():
        trajectory = _locked_needs_fix(trajectory_id)
        step = Step.objects.select_for_update().filter(trajectory=trajectory, index=index).first()
        if step is None:
            raise DecisionInvalid(f"trajectory {trajectory_id} has no step {index}")
        history = list((step.decision_meta or {}).get("fix_history") or [])
        history.append({"thought": step.thought, "round": trajectory.review_round, "at": now_utc()})
        step.thought = text
        step.decision_meta = {**(step.decision_meta or {}), "fix_history": history}
        step.save(update_fields=["thought", "decision_meta"])
    return step


def fix_resubmit(*, trajectory_id: int) -> Trajectory:
    """needs_fix → pending in a new review round (the same reviewers may review it again)."""
    with transaction.atomic():
        trajectory = _locked_needs_fix(trajectory_id)
        if trajectory.status != TrajectoryStatus.COMPLETED:
            raise SessionConflict(f"trajectory {trajectory_id} is {trajectory.status}, not completed")
        trajectory.review_state = ReviewState.PENDING
        trajectory.review_round += 1
        trajectory.metadata = {
            **trajectory.metadata,
            "resubmitted": [*trajectory.metadata.get("resubmitted", []), now_utc()],
        }
        trajectory.save(update_fields=["review_state", "review_round", "metadata"])
        AnnotationSession.objects.filter(trajectory=trajectory, status=SessionStatus.NEEDS_FIX).update(
            status=SessionStatus.SUBMITTED
        )
    return trajectory


def fix_supersede(*, trajectory_id: int, branch_id: int) -> bool:
    """The submitted branch `branch_id` replaces `trajectory_id` (if it still needs a fix)."""
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().filter(pk=trajectory_id).first()
        if trajectory is None or trajectory.review_state != ReviewState.NEEDS_FIX:
            return False
        trajectory.review_state = ReviewState.SUPERSEDED
        trajectory.metadata = {**trajectory.metadata, "superseded_by": branch_id}
        trajectory.save(update_fields=["review_state", "metadata"])
        store.trajectory_unroute(trajectory_id=trajectory_id, reason=f"superseded by {branch_id}")
    return True


def fix_branch(
    *,
    trajectory_id: int,
    user: Any,
    index: int,
    action_text: str,
    thought: str = "",
    convention: str = "screen",
) -> AnnotationSession:
    """Re-execute trajectory `trajectory_id` from step `index` with a changed action, as a new
    trajectory in a new live session (see the module docstring). Raises DecisionInvalid (bad index
    or action; nothing kept), SessionConflict (not needs_fix, or the replay diverged: the branch is
    abandoned), fleet.NoEnvironmentAvailable (nothing kept)."""
    with transaction.atomic():
        original = _locked_needs_fix(trajectory_id)
    steps = list(Step.objects.filter(trajectory=original).order_by("index"))
    if not 0 <= index < len(steps):
        raise DecisionInvalid(f"step index must be in 0..{len(steps) - 1}")
    if not action_text.strip():
        raise DecisionInvalid("the changed action is empty")
    seed = original.metadata.get("seed")
    metadata = {
        "track": original.metadata.get("track", "expert"),
        "seed": seed,
        "branch_of": original.pk,
        "branch_step": index,
    }
    session = session_open(user=user, task=original.task, track=metadata["track"], metadata=metadata)
    out = session_reset(session=session, seed=int(seed) if seed is not None else 0)
    try:
        wire_obs = _replay_prefix(session, steps[:index], out["observation"])
    except (SessionConflict, fleet.EnvCallFailed) as exc:
        session_abandon(session=session, reason=f"the replay of trajectory {original.pk} diverged: {exc}")
        raise SessionConflict(f"could not re-create the state before step {index}: {exc}") from exc
    with transaction.atomic():
        session_activate(session=session, wire_obs=wire_obs)
    session.refresh_from_db()
    try:
        result = session_decide(
            session_id=session.pk, user=user, kind="override",
            data={"obs_version": session.obs_version, "thought": thought or steps[index].thought,
                  "action_text": action_text, "convention": convention},
        )  # fmt: skip
    except DecisionInvalid:
        session_abandon(
            session=AnnotationSession.objects.get(pk=session.pk), reason="the changed action was refused"
        )
        raise
    step = Step.objects.get(trajectory_id=session.trajectory_id, index=result["step"])
    step.decision_meta = {**step.decision_meta, "fix_of": {"trajectory": original.pk, "step": index}}
    step.save(update_fields=["decision_meta"])
    return AnnotationSession.objects.select_related("task__pool", "trajectory").get(pk=session.pk)


def _replay_prefix(session: AnnotationSession, steps: list[Step], wire_obs: dict[str, Any]) -> dict[str, Any]:
    """Execute `steps`' actions again on the session's fresh environment and copy the step rows to
    the branch (their screenshots are the same stored files). Returns the observation after them."""
    lease = session_lease(session)
    for step in steps:
        for action in step_screen_actions(step):
            if action["kind"] in TERMINAL_KINDS:
                raise SessionConflict(f"step {step.index} ended the episode")
            result = fleet.env_call(lease=lease, op="step", payload={"action": action})
            wire_obs = result["observation"]
            if result.get("done") and step is not steps[-1]:
                raise SessionConflict(f"the environment ended the episode at step {step.index}")
        fields = {name: getattr(step, name) for name in _COPIED_STEP_FIELDS}
        fields["decision_meta"] = {**(step.decision_meta or {}), "copied_from": step.pk}
        store.step_append(
            trajectory=session.trajectory,
            screenshot_name=step.screenshot.name if step.screenshot else "",
            fields={**fields, "index": step.index},
        )
    return wire_obs
