"""Output serializers of the store API (input validation lives next to each view)."""

from __future__ import annotations

from rest_framework import serializers

from webapp.store.models import Checkpoint, ExportJob, Step, Task, TaskPool, Trajectory


class TaskPoolSerializer(serializers.ModelSerializer):
    task_count = serializers.IntegerField(read_only=True)
    # the kinds of its enabled, supported tasks: what a run on the pool plays (the launch form's env.kind)
    env_kinds = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = TaskPool
        fields = [
            "id", "name", "description", "candidates_n", "validation_mode", "disk_mb", "task_count", "env_kinds",
            "created_at",
        ]  # fmt: skip


class TaskSerializer(serializers.ModelSerializer):
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Task
        fields = [
            "id", "pool", "external_id", "instruction", "env_kind", "source", "setup", "verifier",
            "difficulty_steps", "difficulty_cross_page", "difficulty_prerequisites", "difficulty_exceptions",
            "difficulty", "importance", "tags", "enabled", "supported", "unsupported_reasons",
            "attempts", "successes", "success_rate", "created_at", "updated_at",
        ]  # fmt: skip


class TaskUpdateSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = [
            "instruction", "difficulty_steps", "difficulty_cross_page", "difficulty_prerequisites",
            "difficulty_exceptions", "importance", "tags", "enabled",
        ]  # fmt: skip


class StepSerializer(serializers.ModelSerializer):
    screenshot = serializers.SerializerMethodField()

    class Meta:
        model = Step
        exclude = ["trajectory"]

    def get_screenshot(self, obj: Step) -> str | None:
        if not obj.screenshot:
            return None
        request = self.context.get("request")
        url = obj.screenshot.url
        return request.build_absolute_uri(url) if request is not None else url


class TrajectorySerializer(serializers.ModelSerializer):
    task = serializers.SlugRelatedField(slug_field="external_id", read_only=True)
    task_id = serializers.IntegerField(read_only=True)
    pool = serializers.CharField(source="task.pool.name", read_only=True)
    instruction = serializers.CharField(
        source="episode_instruction", read_only=True, help_text="The episode's own instruction."
    )
    task_instruction = serializers.CharField(source="task.instruction", read_only=True)
    checkpoint = serializers.SlugRelatedField(slug_field="version", read_only=True, allow_null=True)
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Trajectory
        fields = [
            "id", "task", "task_id", "pool", "instruction", "task_instruction", "env_kind", "source", "checkpoint",
            "policy_version", "annotator", "run", "status", "final_reward", "validation", "validator",
            "validated_at", "route", "review_state", "review_round", "num_steps", "metadata", "created_at",
            "finished_at",
        ]  # fmt: skip


class TrajectoryDetailSerializer(TrajectorySerializer):
    steps = StepSerializer(many=True, read_only=True)
    final_screenshot = serializers.SerializerMethodField(
        help_text="The screen after the last action (for annotation: captured at Finish)."
    )

    class Meta(TrajectorySerializer.Meta):
        fields = [*TrajectorySerializer.Meta.fields, "final_screenshot", "steps"]

    def get_final_screenshot(self, obj: Trajectory) -> str | None:
        if not obj.final_screenshot:
            return None
        request = self.context.get("request")
        url = obj.final_screenshot.url
        return request.build_absolute_uri(url) if request is not None else url


class CheckpointSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(slug_field="version", read_only=True, allow_null=True)
    is_rl_start = serializers.SerializerMethodField(help_text="New RL runs start from it by default.")
    success_note = serializers.SerializerMethodField(help_text="Its measured success on its pool, in words.")

    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "version",
            "parent",
            "path",
            "run",
            "metrics",
            "notes",
            "is_annotation_model",
            "is_rl_start",
            "success_note",
            "created_at",
        ]

    def get_is_rl_start(self, obj: Checkpoint) -> bool:
        if "_rl_start_id" not in self.context:  # one query for a whole list (the context is shared)
            from webapp.flywheel.selectors import rl_start_checkpoint

            self.context["_rl_start_id"] = getattr(rl_start_checkpoint(), "pk", None)
        return bool(obj.pk == self.context["_rl_start_id"])

    def get_success_note(self, obj: Checkpoint) -> str:
        from webapp.store.checkpoints import checkpoint_success_note

        return checkpoint_success_note(obj)


class ExportJobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = ExportJob
        fields = [
            "id", "created_by", "format", "filters", "status", "progress", "total_trajectories",
            "done_trajectories", "error", "download_url", "created_at", "started_at", "finished_at",
        ]  # fmt: skip

    def get_download_url(self, obj: ExportJob) -> str | None:
        if obj.status != "succeeded" or not obj.archive:
            return None
        request = self.context.get("request")
        path = f"/api/export-jobs/{obj.pk}/download/"
        return request.build_absolute_uri(path) if request is not None else path


class SftJobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    base = serializers.SlugRelatedField(slug_field="version", read_only=True)
    result = serializers.SlugRelatedField(slug_field="version", read_only=True)

    class Meta:
        from webapp.store.models import SftJob

        model = SftJob
        fields = [
            "id", "created_by", "base", "version", "filters", "steps", "lr", "batch_size", "status",
            "progress", "examples", "result", "error", "created_at", "started_at", "finished_at",
        ]  # fmt: skip
