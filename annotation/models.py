"""Annotation sessions, task assignment and reviews (issue 5 extends the workflow around these)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Track(models.TextChoices):
    EXPERT = "expert"
    NOVICE = "novice"


class AssignmentStatus(models.TextChoices):
    ASSIGNED = "assigned"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    SKIPPED = "skipped"


class Assignment(models.Model):
    """A task given to an annotator; annotators see only tasks assigned to them."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    task = models.ForeignKey("store.Task", on_delete=models.CASCADE, related_name="assignments")
    track = models.CharField(max_length=8, choices=Track.choices, default=Track.EXPERT)
    status = models.CharField(
        max_length=16, choices=AssignmentStatus.choices, default=AssignmentStatus.ASSIGNED
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["user", "task"], name="assignment_unique")]

    def __str__(self) -> str:
        return f"{self.user} ← task {self.task_id} ({self.status})"


class SessionStatus(models.TextChoices):
    CREATED = "created"
    ACTIVE = "active"
    SUBMITTED = "submitted"
    IN_REVIEW = "in_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    NEEDS_FIX = "needs_fix"
    ABANDONED = "abandoned"


class CandidatesStatus(models.TextChoices):
    NONE = "none"
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class AnnotationSession(models.Model):
    """One annotator working one task in a live environment.

    The current observation (the state awaiting a decision) and the model's candidates for it live on
    the session row, so a reload or a dropped connection resumes exactly where it was. `obs_version`
    increases with every new observation; decisions and candidates name the version they belong to,
    so a stale decision or a late candidate set is refused instead of applied to the wrong state.
    Times are on the session clock: seconds since `clock_origin` (server wall clock at start).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotation_sessions"
    )
    task = models.ForeignKey("store.Task", on_delete=models.PROTECT, related_name="annotation_sessions")
    trajectory = models.OneToOneField(
        "store.Trajectory",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="annotation_session",
    )
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.CREATED)
    track = models.CharField(max_length=8, choices=Track.choices, default=Track.EXPERT)
    # The lease on the environment (see webapp.fleet): enough to rebuild a `Lease`.
    lease_id = models.CharField(max_length=64, blank=True)
    lease_env = models.CharField(max_length=64, blank=True)
    lease_worker = models.CharField(max_length=200, blank=True)
    # Which model proposes: an OpenAI-compatible endpoint (embedded server or vLLM) and its convention.
    policy_base_url = models.CharField(max_length=500, blank=True)
    policy_model = models.CharField(max_length=200, blank=True)
    policy_profile = models.CharField(
        max_length=32, default="embedded", help_text="workers.policy profile name."
    )
    candidates_n = models.PositiveSmallIntegerField(default=3)
    clock_origin = models.FloatField(default=0.0, help_text="Unix time the session clock counts from.")
    # The current observation.
    obs_version = models.PositiveIntegerField(default=0)
    current_screenshot = models.FileField(upload_to="annotation/", max_length=300, blank=True)
    current_width = models.PositiveIntegerField(default=0)
    current_height = models.PositiveIntegerField(default=0)
    current_clock = models.FloatField(default=0.0)
    current_instruction = models.TextField(blank=True)
    current_elements = models.JSONField(default=list, blank=True)
    current_dom_text = models.TextField(blank=True)
    last_reward = models.FloatField(default=0.0)
    env_done = models.BooleanField(default=False)
    # The model's candidates for the current observation.
    candidates = models.JSONField(default=list, blank=True)
    candidates_status = models.CharField(
        max_length=8, choices=CandidatesStatus.choices, default=CandidatesStatus.NONE
    )
    candidates_version = models.PositiveIntegerField(default=0)
    candidates_error = models.TextField(blank=True)
    candidates_requested_at = models.FloatField(null=True, blank=True)
    candidates_ms = models.FloatField(
        null=True, blank=True, help_text="Model time of the last candidate set."
    )
    error = models.TextField(blank=True)
    # A decision (or take-over end) executing on the environment: its claim token, set by a
    # conditional UPDATE before the call and checked when the result is stored (fencing).
    decision_claim = models.CharField(max_length=32, blank=True, default="")
    decision_claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.user} on task {self.task_id} ({self.status})"


class Verdict(models.TextChoices):
    APPROVE = "approve"
    FIX = "fix"
    REJECT = "reject"


class Review(models.Model):
    """One reviewer's independent judgement of a trajectory; two per trajectory by default."""

    trajectory = models.ForeignKey("store.Trajectory", on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reviews")
    round = models.PositiveSmallIntegerField(
        default=1, help_text="The trajectory's review round this review belongs to."
    )
    verdict = models.CharField(max_length=8, choices=Verdict.choices, blank=True)
    step_verdicts = models.JSONField(default=list, blank=True, help_text="[{index, verdict, comment}]")
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["trajectory", "reviewer", "round"], name="review_once_per_reviewer_and_round"
            )
        ]

    def __str__(self) -> str:
        return f"review of trajectory {self.trajectory_id} by {self.reviewer} ({self.verdict or 'open'})"


