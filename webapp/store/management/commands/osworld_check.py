"""`python manage.py osworld_check [--pool NAME] [--report PATH]`: the independent check of OSWorld
tasks with a reference solution (`webapp.store.importers.osworld_check.osworld_reference_check`).

Each enabled, supported OSWorld task (of the pool, or of every pool) with a reference solution — the
project's scripted one for its own tasks, or an approved annotation trajectory for a task solved by
hand — is set up on fresh desktops and scored with no action and after the solution. Both scores
are recorded on the task (`reference_check`); a task that scores more than 0 with no action is
disabled with the reason. Prints one JSON line per task and a summary line last ({checked, correct,
correct_share, passes_without_action}); `--report` also writes all of it as one JSON file.
`bench osworld` counts the recorded checks of tasks solved by hand in its `correct_share`. Exits
1 when any checked task is not correct (no action 0, solved 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.importers.osworld_check import osworld_reference_check
from webapp.store.models import Task


class Command(BaseCommand):
    help = (
        "Score each OSWorld task with a reference solution with no action and solved, record both on "
        "the task, and disable one that passes with no action."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--pool", help="only this pool's tasks (default: every pool)")
        parser.add_argument("--report", help="also write the records and the summary to this JSON file")

    def handle(self, *args: Any, pool: str | None, report: str | None, **options: Any) -> None:
        tasks = Task.objects.filter(source="osworld")
        if pool is not None:
            tasks = tasks.filter(pool__name=pool)
            if not tasks.exists():
                raise CommandError(f"no OSWorld tasks in a pool named {pool!r}")
        records = osworld_reference_check(task_ids=tasks.values_list("pk", flat=True))
        correct = sum(1 for r in records if r["correct"])
        summary = {
            "checked": len(records),
            "correct": correct,
            "correct_share": round(correct / len(records), 4) if records else None,
            "passes_without_action": sum(1 for r in records if (r["no_action"] or 0) > 0),
        }
        for record in records:
            self.stdout.write(json.dumps(record))
        self.stdout.write(json.dumps(summary))
        if report:
            try:
                Path(report).write_text(json.dumps({"tasks": records, **summary}, indent=1) + "\n")
            except OSError as exc:
                raise CommandError(f"could not write the report {report}: {exc}") from None
        if correct < len(records):
            raise CommandError(f"{len(records) - correct} task(s) not correct (no action 0, solved 1)")
