"""The storage layer (SPEC §6): task pools, tasks, trajectories, steps, checkpoints, export jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from workers.envs.sandbox.home import DEFAULT_DISK_MB, MAX_DISK_MB, MIN_DISK_MB


class EnvKind(models.TextChoices):
    DESKTOP = "desktop"
    BROWSER = "browser"
    GAME = "game"
    PHONE = "phone"
    TERMINAL = "terminal"


class TaskSource(models.TextChoices):
    OSWORLD = "osworld"
    MINIWOB = "miniwob"
    GAME = "game"
    CUSTOM = "custom"


class ValidationMode(models.TextChoices):
    VERIFIER = "verifier", "Verifier reward"
    JUDGE = "judge", "LLM judge / ORM"
    HUMAN = "human", "Two agreeing reviewers"


class TaskPool(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    candidates_n = models.PositiveSmallIntegerField(
        default=3, help_text="How many candidate actions the model proposes to annotators per step."
    )
    validation_mode = models.CharField(
        max_length=16, choices=ValidationMode.choices, default=ValidationMode.VERIFIER
    )
    disk_mb = models.PositiveIntegerField(
        default=DEFAULT_DISK_MB,
        validators=[MinValueValidator(MIN_DISK_MB), MaxValueValidator(MAX_DISK_MB)],
        help_text="Size cap of each environment session's home, in MiB (memory-backed: it counts "
        "against the session's memory limit). A write past it fails with 'No space left on device'.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """A thing to do in an environment. Difficulty follows the rubric of seed 000 §2.4.1."""

    pool = models.ForeignKey(TaskPool, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(max_length=255, help_text="Id in the source (OSWorld id, MiniWoB name).")
    instruction = models.TextField()
    env_kind = models.CharField(max_length=16, choices=EnvKind.choices)
    source = models.CharField(max_length=16, choices=TaskSource.choices, default=TaskSource.CUSTOM)
    setup = models.JSONField(default=dict, blank=True)
    verifier = models.JSONField(default=dict, blank=True)
    # Difficulty rubric: expected steps, cross-page navigation, prerequisites, exception handling.
    difficulty_steps = models.PositiveSmallIntegerField(default=1)
    difficulty_cross_page = models.BooleanField(default=False)
    difficulty_prerequisites = models.PositiveSmallIntegerField(default=0)
    difficulty_exceptions = models.BooleanField(default=False)
    difficulty = models.FloatField(default=0.0, help_text="Score from the rubric, 0 (trivial) .. 1 (hard).")
    importance = models.FloatField(default=1.0)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    enabled = models.BooleanField(default=True)
    supported = models.BooleanField(default=True)
    unsupported_reasons = models.JSONField(default=list, blank=True)
    reference_check = models.JSONField(
        default=dict,
        blank=True,
        help_text="The independent check of a task with a reference solution (manage.py osworld_check): "
        "{reference, no_action, solved, correct, detail, checked_at}; empty: never checked.",
    )
    # Running success statistics (updated by services when trajectories finish).
    attempts = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    success_rate = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool_id", "external_id"]
        constraints = [models.UniqueConstraint(fields=["pool", "external_id"], name="task_unique_in_pool")]
        indexes = [models.Index(fields=["pool", "enabled"])]

    def __str__(self) -> str:
        return f"{self.pool.name}/{self.external_id}"


class Checkpoint(models.Model):
    """A policy checkpoint: a Hugging Face model directory in media storage."""

    version = models.CharField(max_length=100, unique=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    path = models.CharField(
        max_length=500, blank=True, help_text="Directory of the HF checkpoint (config, safetensors)."
    )
    endpoint_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="An external OpenAI-compatible server (e.g. vLLM …/v1) serving this model; empty: the "
        "platform's own policy server serves `path`.",
    )
    profile = models.CharField(
        max_length=32, default="embedded", help_text="How to prompt it: embedded, ui-tars-1.5, ui-tars-1.0."
    )
    run = models.ForeignKey(
        "rl_control.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints"
    )
    metrics = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)
    is_annotation_model = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_annotation_model"],
                condition=models.Q(is_annotation_model=True),
                name="one_annotation_model",
            )
        ]

    def __str__(self) -> str:
        return self.version


class TrajectorySource(models.TextChoices):
    ANNOTATION = "annotation"
    RL = "rl"
    REJECTION_SAMPLING = "rejection_sampling"
    IMPORT = "import"


class TrajectoryStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ABANDONED = "abandoned"
    CRASHED = "crashed"


class Route(models.TextChoices):
    SFT = "sft"
    CT = "ct"
    NONE = "none"


class ReviewState(models.TextChoices):
    NONE = "none"
    PENDING = "pending"
    IN_REVIEW = "in_review"
    APPROVED = "approved"
    REJECTED = "rejected"
    NEEDS_FIX = "needs_fix"
    SUPERSEDED = "superseded"  # a branch that re-executed a changed action replaced it in review


# Review states whose trajectories never become training data (SFT, RL-start successes).
UNTRAINABLE_REVIEW_STATES = (ReviewState.REJECTED, ReviewState.NEEDS_FIX, ReviewState.SUPERSEDED)
# Review states that wait for the reviewers before anything else may validate or route them.
UNDECIDED_REVIEW_STATES = (ReviewState.PENDING, ReviewState.IN_REVIEW)


class Trajectory(models.Model):
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="trajectories")
    env_kind = models.CharField(max_length=16, choices=EnvKind.choices)
    source = models.CharField(max_length=24, choices=TrajectorySource.choices)
    checkpoint = models.ForeignKey(
        Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    policy_version = models.CharField(max_length=100, blank=True)
    instruction = models.TextField(
        blank=True,
        help_text="The episode's own instruction as the environment gave it at reset (MiniWoB++ generates "
        "one per episode); empty: the task's instruction.",
    )
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="trajectories",
    )
    run = models.ForeignKey(
        "rl_control.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    status = models.CharField(
        max_length=16, choices=TrajectoryStatus.choices, default=TrajectoryStatus.RUNNING
    )
    final_reward = models.FloatField(null=True, blank=True)
    validation = models.SmallIntegerField(
        null=True, blank=True, help_text="V(s) in {0, 1}; empty until validated."
    )
    validator = models.CharField(max_length=100, blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)
    route = models.CharField(max_length=8, choices=Route.choices, default=Route.NONE)
    review_state = models.CharField(max_length=16, choices=ReviewState.choices, default=ReviewState.NONE)
    review_round = models.PositiveSmallIntegerField(
        default=1, help_text="Review round: + 1 each time a fixed trajectory re-enters review."
    )
    num_steps = models.PositiveIntegerField(default=0)
    final_screenshot = models.FileField(
        upload_to="screenshots/%Y/%m/%d/",
        max_length=300,
        blank=True,
        help_text="The screen after the last action (each step keeps the screen before its action).",
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(validation__isnull=True) | models.Q(validation__in=[0, 1]),
                name="validation_is_binary",
            )
        ]
        indexes = [
            models.Index(fields=["source", "created_at"]),
            models.Index(fields=["route", "validation"]),
            models.Index(fields=["review_state"]),
        ]

    def __str__(self) -> str:
        return f"trajectory {self.pk} ({self.source}, {self.status})"

    @property
    def episode_instruction(self) -> str:
        """What the agent was asked in this episode: the stored one, else the task's."""
        return self.instruction or self.task.instruction


