"""Shared OpenAPI pieces of the annotation endpoints (drf-spectacular)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

# Every error answer of these endpoints is {"detail": "why"}.
DetailSerializer = inline_serializer("Detail", {"detail": serializers.CharField()})
# 400 and 403 (DRF's field errors or {"detail"}) are added to every operation by webapp.openapi.
DETAIL_RESPONSES = {
    404: OpenApiResponse(DetailSerializer, description="No such object among yours."),
    409: OpenApiResponse(DetailSerializer, description="Not allowed in the current state."),
}


class SessionResult(serializers.Serializer):
    final_reward = serializers.FloatField(allow_null=True, help_text="The verifier's score, as stored.")
    success = serializers.BooleanField(allow_null=True)
    status = serializers.CharField()
    review_state = serializers.CharField()


class SessionState(serializers.Serializer):
    """What the workspace draws (docs/annotation.md "State")."""

    id = serializers.IntegerField()
    status = serializers.CharField()
    error = serializers.CharField(allow_blank=True)
    task = serializers.DictField(help_text="{id, external_id, instruction (the episode's), env_kind, pool}")
    trajectory_id = serializers.IntegerField(allow_null=True)
    result = SessionResult(allow_null=True, help_text="Null while the session runs.")
    review_state = serializers.CharField(allow_null=True)
    branch_of = serializers.IntegerField(allow_null=True)
    track = serializers.CharField()
    policy = serializers.DictField()
    observation = serializers.DictField()
    candidates = serializers.DictField(
        help_text="{obs_version, status, items: [{index, number, ...}], error}"
    )
    steps = serializers.ListField(
        child=serializers.DictField(), help_text="[{index, number, decision_number, ...}]"
    )


SESSION_RESPONSES = {200: SessionState, **DETAIL_RESPONSES}
SESSION_CREATED_RESPONSES = {201: SessionState, **DETAIL_RESPONSES}


# ---------- responses of the annotation, fix, assignment, review and think-aloud endpoints ----------
# What each endpoint answers (docs/annotation.md describes the meaning); nested rows that the pages
# read whole (a step's candidates, a review's verdicts) are objects with their keys in the help.


class SessionRow(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    task = serializers.CharField(help_text="The task's external id.")
    pool = serializers.CharField()
    steps = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class DecideResult(serializers.Serializer):
    step = serializers.IntegerField(help_text="The stored step's 0-based index.")
    done = serializers.BooleanField(
        help_text="The episode ended (the environment said so, or a terminal action)."
    )
    reward = serializers.FloatField(allow_null=True)
    disk_full = serializers.CharField(
        required=False, help_text="Present when the session's home is full: what to tell the annotator."
    )
    state = SessionState()


class Heartbeat(serializers.Serializer):
    lease = serializers.CharField(help_text="active, or why the environment is no longer held.")


class VncGrant(serializers.Serializer):
    url = serializers.CharField(help_text="ws(s) URL of the VNC proxy with the token.")
    token = serializers.CharField()
    read_only = serializers.BooleanField()
    expires_in_s = serializers.IntegerField()


class TakeoverStarted(serializers.Serializer):
    recording_frames = serializers.BooleanField(
        help_text="The screen before each hand-made action is recorded."
    )


class TakeoverEnded(serializers.Serializer):
    steps = serializers.ListField(
        child=serializers.IntegerField(), help_text="Indexes of the take-over steps stored."
    )
    actions = serializers.IntegerField()
    state = SessionState()


class AssignmentsCreated(serializers.Serializer):
    created = serializers.IntegerField()
    existing = serializers.IntegerField()
    annotators = serializers.IntegerField()
    tasks = serializers.IntegerField()


class WorkloadRow(serializers.Serializer):
    username = serializers.CharField()
    assignments = serializers.DictField(
        child=serializers.IntegerField(), help_text="Count per assignment status."
    )
    active_sessions = serializers.ListField(
        child=serializers.DictField(),
        help_text="[{session, task, task_external_id, instruction, steps, started_at, updated_at}]",
    )


class FixRow(serializers.Serializer):
    trajectory_id = serializers.IntegerField()
    task = serializers.CharField()
    instruction = serializers.CharField()
    pool = serializers.CharField()
    review_state = serializers.CharField()
    review_round = serializers.IntegerField()
    flagged_steps = serializers.ListField(child=serializers.IntegerField())
    decided_at = serializers.CharField(allow_null=True)


class FixComment(serializers.Serializer):
    reviewer = serializers.CharField()
    verdict = serializers.CharField(allow_null=True)
    comment = serializers.CharField(allow_blank=True)
    action_text = serializers.CharField(
        allow_blank=True, help_text="The reviewer's suggested action, if any."
    )


class FixStep(serializers.Serializer):
    index = serializers.IntegerField()
    number = serializers.IntegerField(help_text="1-based, as the pages show it.")
    thought = serializers.CharField(allow_blank=True)
    action_text = serializers.CharField(allow_blank=True)
    screen_actions = serializers.ListField(child=serializers.DictField())
    screenshot_url = serializers.CharField(allow_blank=True)
    screen_width = serializers.IntegerField(allow_null=True)
    screen_height = serializers.IntegerField(allow_null=True)
    decision = serializers.CharField(allow_blank=True)
    decision_index = serializers.IntegerField(allow_null=True)
    decision_number = serializers.IntegerField(allow_null=True)
    edited = serializers.BooleanField()
    comments = FixComment(many=True)


class FixView(serializers.Serializer):
    trajectory = serializers.DictField(
        help_text="{id, review_state, review_round, instruction, final_reward, status, seed, branch_of, "
        "branch_step, superseded_by}"
    )
    task = serializers.DictField(help_text="{id, external_id, env_kind, pool}")
    reviews = serializers.ListField(child=serializers.DictField(), help_text="[{reviewer, verdict, comment}]")
    steps = FixStep(many=True)
    flagged_steps = serializers.ListField(child=serializers.IntegerField())


class FixStepOut(serializers.Serializer):
    step = FixStep()


class FixResubmitted(serializers.Serializer):
    trajectory_id = serializers.IntegerField()
    review_state = serializers.CharField()
    review_round = serializers.IntegerField()


class ReviewQueueRow(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField()
    instruction = serializers.CharField(allow_blank=True)
    pool = serializers.CharField()
    env_kind = serializers.CharField()
    source = serializers.CharField()
    num_steps = serializers.IntegerField()
    final_reward = serializers.FloatField(allow_null=True)
    review_state = serializers.CharField()
    reviews = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class ReviewMineRow(serializers.Serializer):
    review_id = serializers.IntegerField()
    trajectory_id = serializers.IntegerField()
    task = serializers.CharField()
    verdict = serializers.CharField(allow_blank=True)
    submitted = serializers.BooleanField()
    completed_at = serializers.DateTimeField(allow_null=True)
    review_state = serializers.CharField()


class ReviewQueue(serializers.Serializer):
    reviews_required = serializers.IntegerField()
    count = serializers.IntegerField()
    queue = ReviewQueueRow(many=True)
    mine = ReviewMineRow(many=True)


class ReviewTaken(serializers.Serializer):
    review_id = serializers.IntegerField()
    trajectory_id = serializers.IntegerField()


class ReviewData(serializers.Serializer):
    """What the review screen shows (annotation/review/selectors.py `review_view_data`)."""

    trajectory = serializers.DictField(
        help_text="{id, source, status, review_state, review_round, instruction, branch_of, branch_step, "
        "final_reward, validation, validator, num_steps, annotator, policy_version, created_at, finished_at, seed}"
    )
    task = serializers.DictField(help_text="{id, external_id, instruction, task_instruction, env_kind, pool}")
    steps = serializers.ListField(
        child=serializers.DictField(),
        help_text="[{index, number, thought, action_text, screen_actions, screenshot_url, decision, "
        "decision_index, decision_number, candidates, reward, done, human_thought, ...}]",
    )
    reviews_required = serializers.IntegerField()
    reviews_done = serializers.IntegerField()
    my_review = serializers.DictField(
        allow_null=True, help_text="{id, reviewer, round, verdict, comment, step_verdicts, completed_at}"
    )
    other_reviews = serializers.ListField(
        child=serializers.DictField(), help_text="Hidden until yours is in."
    )
    earlier_rounds = serializers.ListField(child=serializers.DictField())
    others_hidden = serializers.BooleanField()
    outcome = serializers.DictField(
        allow_null=True, help_text="The decision of the round, once all reviews are in."
    )
    executability = serializers.DictField(allow_null=True)
    duplicates = serializers.ListField(child=serializers.DictField())


class ReviewAgreement(serializers.Serializer):
    reviews = serializers.IntegerField()
    verdicts = serializers.ListField(child=serializers.CharField())
    outcome = serializers.CharField(allow_null=True)
    step_agreement = serializers.FloatField()
    agreeing_steps = serializers.ListField(child=serializers.IntegerField())
    disagreeing_steps = serializers.ListField(child=serializers.IntegerField())
    flagged_steps = serializers.ListField(child=serializers.IntegerField())
    fix_agreement = serializers.ListField(
        child=serializers.DictField(), help_text="[{index, score, agree, reviewers}]"
    )


class ReviewDuplicates(serializers.Serializer):
    threshold = serializers.FloatField()
    duplicates = serializers.ListField(child=serializers.DictField())


class Executability(serializers.Serializer):
    executability = serializers.DictField(
        allow_null=True, help_text="{status, at, ...} of the replay, or null."
    )


class ThinkAloudChunkRow(serializers.Serializer):
    index = serializers.IntegerField()
    start_clock = serializers.FloatField()
    duration_s = serializers.FloatField()
    size = serializers.IntegerField()
    transcribed = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True)


class ThinkAloudState(serializers.Serializer):
    """One session's think-aloud (annotation/thinkaloud/selectors.py `thinkaloud_state`)."""

    session_id = serializers.IntegerField()
    status = serializers.CharField()
    finished = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True)
    server_clock = serializers.FloatField()
    chunks = ThinkAloudChunkRow(many=True)
    next_index = serializers.IntegerField()
    audio_url = serializers.CharField(
        allow_blank=True, help_text="The re-encoded recording, after the full pass."
    )
    audio_start_clock = serializers.FloatField()
    audio_s = serializers.FloatField()
    model = serializers.CharField(allow_blank=True)
    processing_s = serializers.FloatField(allow_null=True)
    final = serializers.DictField(allow_null=True, help_text="{verbatim, words} said after the last step.")
    steps = serializers.ListField(child=serializers.DictField(), help_text="Per step: its words and thought.")


