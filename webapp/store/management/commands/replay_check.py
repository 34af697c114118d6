"""`manage.py replay_check [--run ID] [--source rl] [--ids 1,2] [--limit N]`: re-run stored trajectories
from their task and seed in fresh in-process environments and compare each reward with the stored one.

Prints one JSON line per trajectory and a summary line last ({checked, same, differs, skipped});
exits 1 when any differs. Environments run in this process (MiniWoB++ in Chromium, desktops on
Xvfb), so run it where `make up` runs its env hosts.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.models import Trajectory, TrajectoryStatus
from webapp.store.replay import trajectory_replay_check


class Command(BaseCommand):
    help = "Replay stored trajectories from their seed and compare rewards."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--run", type=int, help="only this RL run's trajectories")
        parser.add_argument("--source", help="only this source (rl, annotation, import, ...)")
        parser.add_argument("--ids", help="comma-separated trajectory ids")
        parser.add_argument("--limit", type=int, default=20)

    def handle(self, *args: Any, run: int | None, source: str | None, ids: str | None, limit: int,
               **options: Any) -> None:  # fmt: skip
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
        counts: Counter[str] = Counter()
        for trajectory in qs.select_related("task")[: max(limit, 0)]:
            result = trajectory_replay_check(trajectory=trajectory)
            counts[result.verdict] += 1
            self.stdout.write(json.dumps(result.to_dict()))
        summary = {"checked": sum(counts.values()), **{k: counts[k] for k in ("same", "differs", "skipped")}}
        self.stdout.write(json.dumps(summary))
        if counts["differs"]:
            raise CommandError(f"{counts['differs']} trajectories replay to a different reward")
