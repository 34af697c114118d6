"""`python manage.py check_osworld_tasks --pool NAME`: the no-action check on a pool's OSWorld tasks."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.importers.osworld_check import osworld_tasks_check
from webapp.store.models import Task


class Command(BaseCommand):
    help = (
        "Set up each enabled OSWorld task of the pool on a real desktop and evaluate it with no action; "
        "disable those that already pass or whose set-up fails, with the reason."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--pool", required=True)

    def handle(self, *args: Any, pool: str, **options: Any) -> None:
        ids = list(Task.objects.filter(pool__name=pool).values_list("pk", flat=True))
        if not ids:
            raise CommandError(f"no tasks in a pool named {pool!r}")
        checks = osworld_tasks_check(task_ids=ids)
        for check in checks:
            line = f"{check.external_id}: {check.verdict}" + (f" ({check.detail})" if check.detail else "")
            self.stdout.write(self.style.SUCCESS(line) if check.verdict == "ok" else self.style.WARNING(line))
        disabled = sum(1 for c in checks if c.verdict != "ok")
        self.stdout.write(f"{len(checks)} task(s) checked, {disabled} disabled")
