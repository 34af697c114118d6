"""Django admin for the store: pools, tasks (bulk enable/disable/re-score/export), trajectories with
their steps, checkpoints and export jobs (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from webapp.store import job_services, services
from webapp.store.api.filters import TrajectoryFilter
from webapp.store.importers.services import tasks_set_enabled
from webapp.store.models import Checkpoint, ExportJob, Step, Task, TaskPool, Trajectory
from webapp.store.names import validate_segment

# Difficulty buckets over the 0..1 rubric score: (slug, label, lower bound, upper bound).
DIFFICULTY_BUCKETS = [
    ("easy", "easy (< 0.33)", 0.0, 0.33),
    ("medium", "medium (0.33–0.66)", 0.33, 0.66),
    ("hard", "hard (≥ 0.66)", 0.66, 1.01),
]
# More tasks than this in one "export selection" would make one export job per task too many.
EXPORT_PER_TASK_LIMIT = 50


def _thumbnail(step: Step, height: int) -> SafeString | str:
    if not step.screenshot:
        return "—"
    return format_html(
        '<a href="{0}" target="_blank"><img src="{0}" alt="step {1}" style="max-height:{2}px"></a>',
        step.screenshot.url,
        step.index,
        height,
    )


class TaskPoolForm(forms.ModelForm):
    """Pool names become path segments (exports): one plain segment, like the importers require."""

    class Meta:
        model = TaskPool
        fields = "__all__"  # noqa: DJ007 (the admin narrows them with its fieldsets)

    def clean_name(self) -> str:
        validate_segment(self.cleaned_data["name"])
        return self.cleaned_data["name"]


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = "__all__"  # noqa: DJ007 (the admin narrows them with its fieldsets)

    def clean_external_id(self) -> str:
        validate_segment(self.cleaned_data["external_id"])
        return self.cleaned_data["external_id"]


@admin.register(TaskPool)
class TaskPoolAdmin(admin.ModelAdmin):
    form = TaskPoolForm
    list_display = [
        "name",
        "task_count",
        "enabled_count",
        "unsupported_count",
        "validation_mode",
        "candidates_n",
        "disk_mb",
    ]
    search_fields = ["name", "description"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_tasks=Count("tasks"),
                n_enabled=Count("tasks", filter=Q(tasks__enabled=True)),
                n_unsupported=Count("tasks", filter=Q(tasks__supported=False)),
            )
        )

    @admin.display(description="tasks", ordering="n_tasks")
    def task_count(self, pool: TaskPool) -> int:
        return pool.n_tasks

    @admin.display(description="enabled", ordering="n_enabled")
    def enabled_count(self, pool: TaskPool) -> int:
        return pool.n_enabled

    @admin.display(description="unsupported", ordering="n_unsupported")
    def unsupported_count(self, pool: TaskPool) -> int:
        return pool.n_unsupported


class DifficultyBucketFilter(admin.SimpleListFilter):
    title = "difficulty"
    parameter_name = "difficulty_bucket"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(slug, label) for slug, label, _, _ in DIFFICULTY_BUCKETS]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        for slug, _, low, high in DIFFICULTY_BUCKETS:
            if self.value() == slug:
                return queryset.filter(difficulty__gte=low, difficulty__lt=high)
        return queryset


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    list_display = [
        "external_id", "pool", "env_kind", "source", "enabled", "supported_flag", "difficulty", "importance",
        "success_rate", "attempts", "short_instruction",
    ]  # fmt: skip
    list_filter = ["pool", "env_kind", "source", "enabled", "supported", DifficultyBucketFilter]
    list_select_related = ["pool"]
    search_fields = ["external_id", "instruction"]
    readonly_fields = ["difficulty", "supported", "unsupported_reasons_text", "attempts", "successes", "success_rate",
                       "created_at", "updated_at"]  # fmt: skip
    actions = ["enable_tasks", "disable_tasks", "rescore_difficulty", "export_selection"]
    fieldsets = [
        (None, {"fields": ["pool", "external_id", "instruction", "env_kind", "source", "tags", "enabled", "importance"]}),
        ("Support", {"fields": ["supported", "unsupported_reasons_text"]}),
        ("Difficulty (seed 000 §2.4.1 rubric)", {"fields": [
            "difficulty_steps", "difficulty_cross_page", "difficulty_prerequisites", "difficulty_exceptions", "difficulty",
        ]}),
        ("Definition", {"fields": ["setup", "verifier"], "classes": ["collapse"]}),
        ("Statistics", {"fields": ["attempts", "successes", "success_rate", "created_at", "updated_at"]}),
    ]  # fmt: skip

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """Also match tasks carrying the search term as one of their tags."""
        qs, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term:
            qs = qs | queryset.filter(tags__contains=[term])
        return qs, may_have_duplicates

    @admin.display(description="supported", boolean=False, ordering="supported")
    def supported_flag(self, task: Task) -> SafeString | str:
        if task.supported:
            return "yes"
        reasons = "; ".join(str(r) for r in task.unsupported_reasons) or "no reason recorded"
        return format_html(
            '<strong style="color:#b00" title="{}">UNSUPPORTED</strong>: {}', reasons, reasons[:120]
        )

    @admin.display(description="instruction")
    def short_instruction(self, task: Task) -> str:
        return task.instruction if len(task.instruction) <= 80 else task.instruction[:79] + "…"

    @admin.display(description="unsupported reasons")
    def unsupported_reasons_text(self, task: Task) -> str:
        return "\n".join(str(r) for r in task.unsupported_reasons) or "—"

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        if not obj.supported:
            obj.enabled = False  # an unsupported task cannot be handed out
        super().save_model(request, obj, form, change)
        services.task_rescore(task=obj)

    @admin.action(description="Enable selected tasks (supported ones)")
    def enable_tasks(self, request: HttpRequest, queryset: QuerySet) -> None:
        changed, skipped = tasks_set_enabled(
            task_ids=list(queryset.values_list("pk", flat=True)), enabled=True
        )
        self.message_user(request, f"{changed} task(s) enabled.")
        if skipped:
            self.message_user(request, f"{skipped} unsupported task(s) left disabled.", messages.WARNING)

    @admin.action(description="Disable selected tasks")
    def disable_tasks(self, request: HttpRequest, queryset: QuerySet) -> None:
        changed, _ = tasks_set_enabled(task_ids=list(queryset.values_list("pk", flat=True)), enabled=False)
        self.message_user(request, f"{changed} task(s) disabled.")

    @admin.action(description="Re-score difficulty from the rubric")
    def rescore_difficulty(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = 0
        for task in queryset:
            services.task_rescore(task=task)
            count += 1
        self.message_user(request, f"difficulty re-scored for {count} task(s).")

    @admin.action(description="Export trajectories of selected tasks (native JSONL archive)")
    def export_selection(self, request: HttpRequest, queryset: QuerySet) -> None:
        task_ids = sorted(queryset.values_list("pk", flat=True))
        if "tasks" in TrajectoryFilter.base_filters:
            # One job over the whole selection when the filter takes a list of task ids.
            jobs = [job_services.export_job_create(
                user=request.user, format="jsonl", filters={"tasks": ",".join(map(str, task_ids))}
            )]  # fmt: skip
        elif len(task_ids) > EXPORT_PER_TASK_LIMIT:
            self.message_user(
                request,
                f"{len(task_ids)} tasks selected; export at most {EXPORT_PER_TASK_LIMIT} at a time, "
                "or export the whole pool from the export page.",
                messages.ERROR,
            )
            return
        else:
            jobs = [
                job_services.export_job_create(user=request.user, format="jsonl", filters={"task": pk})
                for pk in task_ids
            ]
        listing = reverse("admin:store_exportjob_changelist")
        self.message_user(
            request,
            format_html(
                '{} export job(s) queued: {}. Follow them under <a href="{}">export jobs</a>.',
                len(jobs),
                ", ".join(f"#{j.pk}" for j in jobs),
                listing,
            ),
        )


class StepInline(admin.TabularInline):
    model = Step
    fields = ["index", "thumbnail", "decision", "thought", "action_text", "parse_error", "reward", "done"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["index"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="screenshot")
    def thumbnail(self, step: Step) -> SafeString | str:
        return _thumbnail(step, 90)


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = [
        "id", "task", "source", "status", "env_kind", "num_steps", "final_reward", "validation", "route",
        "review_state", "annotator", "policy_version", "created_at",
    ]  # fmt: skip
    list_filter = ["source", "status", "route", "validation", "review_state", "env_kind"]
    list_select_related = ["task__pool", "annotator"]
    search_fields = [
        "=id",
        "task__external_id",
        "task__instruction",
        "instruction",
        "annotator__username",
        "policy_version",
    ]
    raw_id_fields = ["task", "checkpoint", "annotator", "run"]
    readonly_fields = ["num_steps", "created_at", "finished_at", "validated_at"]
    date_hierarchy = "created_at"
    inlines = [StepInline]


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["id", "trajectory", "index", "decision", "short_action", "reward", "done", "thumbnail"]
    list_filter = ["decision", "done", "trajectory__source"]
    search_fields = ["=trajectory__id", "thought", "action_text", "human_thought_verbatim"]
    raw_id_fields = ["trajectory"]
    readonly_fields = ["preview", "created_at"]

    @admin.display(description="action")
    def short_action(self, step: Step) -> str:
        return step.action_text[:80]

    @admin.display(description="screenshot")
    def thumbnail(self, step: Step) -> SafeString | str:
        return _thumbnail(step, 60)

    @admin.display(description="screenshot preview")
    def preview(self, step: Step) -> SafeString | str:
        return _thumbnail(step, 400)


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = [
        "version",
        "parent",
        "run",
        "is_annotation_model",
        "profile",
        "path",
        "endpoint_url",
        "created_at",
    ]
    list_filter = ["is_annotation_model", "profile"]
    search_fields = ["version", "path", "notes", "endpoint_url"]
    raw_id_fields = ["parent", "run"]
    actions = ["promote_to_annotation_model"]

    @admin.action(description="Make the annotation model (new annotation sessions use it)")
    def promote_to_annotation_model(self, request: HttpRequest, queryset: QuerySet[Checkpoint]) -> None:
        from django.conf import settings

        from webapp.store.checkpoints import CheckpointError, checkpoint_promote_annotation

        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one checkpoint to promote.", level=messages.ERROR)
            return
        checkpoint = queryset.get()
        try:
            checkpoint_promote_annotation(checkpoint=checkpoint, push_to=settings.POLICY_BASE_URL)
        except CheckpointError as exc:
            self.message_user(request, f"Promoted in the database, but: {exc}", level=messages.WARNING)
            return
        self.message_user(request, f"{checkpoint.version} now proposes actions to annotators.")


@admin.register(ExportJob)
class ExportJobAdmin(admin.ModelAdmin):
    """Read-only: jobs are created by the API or the task action, and run by the export worker."""

    list_display = [
        "id",
        "format",
        "status",
        "progress_text",
        "created_by",
        "created_at",
        "finished_at",
        "download",
    ]
    list_filter = ["status", "format"]
    search_fields = ["=id", "created_by__username"]
    readonly_fields = [
        "created_by", "format", "filters", "status", "progress_text", "total_trajectories", "done_trajectories",
        "download", "error", "created_at", "started_at", "finished_at",
    ]  # fmt: skip
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="progress", ordering="progress")
    def progress_text(self, job: ExportJob) -> str:
        return f"{job.progress:.0f}% ({job.done_trajectories}/{job.total_trajectories})"

    @admin.display(description="archive")
    def download(self, job: ExportJob) -> SafeString | str:
        if not job.archive:
            return "—"
        try:
            url = reverse("api-export-job-download", args=[job.pk])
        except NoReverseMatch:
            url = job.archive.url
        return format_html('<a href="{}">download</a>', url)
