"""Input and output serializers of the run API (no logic: services decide)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from rl_control import fleet_selectors, selectors
from rl_control.models import Run, RunAlert, RunMode
from rl_control.selectors import MAX_POINTS, X_AXES
from webapp.store.models import Checkpoint, TaskPool, Trajectory
from workers.rl.run_config import AlertSettings


class RunServing(serializers.Serializer):
    """Where a run's policy is served now."""

    urls = serializers.ListField(
        child=serializers.CharField(), help_text="…/v1 URLs its rollouts sample from."
    )
    own = serializers.BooleanField(help_text="Servers the run started itself (else external endpoints).")


class RunAlertsSummary(serializers.Serializer):
    """{count, last_kind, last_step} of a run's alerts (the last two null without alerts)."""

    count = serializers.IntegerField()
    last_kind = serializers.CharField(allow_null=True)
    last_step = serializers.IntegerField(allow_null=True)


class RunSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(
        source="created_by.username", default=None, read_only=True, allow_null=True
    )
    pool_name = serializers.CharField(source="pool.name", default=None, read_only=True, allow_null=True)
    start_checkpoint = serializers.CharField(
        source="start_checkpoint.version", default=None, read_only=True, allow_null=True
    )
    variant = serializers.CharField(read_only=True)
    progress = serializers.SerializerMethodField()
    alerts = serializers.SerializerMethodField(help_text="{count, last_kind, last_step} of the run's alerts.")
    wait_reason = serializers.SerializerMethodField(
        help_text="Why a running run waits (for the train worker, a rollout slot or an environment), "
        "from the live scheduler state; null when nothing holds it back."
    )

    class Meta:
        model = Run
        fields = [
            "id", "name", "status", "algorithm", "mode", "variant", "preset", "pool", "pool_name",
            "parent", "start_checkpoint", "created_by", "error", "updates_done", "episodes_done",
            "policy_version", "samples", "headline_success", "progress", "alerts", "wait_reason",
            "created_at", "updated_at", "started_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_progress(self, run: Run) -> float | None:
        """Fraction of the update (else episode) budget spent, 0..1; None when neither is set."""
        budget = run.config.get("budget") or {}
        if budget.get("max_updates"):
            return min(1.0, run.updates_done / budget["max_updates"])
        if budget.get("max_episodes"):
            return min(1.0, run.episodes_done / budget["max_episodes"])
        return None

    def get_wait_reason(self, run: Run) -> str | None:
        return fleet_selectors.run_wait_reason(run=run)

    @extend_schema_field(RunAlertsSummary)
    def get_alerts(self, run: Run) -> dict[str, object]:
        """From the list's annotations (selectors.runs_with_alerts) when present, else two queries."""
        if hasattr(run, "alert_count"):
            return {
                "count": run.alert_count,
                "last_kind": run.last_alert_kind,
                "last_step": run.last_alert_step,
            }
        last = run.alerts.order_by("-step", "-id").first()
        return {
            "count": run.alerts.count(),
            "last_kind": last.kind if last else None,
            "last_step": last.step if last else None,
        }


class RunDetailSerializer(RunSerializer):
    serving = serializers.SerializerMethodField(
        help_text="Where its policy is served now: {urls, own} (own: servers the run started itself; "
        "none while it is paused or its servers are starting)."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "config", "serving"]
        read_only_fields = fields

    @extend_schema_field(RunServing)
    def get_serving(self, run: Run) -> dict[str, object]:
        from rl_control.engine.serving import external_urls, serving_urls

        return {"urls": serving_urls(run), "own": not external_urls(run)}


class RunDetailWithLatestSerializer(RunDetailSerializer):
    latest_metrics = serializers.SerializerMethodField(
        help_text="{name: {step, value}}: newest point per series."
    )

    class Meta(RunDetailSerializer.Meta):
        fields = [*RunDetailSerializer.Meta.fields, "latest_metrics"]
        read_only_fields = fields

    def get_latest_metrics(self, run: Run) -> dict[str, dict[str, float]]:
        return selectors.run_latest_metrics(run_id=run.pk)


class RunPageSerializer(RunDetailWithLatestSerializer):
    """The run page's first load: the detail plus the alert thresholds in force and open alerts."""

    alert_settings = serializers.SerializerMethodField(
        help_text="Thresholds in force (alerts section with defaults) plus curation.staleness_bound."
    )
    endpoint_keys = serializers.SerializerMethodField(
        help_text="[{url, key}]: the weights key each external endpoint (serving.endpoints) must be "
        "started with (vLLM --api-key); [] for a run serving itself."
    )

    class Meta(RunDetailWithLatestSerializer.Meta):
        fields = [*RunDetailWithLatestSerializer.Meta.fields, "alert_settings", "endpoint_keys"]
        read_only_fields = fields

    @extend_schema_field(
        inline_serializer(
            "EndpointKey", {"url": serializers.CharField(), "key": serializers.CharField()}, many=True
        )
    )
    def get_endpoint_keys(self, run: Run) -> list[dict[str, str]]:
        from rl_control.engine.serving import endpoint_secrets

        return endpoint_secrets(run)

    def get_alert_settings(self, run: Run) -> dict[str, float]:
        settings = AlertSettings.model_validate(run.config.get("alerts") or {}).model_dump()
        settings["staleness_bound"] = (run.config.get("curation") or {}).get("staleness_bound", 1)
        return settings


class RunCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    preset = serializers.CharField(required=False, allow_blank=True, default="")
    algorithm = serializers.ChoiceField(choices=["ppo", "grpo"], required=False)
    mode = serializers.ChoiceField(choices=RunMode.choices, required=False)
    pool = serializers.PrimaryKeyRelatedField(
        queryset=TaskPool.objects.all(), required=False, allow_null=True,
        help_text="The task pool to train on. Required unless `config.task_ids` lists the tasks (400 otherwise).",
    )  # fmt: skip
    config = serializers.DictField(
        required=False,
        default=dict,
        help_text="Overrides applied over the preset: any part of the run config, whose JSON schema is "
        'GET /api/rl/config-schema/ (a bad field: 400 {"section.field": [messages]}).',
    )
    start_checkpoint = serializers.SlugRelatedField(
        slug_field="version", queryset=Checkpoint.objects.all(), required=False, allow_null=True,
        help_text="Checkpoint version to start from; default: the newest promoted to RL start.",
    )  # fmt: skip
    launch = serializers.BooleanField(
        required=False, default=False,
        help_text="Start it now: the preflight runs first, and a refused launch creates no run.",
    )  # fmt: skip


class RunForkInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    checkpoint = serializers.SlugRelatedField(
        slug_field="version", queryset=Checkpoint.objects.all(), required=False, allow_null=True
    )
    config = serializers.DictField(
        required=False, default=dict, help_text="Overrides applied over the parent's config."
    )
    launch = serializers.BooleanField(
        required=False, default=False,
        help_text="Start the fork now: the preflight runs first, and a refused launch creates no fork.",
    )  # fmt: skip


class MetricSeriesInput(serializers.Serializer):
    names = serializers.CharField(help_text="Comma-separated metric names.")
    x = serializers.ChoiceField(choices=list(X_AXES), default="step")
    points = serializers.IntegerField(min_value=4, max_value=MAX_POINTS, default=1000)

    def validate_names(self, value: str) -> list[str]:
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not names:
            raise serializers.ValidationError("give at least one metric name")
        if len(names) > 20:
            raise serializers.ValidationError("at most 20 series per request")
        return list(dict.fromkeys(names))


class SeriesSerializer(serializers.Serializer):
    name = serializers.CharField()
    x = serializers.ListField(child=serializers.FloatField())
    y = serializers.ListField(child=serializers.FloatField())
    total = serializers.IntegerField(help_text="Points stored before downsampling.")
    last = serializers.DictField(allow_null=True, help_text="The newest stored point {x, y}.")


class MetricSeriesOutput(serializers.Serializer):
    run_id = serializers.IntegerField()
    x = serializers.CharField()
    points = serializers.IntegerField()
    series = SeriesSerializer(many=True)


class RunAlertSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunAlert
        fields = ["id", "kind", "step", "value", "threshold", "message", "created_at"]
        read_only_fields = fields


class EpisodeSerializer(serializers.ModelSerializer):
    """One RL episode = one trajectory of the run (per-episode metrics live on the trajectory)."""

    task = serializers.CharField(source="task.external_id", read_only=True)

    class Meta:
        model = Trajectory
        fields = [
            "id", "task", "env_kind", "status", "final_reward", "validation", "validator", "num_steps",
            "policy_version", "metadata", "created_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields


class PresetSerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    algorithm = serializers.CharField()
    mode = serializers.CharField()
    start_profile = serializers.CharField(
        help_text="The start model these defaults are for: embedded, hf_vlm or endpoint."
    )
    config = serializers.DictField(
        help_text="The full run config; its fields, labels, help and choices: GET /api/rl/config-schema/."
    )
    notes = serializers.DictField(
        child=serializers.CharField(),
        help_text="Per field (section.field), what this deployment adds to its help (where a default comes from).",
    )


class MetricNameSerializer(serializers.Serializer):
    name = serializers.CharField()
    group = serializers.CharField()
    description = serializers.CharField()
    keyed = serializers.BooleanField()


class EpisodePickSerializer(EpisodeSerializer):
    best_step_reward = serializers.FloatField(read_only=True, default=None)

    class Meta(EpisodeSerializer.Meta):
        fields = [*EpisodeSerializer.Meta.fields, "best_step_reward"]
        read_only_fields = fields


class EpisodePickInput(serializers.Serializer):
    which = serializers.ChoiceField(choices=list(selectors.EPISODE_PICKS), default="latest")
    task = serializers.CharField(required=False, allow_blank=True, default="")
    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)


class CompareInput(serializers.Serializer):
    runs = serializers.CharField(help_text="Comma-separated run ids (2 to 8).")

    def validate_runs(self, value: str) -> list[int]:
        try:
            ids = [int(p) for p in value.split(",") if p.strip()]
        except ValueError as exc:
            raise serializers.ValidationError("give run ids separated by commas") from exc
        ids = list(dict.fromkeys(ids))
        if not 2 <= len(ids) <= 8:
            raise serializers.ValidationError("compare 2 to 8 runs")
        return ids


class CheckpointRowSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["id", "version", "path", "metrics", "is_annotation_model", "created_at"]
        read_only_fields = fields