class DecisionKind(models.TextChoices):
    ACCEPTED = "accepted"
    EDITED = "edited"
    OVERRIDDEN = "overridden"
    TAKEOVER = "takeover"
    POLICY = "policy"


class Step(models.Model):
    """One action in a trajectory. Times are on the session's monotonic clock (seconds)."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    clock_start = models.FloatField(
        null=True, blank=True, help_text="Monotonic clock when the observation was taken."
    )
    clock_end = models.FloatField(
        null=True, blank=True, help_text="Monotonic clock when the action was executed."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    screenshot = models.FileField(upload_to="screenshots/%Y/%m/%d/", max_length=300, blank=True)
    observation_refs = models.JSONField(
        default=dict, blank=True, help_text="Other observation files by name."
    )
    raw_text = models.TextField(blank=True, help_text="The model's (or annotator's) full response text.")
    thought = models.TextField(blank=True)
    action_text = models.TextField(blank=True)
    action = models.JSONField(default=list, blank=True, help_text="Parsed actions (Action.to_json list).")
    parse_error = models.TextField(blank=True)
    coord_convention = models.CharField(max_length=24, blank=True)
    model_image_width = models.PositiveIntegerField(null=True, blank=True)
    model_image_height = models.PositiveIntegerField(null=True, blank=True)
    screen_width = models.PositiveIntegerField(null=True, blank=True)
    screen_height = models.PositiveIntegerField(null=True, blank=True)
    executed_points = models.JSONField(
        default=list, blank=True, help_text="Executed screen pixels [[x, y], ...]."
    )
    candidates = models.JSONField(
        default=list,
        blank=True,
        help_text="[{thought, action, logprob, model_version}, ...] proposed at this step.",
    )
    decision = models.CharField(max_length=16, choices=DecisionKind.choices, default=DecisionKind.POLICY)
    decision_index = models.SmallIntegerField(null=True, blank=True)
    decision_meta = models.JSONField(
        default=dict, blank=True, help_text="Edit diff, rejected candidates, time taken."
    )
    policy_version = models.CharField(max_length=100, blank=True)
    human_thought_verbatim = models.TextField(blank=True)
    human_thought_refined = models.TextField(blank=True)
    human_words = models.JSONField(
        default=list, blank=True, help_text="[{w, start, end, p}] aligned ASR words."
    )
    reward = models.FloatField(default=0.0)
    done = models.BooleanField(default=False)
    rl = models.JSONField(default=dict, blank=True, help_text="value, advantage, lambda, ratio, clipped.")

    class Meta:
        ordering = ["trajectory_id", "index"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "index"], name="step_unique_index")]

    def __str__(self) -> str:
        return f"step {self.index} of trajectory {self.trajectory_id}"


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_JOB_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


class Job(models.Model):
    """What every long operation's row has (ExportJob, SftJob, FlywheelJob): the state that
    webapp/store/jobs.py moves queued → running → succeeded | failed | cancelled, its error and times."""

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]


class ExportFormat(models.TextChoices):
    JSONL = "jsonl", "Native JSONL"
    SHAREGPT = "sharegpt", "LLaMA-Factory sharegpt (multimodal)"
    VERL = "verl", "verl parquet"
    OSWORLD = "osworld", "OSWorld traj.jsonl + PNGs"


class ExportJob(Job):
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="export_jobs"
    )
    format = models.CharField(max_length=16, choices=ExportFormat.choices)
    filters = models.JSONField(default=dict, blank=True)
    progress = models.FloatField(default=0.0, help_text="0..100")
    total_trajectories = models.PositiveIntegerField(default=0)
    done_trajectories = models.PositiveIntegerField(default=0)
    archive = models.FileField(upload_to="exports/", max_length=300, blank=True)

    def __str__(self) -> str:
        return f"export {self.pk} ({self.format}, {self.status})"


class SftJob(Job):
    """Supervised fine-tuning of a checkpoint on stored trajectories (run on the `train` queue by
    `webapp.store.tasks.sft_job_execute`; see webapp/store/sft_jobs.py)."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="sft_jobs"
    )
    base = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="sft_jobs")
    version = models.CharField(max_length=100, help_text="Version of the checkpoint this job registers.")
    filters = models.JSONField(default=dict, blank=True, help_text="Trajectory filters (as the export API).")
    steps = models.PositiveIntegerField(default=200)
    lr = models.FloatField(default=1e-3)
    batch_size = models.PositiveIntegerField(default=16)
    progress = models.JSONField(
        default=dict, blank=True, help_text="{step, total, loss, lr} of the last log."
    )
    examples = models.PositiveIntegerField(default=0)
    result = models.ForeignKey(
        Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="produced_by_sft_jobs"
    )

    def __str__(self) -> str:
        return f"sft job {self.pk} ({self.base_id} -> {self.version}, {self.status})"
