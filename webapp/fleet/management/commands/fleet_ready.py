"""`manage.py fleet_ready [--timeout S] [--queue Q ...] [--kind K ...]`: wait until the install can
take work — a live worker on each Celery queue and an environment of each warm-pool kind up — saying
what it still waits for as that changes. `make up` calls it before it says "up", so a researcher who
launches at once is not refused for workers that are still starting.

Defaults: the queues `make up` starts (settings.FLYWHEEL_QUEUES, with the RL queues as configured)
and the kinds of FLEET_WARM_POOL with at least one environment. Exits 0 when ready, 1 when the
timeout passes first (naming what is missing).
"""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.fleet.selectors import fleet_not_ready
from workers.envs.factory import parse_warm_pool

POLL_S = 1.0


def default_queues() -> list[str]:
    renamed = {"rollout": settings.RL_ROLLOUT_QUEUE, "train": settings.RL_TRAIN_QUEUE}
    return list(dict.fromkeys(renamed.get(q, q) for q in settings.FLYWHEEL_QUEUES))


def default_kinds() -> list[str]:
    return [kind for kind, n in parse_warm_pool(settings.FLEET_WARM_POOL).items() if n > 0]


class Command(BaseCommand):
    help = "Wait until every Celery queue has a live worker and every warm-pool kind an environment."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait at most")
        parser.add_argument("--queue", action="append", default=None, help="a queue to wait for (repeatable)")
        parser.add_argument("--kind", action="append", default=None, help="an environment kind (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        timeout = float(options["timeout"])
        if not 0 <= timeout <= 3600:
            raise CommandError("--timeout must be between 0 and 3600 seconds")
        queues = options["queue"] or default_queues()
        kinds = options["kind"] or default_kinds()
        deadline, said = time.monotonic() + timeout, None
        while True:
            try:
                missing = fleet_not_ready(queues, kinds)
            except redis.RedisError as exc:
                missing = [f"Redis ({type(exc).__name__})"]
            if not missing:
                self.stdout.write("   the workers and environments are ready")
                return
            if time.monotonic() >= deadline:
                raise CommandError(f"still starting after {timeout:g} s: {', '.join(missing)}")
            if missing != said:
                self.stdout.write(f"   waiting for {', '.join(missing)}")
                said = missing
            time.sleep(POLL_S)
