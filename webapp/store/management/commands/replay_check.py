"""`manage.py replay_check [--run ID] [--source rl] [--ids 1,2] [--limit N] [--jsonl FILE]`: re-run
stored trajectories from their task and seed in fresh in-process environments and compare each
reward with the stored one. `--jsonl` replays the trajectories of an export instead: the native
JSONL (`trajectories.jsonl`) or the export's zip archive holding it.

Prints one JSON line per trajectory and a summary line last ({checked, same, differs, skipped});
exits 1 when any differs. Environments run in this process (MiniWoB++ in Chromium, desktops on
Xvfb), so run it where `make up` runs its env hosts.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.models import Trajectory, TrajectoryStatus
from webapp.store.replay import ReplayResult, record_replay_check, trajectory_replay_check

JSONL_MEMBER = "trajectories.jsonl"  # the native JSONL export's name inside its archive


def exported_records(path: Path) -> Iterator[dict[str, Any]]:
    """The trajectory records of an exported native JSONL file, or of the export zip holding it."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                if JSONL_MEMBER not in archive.namelist():
                    raise CommandError(f"{path} holds no {JSONL_MEMBER} (export it in the jsonl format)")
                with archive.open(JSONL_MEMBER) as member:
                    yield from _lines(io.TextIOWrapper(member, encoding="utf-8"), path)
                return
        with path.open(encoding="utf-8") as fh:
            yield from _lines(fh, path)
    except (OSError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None


def _lines(lines: Any, path: Path) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise CommandError(f"{path} line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise CommandError(f"{path} line {number}: not a trajectory object")
        yield record


class Command(BaseCommand):
    help = "Replay stored (or exported) trajectories from their seed and compare rewards."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--run", type=int, help="only this RL run's trajectories")
        parser.add_argument("--source", help="only this source (rl, annotation, import, ...)")
        parser.add_argument("--ids", help="comma-separated trajectory ids")
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--jsonl", type=Path, help="an export's trajectories.jsonl (or its zip) instead")

    def handle(self, *args: Any, run: int | None, source: str | None, ids: str | None, limit: int,
               jsonl: Path | None, **options: Any) -> None:  # fmt: skip
        counts: Counter[str] = Counter()
        for result in self._results(run, source, ids, max(limit, 0), jsonl):
            counts[result.verdict] += 1
            self.stdout.write(json.dumps(result.to_dict()))
        summary = {"checked": sum(counts.values()), **{k: counts[k] for k in ("same", "differs", "skipped")}}
        self.stdout.write(json.dumps(summary))
        if counts["differs"]:
            raise CommandError(f"{counts['differs']} trajectories replay to a different reward")

    def _results(
        self, run: int | None, source: str | None, ids: str | None, limit: int, jsonl: Path | None
    ) -> Iterator[ReplayResult]:
        if jsonl is not None:
            for n, record in enumerate(exported_records(jsonl)):
                if n >= limit:
                    return
                yield record_replay_check(record)
            return
        qs = Trajectory.objects.filter(status=TrajectoryStatus.COMPLETED).order_by("-pk")
        if run is not None:
            qs = qs.filter(run_id=run)
        if source:
            qs = qs.filter(source=source)
        if ids:
            try:
                qs = qs.filter(pk__in=[int(i) for i in ids.split(",") if i.strip()])
            except ValueError as exc:
                raise CommandError(f"--ids takes comma-separated integers: {exc}") from None
        for trajectory in qs[:limit]:
            yield trajectory_replay_check(trajectory=trajectory)
