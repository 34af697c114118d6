"""Trajectory filters shared by the list endpoint, the streamed export and export jobs."""

from __future__ import annotations

import django_filters
from django.core.validators import RegexValidator
from django.db.models import QuerySet

from webapp.store.models import ReviewState, Route, Trajectory, TrajectorySource, TrajectoryStatus


class NumberInFilter(django_filters.BaseInFilter, django_filters.NumberFilter):
    """Comma-separated ids: `?tasks=1,2,3`."""


class TrajectoryFilter(django_filters.FilterSet):
    pool = django_filters.NumberFilter(field_name="task__pool_id")
    pool_name = django_filters.CharFilter(field_name="task__pool__name")
    task = django_filters.NumberFilter(field_name="task_id")
    tasks = NumberInFilter(field_name="task_id")
    task_external_id = django_filters.CharFilter(field_name="task__external_id")
    source = django_filters.MultipleChoiceFilter(choices=TrajectorySource.choices)
    status = django_filters.MultipleChoiceFilter(choices=TrajectoryStatus.choices)
    route = django_filters.MultipleChoiceFilter(choices=Route.choices)
    review_state = django_filters.MultipleChoiceFilter(choices=ReviewState.choices)
    validation = django_filters.NumberFilter(field_name="validation")
    validated = django_filters.BooleanFilter(field_name="validation", lookup_expr="isnull", exclude=True)
    checkpoint = django_filters.CharFilter(field_name="checkpoint__version")
    policy_version = django_filters.CharFilter(field_name="policy_version")
    run = django_filters.NumberFilter(field_name="run_id")
    annotator = django_filters.CharFilter(field_name="annotator__username")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    min_reward = django_filters.NumberFilter(field_name="final_reward", lookup_expr="gte")
    # Members of a flywheel dataset iteration: `?dataset=12` or one split `?dataset=12:sft`.
    dataset = django_filters.CharFilter(
        method="filter_dataset",
        validators=[RegexValidator(r"^\d+(:(sft|ct))?$", "expected <dataset id> or <dataset id>:sft|ct")],
    )

    class Meta:
        model = Trajectory
        fields: list[str] = []

    def filter_dataset(self, queryset: QuerySet[Trajectory], name: str, value: str) -> QuerySet[Trajectory]:
        dataset_id, _, split = value.partition(":")
        lookup: dict[str, object] = {"flywheel_memberships__dataset_id": int(dataset_id)}
        if split:
            lookup["flywheel_memberships__split"] = split
        # One filter() call: the id and split conditions apply to the same membership row.
        return queryset.filter(**lookup)


# Trajectories an export leaves out unless the `status` filter asks for them: still being recorded,
# or given up half-way (a partial episode is not a demonstration).
UNFINISHED_STATUSES = (TrajectoryStatus.RUNNING, TrajectoryStatus.ABANDONED)


def export_queryset(filterset: TrajectoryFilter) -> QuerySet[Trajectory]:
    """The filtered trajectories of an export (a valid filterset): without a `status` filter, only
    finished ones (completed, failed, crashed)."""
    qs = filterset.qs
    if not filterset.form.cleaned_data.get("status"):
        qs = qs.exclude(status__in=UNFINISHED_STATUSES)
    return qs
