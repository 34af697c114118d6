from django.contrib import admin

from webapp.fleet.models import EnvRecord, LeaseRecord


@admin.register(EnvRecord)
class EnvRecordAdmin(admin.ModelAdmin):
    list_display = ["env_id", "kind", "worker", "state", "boot_s", "updated_at"]
    list_filter = ["kind", "state"]
    search_fields = ["env_id", "worker"]


@admin.register(LeaseRecord)
class LeaseRecordAdmin(admin.ModelAdmin):
    list_display = ["lease_id", "env_id", "kind", "owner", "task", "acquired_at", "ended_at", "outcome"]
    list_filter = ["kind", "outcome"]
    search_fields = ["lease_id", "env_id", "owner"]