class ThinkAloudStatus(models.TextChoices):
    RECORDING = "recording"  # chunks arrive; each is transcribed on its own for live feedback
    QUEUED = "queued"  # finished: the full pass over the whole recording is waiting for a worker
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ThinkAloudRecording(models.Model):
    """The annotator's think-aloud for one session (issue 6).

    Audio lives in media storage (one file per chunk, plus the whole recording re-encoded after the
    final pass); the aligned words go to the session's Step rows (`human_words`,
    `human_thought_verbatim`, `human_thought_refined`) where trajectories and export read them.
    Times are session-clock seconds, like Step.clock_start / clock_end.
    """

    session = models.OneToOneField(AnnotationSession, on_delete=models.CASCADE, related_name="thinkaloud")
    status = models.CharField(
        max_length=12, choices=ThinkAloudStatus.choices, default=ThinkAloudStatus.RECORDING
    )
    finished = models.BooleanField(
        default=False, help_text="The annotator stopped; the full pass ran or will."
    )
    audio = models.FileField(upload_to="thinkaloud/", max_length=300, blank=True)
    audio_start_clock = models.FloatField(default=0.0)
    audio_s = models.FloatField(default=0.0)
    transcript = models.JSONField(
        default=dict, blank=True, help_text="workers.asr RecordingResult.to_dict() of the last full pass."
    )
    step_meta = models.JSONField(
        default=dict,
        blank=True,
        help_text="{step index: {edited, moved, refined_by, refine_error}}: edited steps keep their text.",
    )
    clock_rtt_ms = models.FloatField(null=True, blank=True, help_text="Client's last clock-sync round trip.")
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    processing_s = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"think-aloud of session {self.session_id} ({self.status})"


class ThinkAloudChunk(models.Model):
    """One uploaded audio chunk (a complete webm/ogg/wav file) and its own quick transcription."""

    recording = models.ForeignKey(ThinkAloudRecording, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    start_clock = models.FloatField(help_text="Session-clock second of the chunk's first sample.")
    duration_s = models.FloatField()
    file = models.FileField(upload_to="thinkaloud/", max_length=300)
    content_type = models.CharField(max_length=40)
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    words = models.JSONField(default=list, blank=True, help_text="[{w, start, end, p}] on the session clock.")
    transcribed = models.BooleanField(default=False)
    live_cut = models.FloatField(
        null=True,
        blank=True,
        help_text="Session-clock second from which `words` are this chunk's own (it was decoded with the "
        "previous chunk's tail in front; earlier words are the previous chunk's). Empty: `start_clock`.",
    )
    snr_db = models.FloatField(
        null=True,
        blank=True,
        help_text="The chunk's speech over the room's noise, in dB (workers.asr.speaker). Empty: not "
        "measured (too little speech or pause, or silent pauses).",
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["recording_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["recording", "index"], name="thinkaloud_chunk_unique_index")
        ]

    def __str__(self) -> str:
        return f"chunk {self.index} of {self.recording}"


class AsrSettings(models.Model):
    """The platform's think-aloud transcription settings, chosen by admins (one row, pk 1).

    `model` is a name of workers.asr.models.MODELS; empty means THINKALOUD_MODEL_PATH (the deploy's
    setting, tiny.en when that is empty too). The ASR workers read it at each transcription.
    """

    model = models.CharField(
        max_length=32,
        blank=True,
        help_text="Whisper model for think-aloud (tiny.en, base); empty: the deploy's THINKALOUD_MODEL_PATH.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "ASR settings"
        verbose_name_plural = "ASR settings"

    def __str__(self) -> str:
        return f"ASR model {self.model or '(deploy default)'}"
