"""Django admin for the annotation loop: who works on what (sessions, assignments), reviews and the
think-aloud recordings. Sessions and reviews are read here; they change through the workspace."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from annotation.models import (
    AnnotationSession,
    AsrSettings,
    Assignment,
    AssignmentStatus,
    Review,
    ThinkAloudChunk,
    ThinkAloudRecording,
    Track,
)


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["user", "task", "pool", "track", "status", "success_rate", "created_at"]
    list_filter = ["status", "track", "task__pool", "task__env_kind"]
    search_fields = ["user__username", "task__external_id", "task__instruction"]
    list_select_related = ["user", "task", "task__pool"]
    autocomplete_fields = ["user", "task"]
    actions = ["reopen", "skip", "to_novice", "to_expert"]

    @admin.display(description="pool", ordering="task__pool__name")
    def pool(self, obj: Assignment) -> str:
        return obj.task.pool.name

    @admin.display(description="model success", ordering="task__success_rate")
    def success_rate(self, obj: Assignment) -> str:
        return f"{obj.task.success_rate:.0%}"

    def _set(self, request: HttpRequest, queryset: QuerySet, **fields: str) -> None:
        n = queryset.update(**fields)
        self.message_user(request, f"{n} assignment(s) updated.", messages.SUCCESS)

    @admin.action(description="Reopen (back in the annotator's queue)")
    def reopen(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set(request, queryset, status=AssignmentStatus.ASSIGNED)

    @admin.action(description="Skip (take out of the queue)")
    def skip(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set(request, queryset, status=AssignmentStatus.SKIPPED)

    @admin.action(description="Move to the novice track (outside resources allowed)")
    def to_novice(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set(request, queryset, track=Track.NOVICE)

    @admin.action(description="Move to the expert track")
    def to_expert(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set(request, queryset, track=Track.EXPERT)


@admin.register(AnnotationSession)
class AnnotationSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "task", "status", "track", "obs_version", "policy_model", "lease_env",
                    "created_at", "updated_at"]  # fmt: skip
    list_filter = ["status", "track", "task__pool", "task__env_kind", "policy_model"]
    search_fields = ["user__username", "task__external_id", "lease_env"]
    list_select_related = ["user", "task"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in AnnotationSession._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["id", "trajectory", "reviewer", "verdict", "created_at"]
    list_filter = ["verdict"]
    search_fields = ["reviewer__username", "trajectory__task__external_id"]
    list_select_related = ["reviewer", "trajectory"]
    readonly_fields = [f.name for f in Review._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ThinkAloudChunkInline(admin.TabularInline):
    model = ThinkAloudChunk
    extra = 0
    fields = ["index", "start_clock", "duration_s", "content_type", "size", "transcribed", "error"]
    readonly_fields = fields
    can_delete = False


@admin.register(ThinkAloudRecording)
class ThinkAloudRecordingAdmin(admin.ModelAdmin):
    list_display = ["session", "status", "finished", "audio_s", "attempts", "processing_s", "updated_at"]
    list_filter = ["status", "finished"]
    search_fields = ["session__user__username", "session__task__external_id"]
    readonly_fields = [f.name for f in ThinkAloudRecording._meta.fields]
    inlines = [ThinkAloudChunkInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class AsrSettingsForm(forms.ModelForm):
    class Meta:
        model = AsrSettings
        fields = ["model"]

    def clean_model(self) -> str:
        from annotation.thinkaloud.services import AsrModelRejected, asr_model_check

        model = self.cleaned_data["model"]
        if model:
            try:
                asr_model_check(model)
            except AsrModelRejected as exc:
                raise forms.ValidationError(str(exc)) from None
        return model


@admin.register(AsrSettings)
class AsrSettingsAdmin(admin.ModelAdmin):
    """The think-aloud Whisper model; checked as the API checks it (installed, pinned digests), so a
    model that cannot load is refused with its reason."""

    form = AsrSettingsForm
    list_display = ["model", "updated_by", "updated_at"]
    readonly_fields = ["choices"]
    fields = ["model", "choices"]

    @admin.display(description="models here (measured real-time factor on 2 cores)")
    def choices(self, obj: AsrSettings | None) -> str:
        from workers.asr.models import MODELS, installed

        return "; ".join(
            f"{m.name}: RTF {m.rtf_wall} wall / {m.rtf_cpu} CPU, {m.size_mb} MB, "
            f"{'installed' if installed(m.name) else 'not installed'} ({m.note})"
            for m in MODELS.values()
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not AsrSettings.objects.exists()

    def save_model(self, request: HttpRequest, obj: AsrSettings, form: Any, change: bool) -> None:
        obj.pk, obj.updated_by = 1, request.user
        super().save_model(request, obj, form, change)
