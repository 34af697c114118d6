"""`manage.py collect_demos --tasks click-test,enter-text --episodes N [--seed-start S]`: store scripted
MiniWoB++ expert episodes as trajectories with source `import` (screenshots in media storage)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.sft_jobs import DEMO_POOL, SftError, demos_collect


class Command(BaseCommand):
    help = "Record scripted-expert MiniWoB++ demonstrations into the trajectory store (source=import)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tasks", required=True, help="comma-separated MiniWoB++ task names")
        parser.add_argument("--episodes", type=int, default=10, help="episodes per task")
        parser.add_argument("--seed-start", dest="seed_start", type=int, default=0)
        parser.add_argument("--pool", default=DEMO_POOL, help="pool for tasks not imported yet")

    def handle(self, *args: Any, tasks: str, episodes: int, seed_start: int, pool: str, **_: Any) -> None:
        names = [t.strip() for t in tasks.split(",") if t.strip()]
        counts: dict[str, list[int]] = {}

        def progress(task: str, seed: int, success: bool) -> None:
            counts.setdefault(task, [0, 0])
            counts[task][0] += int(success)
            counts[task][1] += 1

        try:
            stored = demos_collect(
                task_names=names, episodes=episodes, seed_start=seed_start, pool_name=pool, progress=progress
            )
        except SftError as exc:
            raise CommandError(str(exc)) from exc
        for task, (ok, total) in counts.items():
            self.stdout.write(f"{task}: {ok}/{total} episodes stored")
        self.stdout.write(f"stored {len(stored)} trajectories ({sum(t.num_steps for t in stored)} steps)")
