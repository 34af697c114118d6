"""RL runs (SPEC §8–9): the run with its state machine and progress, its metrics and its alerts.

Per-episode figures are not stored here: an RL episode is a `store.Trajectory` with `run` set
(final reward, validation, steps, policy version, metadata).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RunStatus(models.TextChoices):
    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"


TERMINAL_RUN_STATUSES = (RunStatus.STOPPED, RunStatus.FINISHED, RunStatus.FAILED)


class RunAlgorithm(models.TextChoices):
    PPO = "ppo", "PPO"
    GRPO = "grpo", "Step-wise GRPO"


class RunMode(models.TextChoices):
    ASYNC = "async", "Asynchronous (streaming pool, rollout-wise scheduling)"
    SYNC = "sync", "Synchronous baseline (batch barrier)"


class Run(models.Model):
    """One training run. `config` is the full validated hyperparameter set (workers.rl.run_config)."""

    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.CREATED)
    algorithm = models.CharField(max_length=32, choices=RunAlgorithm.choices, default=RunAlgorithm.GRPO)
    mode = models.CharField(max_length=8, choices=RunMode.choices, default=RunMode.ASYNC)
    preset = models.CharField(max_length=64, blank=True, help_text="Preset the config started from.")
    pool = models.ForeignKey(
        "store.TaskPool", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    config = models.JSONField(default=dict, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    start_checkpoint = models.ForeignKey(
        "store.Checkpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="started_runs",
        help_text="Weights the run starts from (a fork starts from a checkpoint of its parent).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="runs"
    )
    error = models.TextField(blank=True)
    # Progress, written by the trainer through services.run_progress.
    updates_done = models.PositiveIntegerField(default=0)
    episodes_done = models.PositiveIntegerField(default=0)
    policy_version = models.PositiveIntegerField(default=0)
    samples = models.PositiveBigIntegerField(default=0, help_text="Trained steps so far.")
    headline_success = models.FloatField(
        null=True, blank=True, help_text="Latest verified success rate (outcome/verified_success_rate)."
    )
    metrics_packed_step = models.PositiveIntegerField(
        default=0,
        help_text="Training step at which metric blocks were last packed (services.metrics_record).",
    )
    running_seconds = models.FloatField(
        default=0.0, help_text="Seconds spent running before the current running spell (pauses excluded)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True, help_text="Start of the current running spell.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(status=RunStatus.FAILED) | ~models.Q(error=""),
                name="run_failed_has_error",
            ),
            models.CheckConstraint(condition=models.Q(status__in=RunStatus.values), name="run_status_known"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.name} ({self.status})"

    @property
    def variant(self) -> str:
        """What the run list calls it: ppo, grpo, bepa (GRPO + BEPA cache) or sync baseline."""
        if self.mode == RunMode.SYNC:
            return "sync baseline"
        injection = (self.config.get("curation") or {}).get("injection")
        if self.algorithm == RunAlgorithm.GRPO and injection == "bepa_cache":
            return "bepa"
        return str(self.algorithm)


class RunMetric(models.Model):
    """One scalar at one training step. Names: rl_control.metric_names."""

    # No separate index on run: `runmetric_series` starts with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metrics", db_index=False)
    name = models.CharField(max_length=200)
    step = models.PositiveIntegerField(help_text="Training step (trainer update) the value belongs to.")
    policy_version = models.PositiveIntegerField(default=0)
    samples = models.PositiveBigIntegerField(default=0, help_text="Trained steps so far.")
    wall = models.FloatField(help_text="Seconds since the run started.")
    value = models.FloatField()

    class Meta:
        # A series is read in (step, id) order by an index-only scan of this covering index: the
        # rows of one series sit together in the index whatever the heap order, and id makes the
        # order total so ties within a step read back the same way every time (deterministic
        # downsampling). Measured by `bench dashboard` (downsample_1m_ms).
        indexes = [
            models.Index(
                fields=["run", "name", "step", "id"],
                include=["value", "policy_version", "samples", "wall"],
                name="runmetric_series",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.step}={self.value:g}"


class RunMetricBlock(models.Model):
    """A read cache of `BLOCK_POINTS` consecutive points of one series, packed as float64 columns.

    Rows of `RunMetric` stay the record; a block only lets a long series be read as a few hundred
    rows instead of a million (services.metrics_compact builds blocks, selectors.metric_points
    reads blocks then the rows after the last block). A block covers the points of (run, name) in
    (step, id) order from just after the previous block up to and including (last_step, last_id).
    Each column holds `n` little-endian float64s.
    """

    BLOCK_POINTS = 4096

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_blocks", db_index=False)
    name = models.CharField(max_length=200)
    last_step = models.PositiveIntegerField()
    last_id = models.BigIntegerField()
    n = models.PositiveIntegerField()
    step = models.BinaryField()
    policy_version = models.BinaryField()
    samples = models.BinaryField()
    wall = models.BinaryField()
    value = models.BinaryField()

    class Meta:
        constraints = [
            # Two compactions racing build the same next block; the second one fails here.
            models.UniqueConstraint(
                fields=["run", "name", "last_step", "last_id"], name="runmetricblock_order"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ≤ step {self.last_step} ({self.n} points)"


class AlertKind(models.TextChoices):
    ENTROPY_COLLAPSE = "entropy_collapse", "Entropy collapse"
    ENTROPY_BLOWUP = "entropy_blowup", "Entropy blow-up"
    EV_DROP = "ev_drop", "Explained-variance drop"
    REWARD_SUCCESS_DIVERGENCE = "reward_success_divergence", "Reward up while verified success down"
    STALENESS_VIOLATION = "staleness_violation", "Staleness bound violated"
    ENV_CRASH_SPIKE = "env_crash_spike", "Environment crash spike"


class RunAlert(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=32, choices=AlertKind.choices)
    step = models.PositiveIntegerField(help_text="Training step at which the alert fired.")
    value = models.FloatField()
    threshold = models.FloatField()
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-step", "-id"]
        indexes = [models.Index(fields=["run", "kind", "step"])]

    def __str__(self) -> str:
        return f"{self.kind} at step {self.step} of run {self.run_id}"


# ------------------------------------------------------------------------------------- engine


class RolloutGroupState(models.TextChoices):
    OPEN = "open"  # slots still being handed out or rolled out
    TRAINED = "trained"  # its trajectories went into a trainer update
    SKIPPED = "skipped"  # finished but carried no signal, all stale or all crashed


class RolloutGroup(models.Model):
    """N rollouts of one task handed out by the data manager (the GRPO group, seed 002 §3).

    A slot is claimed by one conditional UPDATE on `issued` (never twice); each claim creates one
    `store.Trajectory` (source rl, run set) whose metadata carries {"group", "slot", "generation"}.
    `batch` is the synchronous-mode batch the group belongs to: the trainer's update count
    (EngineState.updates) when the batch opened (None in async mode).
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollout_groups")
    task = models.ForeignKey("store.Task", on_delete=models.CASCADE, related_name="rollout_groups")
    size = models.PositiveSmallIntegerField()
    issued = models.PositiveSmallIntegerField(default=0)
    step_limit = models.PositiveSmallIntegerField()
    created_version = models.PositiveIntegerField(default=0)
    batch = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=RolloutGroupState.choices, default=RolloutGroupState.OPEN)
    trained_version = models.PositiveIntegerField(null=True, blank=True)
    plan = models.JSONField(
        default=dict, blank=True, help_text="The curator's GroupPlan when it was consumed."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "state", "id"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(issued__lte=models.F("size")), name="rolloutgroup_issued_le_size"
            )
        ]

    def __str__(self) -> str:
        return f"group {self.pk} of run {self.run_id} ({self.issued}/{self.size}, {self.state})"


class EngineState(models.Model):
    """The durable part of a run's engine: trainer checkpoint, policy version, curation state, counters.

    Written in the same transaction that marks the trained groups, so a restarted trainer continues
    from exactly the last committed update (nothing trained twice, nothing lost).
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="engine_state")
    version = models.PositiveIntegerField(default=0)
    updates = models.PositiveIntegerField(default=0)
    trainer_dir = models.CharField(
        max_length=500, blank=True, help_text="Newest trainer save (HF dir + state)."
    )
    curation = models.JSONField(default=dict, blank=True, help_text="GroupCurator.to_dict().")
    counters = models.JSONField(default=dict, blank=True)
    chunk = models.PositiveIntegerField(default=0, help_text="Trainer chunk currently allowed to run.")
    trainer_heartbeat = models.DateTimeField(null=True, blank=True)
    servers = models.JSONField(
        default=list, blank=True, help_text="The run's own policy servers: [{url, host, pid, started}]."
    )
    serve_secret = models.CharField(
        max_length=64, blank=True, help_text="Weights secret of the run's own policy servers."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"engine of run {self.run_id} at v{self.version}"
