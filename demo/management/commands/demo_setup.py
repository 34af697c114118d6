"""`manage.py demo_setup`: demo users per role, demo MiniWoB++ and OSWorld pools, assignments."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from demo.setup import demo_setup
from webapp.store.importers import TaskImportError


class Command(BaseCommand):
    help = (
        "Create (idempotently) demo users for every role, demo task pools, and the annotator's assignments."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            summary = demo_setup()
        except TaskImportError as exc:
            for issue in exc.issues:
                self.stderr.write(str(issue))
            raise CommandError("demo setup failed; nothing was changed") from exc
        for pool, result in summary.pools.items():
            note = f", {result.unsupported} unsupported (disabled)" if result.unsupported else ""
            self.stdout.write(f"pool {pool}: {result.created} created, {result.updated} updated{note}")
        self.stdout.write(f"OSWorld examples from {summary.osworld_dir}")
        self.stdout.write(
            f"annotator has {summary.assigned_total} demo task(s) assigned ({summary.assigned_new} new)"
        )
        self.stdout.write(
            self.style.WARNING("Demo logins (development only — change or delete in production):")
        )
        for username, password, roles in summary.logins:
            self.stdout.write(f"  {username:<12} password {password:<12} role {roles}")