class ThinkAloudChunkStored(serializers.Serializer):
    index = serializers.IntegerField()
    start_clock = serializers.FloatField()
    duration_s = serializers.FloatField()
    size = serializers.IntegerField()
    created = serializers.BooleanField()


def ok(serializer: Any, code: int = 200) -> dict[int, Any]:
    """An operation's responses: `serializer` for `code`, and the 404 / 409 {"detail"} answers."""
    return {code: serializer, **DETAIL_RESPONSES}


class AsrModelRow(serializers.Serializer):
    name = serializers.CharField()
    packages = serializers.CharField()
    size_mb = serializers.IntegerField()
    rtf_wall = serializers.FloatField(
        help_text="Measured real-time factor (wall) on 2 cores, bench asr hard set."
    )
    rtf_cpu = serializers.FloatField(help_text="CPU seconds per audio second, same run.")
    note = serializers.CharField()
    installed = serializers.BooleanField()


class AsrModels(serializers.Serializer):
    """The think-aloud Whisper model in use and the choices (annotation/thinkaloud/selectors.py)."""

    model = serializers.CharField()
    chosen = serializers.CharField(
        allow_blank=True, help_text="The admins' choice; empty: the deploy default."
    )
    deploy_default = serializers.CharField()
    updated_at = serializers.CharField(allow_null=True)
    models = AsrModelRow(many=True)
