"""Django admin for runs, their metrics and alerts (read-mostly: control goes through the API)."""

from __future__ import annotations

from django.contrib import admin

from rl_control.models import Run, RunAlert, RunMetric


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "status", "algorithm", "mode", "preset", "updates_done", "episodes_done",
                    "headline_success", "created_by", "created_at"]  # fmt: skip
    list_filter = ["status", "algorithm", "mode", "preset"]
    search_fields = ["name", "error"]
    raw_id_fields = ["parent", "start_checkpoint", "pool", "created_by"]
    readonly_fields = ["status", "error", "updates_done", "episodes_done", "policy_version", "samples",
                       "headline_success", "running_seconds", "created_at", "updated_at", "started_at",
                       "resumed_at", "finished_at"]  # fmt: skip


@admin.register(RunMetric)
class RunMetricAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "name", "step", "policy_version", "samples", "wall", "value"]
    list_filter = ["name"]
    search_fields = ["name"]
    raw_id_fields = ["run"]
    # Runs hold up to millions of rows: no full count on every page.
    show_full_result_count = False


@admin.register(RunAlert)
class RunAlertAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "kind", "step", "value", "threshold", "created_at"]
    list_filter = ["kind"]
    search_fields = ["message"]
    raw_id_fields = ["run"]
