from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html_join

from webapp.flywheel.models import (
    DatasetIteration,
    FlywheelJob,
    PoolRefresh,
    PoolValidation,
    Promotion,
    TaskWeight,
)


@admin.register(PoolValidation)
class PoolValidationAdmin(admin.ModelAdmin):
    list_display = ["pool", "judge_url", "judge_model", "keep_failure_prefix", "updated_at"]


@admin.register(DatasetIteration)
class DatasetIterationAdmin(admin.ModelAdmin):
    list_display = ["version", "name", "sft_count", "ct_count", "prefix_count", "created_at"]
    readonly_fields = ["version", "filters", "card", "sft_count", "ct_count", "prefix_count", "created_by"]


@admin.register(FlywheelJob)
class FlywheelJobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "progress", "checkpoint", "created_at", "finished_at"]
    list_filter = ["kind", "status"]


@admin.register(PoolRefresh)
class PoolRefreshAdmin(admin.ModelAdmin):
    """The pool's difficulty distribution at every refresh (history, newest first)."""

    list_display = ["pool", "created_at", "mean_success", "distribution"]
    list_filter = ["pool"]
    readonly_fields = ["pool", "job", "buckets", "mean_success", "tasks", "created_at"]

    @admin.display(description="tasks per success bucket")
    def distribution(self, obj: PoolRefresh) -> str:
        return format_html_join(" ", "<span title='{} tasks'>{}: <b>{}</b></span>",
                                ((n, b, n) for b, n in obj.buckets.items()))  # fmt: skip


@admin.register(TaskWeight)
class TaskWeightAdmin(admin.ModelAdmin):
    list_display = ["task", "bucket", "success_rate", "attempts", "base_importance", "weight", "updated_at"]
    list_filter = ["bucket", "task__pool"]


@admin.register(Promotion)
class PromotionAdmin(admin.ModelAdmin):
    list_display = ["checkpoint", "target", "created_by", "created_at"]
