"""`python manage.py osworld_mirror --examples DIR [--dest DIR] [--list]`: fill the local mirror of
OSWorld's task files (workers/envs/osworld/mirror.py) on a machine that has network."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workers.envs.osworld.mirror import examples_urls, fill_mirror


class Command(BaseCommand):
    help = (
        "Fetch every file OSWorld's task files download (set-up downloads, cloud_file getters) into "
        "the mirror directory (default OSWORLD_MIRROR_DIR), as <host>/<path>; files already there are kept."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--examples", required=True, help="OSWorld's evaluation_examples (or a task folder)"
        )
        parser.add_argument("--dest", default=os.environ.get("OSWORLD_MIRROR_DIR", ""))
        parser.add_argument("--list", action="store_true", help="print the URLs, fetch nothing")

    def handle(self, *args: Any, examples: str, dest: str, list: bool, **options: Any) -> None:
        folder = Path(examples)
        if not folder.is_dir():
            raise CommandError(f"--examples {examples!r} is not a directory")
        urls = examples_urls(folder)
        if list:
            for url in urls:
                self.stdout.write(url)
            self.stdout.write(f"{len(urls)} file(s)")
            return
        if not dest:
            raise CommandError("name the mirror: --dest DIR or OSWORLD_MIRROR_DIR")
        Path(dest).mkdir(parents=True, exist_ok=True)
        report = fill_mirror(urls, Path(dest))
        for url, why in report.failed:
            self.stdout.write(self.style.WARNING(f"failed: {url}: {why}"))
        self.stdout.write(
            f"{len(urls)} file(s): {report.fetched} fetched, {report.present} already there, "
            f"{len(report.failed)} failed; sessions read them with OSWORLD_MIRROR_DIR={dest}"
        )
        if report.failed:
            raise CommandError(f"{len(report.failed)} file(s) could not be fetched")
