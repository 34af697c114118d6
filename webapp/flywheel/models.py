"""The data flywheel (seed 000 §2.3, seed 004 §2.2): per-pool validation settings, versioned dataset
iterations (SFT / CT splits), flywheel jobs (rejection sampling, merge, refresh, SFT) and the task-pool
refresh history."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.store.models import Job


class PoolValidation(models.Model):
    """How V(s) is decided for one pool's trajectories. The validator kind is the pool's own
    `TaskPool.validation_mode`; this row adds what the judge needs."""

    pool = models.OneToOneField(
        "store.TaskPool", on_delete=models.CASCADE, related_name="flywheel_validation"
    )
    judge_url = models.CharField(
        max_length=500, blank=True, help_text="OpenAI-compatible base URL of the judge / ORM (…/v1 or root)."
    )
    judge_model = models.CharField(max_length=200, blank=True, default="judge")
    keep_failure_prefix = models.BooleanField(
        default=True, help_text="For V(s)=0, keep the judge-marked longest correct prefix as SFT data."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"validation of {self.pool}"


class Split(models.TextChoices):
    SFT = "sft"
    CT = "ct"


class DatasetIteration(models.Model):
    """One versioned snapshot of validated trajectories: V(s)=1 → SFT split, the rest → CT."""

    version = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    filters = models.JSONField(default=dict, blank=True, help_text="sources, pool, created_after/before.")
    card = models.JSONField(default=dict, blank=True, help_text="Counts per split, task, source; lengths.")
    sft_count = models.PositiveIntegerField(default=0)
    ct_count = models.PositiveIntegerField(default=0)
    prefix_count = models.PositiveIntegerField(
        default=0, help_text="V(s)=0 trajectories whose judge-marked correct prefix joins SFT."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"dataset v{self.version}"

    @property
    def v1_rate(self) -> float | None:
        total = self.sft_count + self.ct_count
        return self.sft_count / total if total else None


class DatasetMembership(models.Model):
    dataset = models.ForeignKey(DatasetIteration, on_delete=models.CASCADE, related_name="members")
    trajectory = models.ForeignKey(
        "store.Trajectory", on_delete=models.CASCADE, related_name="flywheel_memberships"
    )
    split = models.CharField(max_length=4, choices=Split.choices)
    sft_prefix_steps = models.PositiveIntegerField(
        null=True, blank=True, help_text="CT member whose first N steps also serve as SFT (judge-marked)."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "trajectory"], name="dataset_member_once")]
        indexes = [models.Index(fields=["dataset", "split"])]

    def __str__(self) -> str:
        return f"trajectory {self.trajectory_id} in dataset {self.dataset_id} ({self.split})"


class JobKind(models.TextChoices):
    REJECTION_SAMPLING = "rejection_sampling"
    MERGE = "merge"
    REFRESH = "refresh"
    SFT = "sft"


class FlywheelJob(Job):
    """A long flywheel operation; always ends terminal with a readable error."""

    kind = models.CharField(max_length=24, choices=JobKind.choices)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    progress = models.FloatField(default=0.0, help_text="0..100")
    done_units = models.PositiveIntegerField(default=0)
    total_units = models.PositiveIntegerField(default=0)
    checkpoint = models.ForeignKey(
        "store.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="flywheel_jobs",
        help_text="The checkpoint sampled from (rejection sampling) or produced (merge, SFT).",
    )  # fmt: skip
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta(Job.Meta):
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"


class TaskWeight(models.Model):
    """The current refresh outcome per task: where it sits in the curriculum and how much weight
    assignment gives it. `base_importance` remembers the admin's importance before the shift."""

    task = models.OneToOneField("store.Task", on_delete=models.CASCADE, related_name="flywheel_weight")
    bucket = models.CharField(max_length=8)
    success_rate = models.FloatField()
    attempts = models.PositiveIntegerField()
    by_source = models.JSONField(default=dict, blank=True, help_text="{source: [successes, attempts]}")
    base_importance = models.FloatField()
    weight = models.FloatField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"task {self.task_id}: {self.bucket}, weight {self.weight}"


class PoolRefresh(models.Model):
    """One refresh of a pool: its difficulty distribution then, and the weights it set."""

    pool = models.ForeignKey("store.TaskPool", on_delete=models.CASCADE, related_name="flywheel_refreshes")
    job = models.ForeignKey(FlywheelJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    buckets = models.JSONField(default=dict, help_text="{bucket: task count}")
    mean_success = models.FloatField(default=0.0)
    tasks = models.JSONField(default=list, help_text="[{task, external_id, rate, attempts, bucket, weight}]")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"refresh of pool {self.pool_id} at {self.created_at:%Y-%m-%d %H:%M}"


class PromotionTarget(models.TextChoices):
    ANNOTATION = "annotation", "Annotation model"
    RL_START = "rl_start", "Start of new RL runs"


class Promotion(models.Model):
    """History of promotions; the newest `rl_start` row is where new RL runs start by default."""

    checkpoint = models.ForeignKey("store.Checkpoint", on_delete=models.CASCADE, related_name="promotions")
    target = models.CharField(max_length=16, choices=PromotionTarget.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.checkpoint_id} → {self.target}"
