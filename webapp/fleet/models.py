"""Durable record of the environment fleet. Redis holds live state (workers/envs/leases.py); these
rows are written from its event stream in batches, so history survives a Redis loss."""

from __future__ import annotations

from django.db import models


class EnvRecord(models.Model):
    env_id = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=16)
    worker = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=16, default="idle")
    boot_s = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} env {self.env_id} ({self.state})"


class LeaseRecord(models.Model):
    lease_id = models.CharField(max_length=64, unique=True)
    env_id = models.CharField(max_length=64, db_index=True)
    kind = models.CharField(max_length=16)
    owner = models.CharField(
        max_length=200, blank=True, help_text="e.g. annotation:<session id> or rl:<run id>"
    )
    task = models.CharField(max_length=64, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True, help_text="released, reclaimed or crashed")

    class Meta:
        ordering = ["-acquired_at"]

    def __str__(self) -> str:
        return f"lease {self.lease_id} of {self.env_id} ({self.outcome or 'active'})"
