"""`manage.py import_tasks --pool NAME [--create-pool] [PATH ...] [--miniwob [NAME ...]] [--format F]`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.store.importers import FORMATS, TaskImportError, task_import_by_file


class Command(BaseCommand):
    help = (
        "Import tasks into a pool from OSWorld JSON files, folders (recursive) or archives (.zip, .tar.gz), "
        "JSONL / CSV task lists, and MiniWoB++ tasks from the installed wheel. Each file is imported whole or "
        "refused: the good files are imported, the bad ones are printed with their issues (nothing is imported "
        "when no file is good). Re-importing an id updates that task."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="Files, folders or archives.")
        parser.add_argument("--pool", required=True, help="Name of the task pool to import into.")
        parser.add_argument(
            "--create-pool", action="store_true", help="Create the pool if it does not exist."
        )
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="auto",
            help="Input format; auto picks by extension (.json OSWorld, .jsonl, .csv).",
        )
        parser.add_argument(
            "--miniwob",
            nargs="*",
            metavar="NAME",
            default=None,
            help=(
                "Import MiniWoB++ tasks from the wheel: the named ones, or every task when no name is given. "
                "Put PATHs before --miniwob, since the names it takes run to the end of the line."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result, refused = task_import_by_file(
                pool_name=options["pool"],
                create_pool=options["create_pool"],
                paths=options["paths"],
                fmt=options["format"],
                miniwob=options["miniwob"],
            )
        except TaskImportError as exc:
            for issue in exc.issues:
                self.stderr.write(str(issue))
            raise CommandError(f"nothing imported: {len(exc.issues)} issue(s) listed above") from exc
        pool_note = " (pool created)" if result.pool_created else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"pool {options['pool']!r}{pool_note}: {result.created} created, {result.updated} updated"
            )
        )
        if refused:
            files = sorted({issue.file.split("[")[0] for issue in refused})
            for issue in refused:
                self.stderr.write(str(issue))
            self.stdout.write(
                self.style.WARNING(f"{len(files)} file(s) refused, {len(refused)} issue(s) listed on stderr")
            )
        if result.unsupported:
            self.stdout.write(
                self.style.WARNING(
                    f"{result.unsupported} task(s) cannot run locally and were imported disabled; "
                    "see their unsupported reasons in the admin"
                )
            )
