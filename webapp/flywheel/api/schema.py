"""What the flywheel endpoints answer (drf-spectacular): the shapes `webapp/flywheel/selectors.py`
builds. Nested records the page reads whole (a dataset's card, a job's params and result) are objects."""

from __future__ import annotations

from rest_framework import serializers


class Dataset(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    filters = serializers.DictField()
    sft = serializers.IntegerField()
    ct = serializers.IntegerField()
    prefixes = serializers.IntegerField()
    v1_rate = serializers.FloatField(allow_null=True)
    card = serializers.DictField()
    created_at = serializers.DateTimeField()


class Job(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    progress = serializers.FloatField()
    done_units = serializers.IntegerField()
    total_units = serializers.IntegerField()
    params = serializers.DictField()
    result = serializers.DictField()
    error = serializers.CharField(allow_blank=True)
    checkpoint = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class CheckpointBrief(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.CharField()
    parent = serializers.CharField(allow_null=True)
    metrics = serializers.DictField()
    notes = serializers.CharField(allow_blank=True)
    is_annotation_model = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class PoolBrief(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    validation_mode = serializers.CharField()


class Overview(serializers.Serializer):
    annotation_model = CheckpointBrief(allow_null=True)
    rl_start = CheckpointBrief(allow_null=True)
    datasets = Dataset(many=True)
    last_sft = CheckpointBrief(allow_null=True)
    last_merge = CheckpointBrief(allow_null=True)
    last_rl = serializers.DictField(
        allow_null=True, help_text="{id, name, status, episodes_done, updates_done}"
    )
    v1_by_checkpoint = serializers.ListField(
        child=serializers.DictField(), help_text="[{checkpoint, n, v1, rate}]"
    )
    jobs = Job(many=True)
    checkpoints = serializers.ListField(child=serializers.CharField())
    pools = PoolBrief(many=True)
    job_kinds = serializers.ListField(child=serializers.CharField())
    unvalidated = serializers.IntegerField()


class ExportStarted(serializers.Serializer):
    export_job = serializers.IntegerField()
    status = serializers.CharField()
    filters = serializers.DictField()


class PoolValidation(serializers.Serializer):
    pool = serializers.IntegerField()
    mode = serializers.CharField()
    judge_url = serializers.CharField(allow_blank=True)
    judge_model = serializers.CharField(allow_blank=True)
    keep_failure_prefix = serializers.BooleanField()


class PoolDifficulty(serializers.Serializer):
    pool = PoolBrief()
    buckets = serializers.DictField(child=serializers.IntegerField())
    tasks = serializers.ListField(child=serializers.DictField())
    history = serializers.ListField(
        child=serializers.DictField(), help_text="[{id, created_at, buckets, mean_success}]"
    )


class ValidateCounts(serializers.Serializer):
    validated = serializers.IntegerField()
    v1 = serializers.IntegerField()
    pending = serializers.IntegerField()
    errors = serializers.IntegerField()


class Promoted(serializers.Serializer):
    checkpoint = serializers.CharField()
    targets = serializers.ListField(child=serializers.CharField())
