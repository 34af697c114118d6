"""Runs an `EnvHost` inside a Celery worker started with FLYWHEEL_ENV_HOST=<name>.

Such a worker consumes its own queue `env.<name>` (start it with `-Q env.<name>` and a threads or solo
pool, so every task reaches the same process and its environments). Django sends each call for a
leased env to the queue of the worker that hosts it (`services.env_call`).
"""

from __future__ import annotations

import logging
import os

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from workers.envs.factory import FACTORIES, parse_warm_pool, shutdown_shared
from workers.envs.host import EnvHost
from workers.envs.leases import LeaseRegistry, redis_client

log = logging.getLogger(__name__)
_host: EnvHost | None = None


def host_name() -> str | None:
    return os.environ.get("FLYWHEEL_ENV_HOST") or None


def current_host() -> EnvHost:
    if _host is None:
        raise RuntimeError("this worker hosts no environments (start it with FLYWHEEL_ENV_HOST=<name>)")
    return _host


@worker_ready.connect
def _start_host(**_: object) -> None:
    global _host
    name = host_name()
    if name is None or _host is not None:
        return
    registry = LeaseRegistry(redis_client(settings.REDIS_URL), prefix=settings.FLEET_REDIS_PREFIX)
    _host = EnvHost(
        registry=registry,
        worker=name,
        factories=FACTORIES,
        warm=parse_warm_pool(settings.FLEET_WARM_POOL),
        capacity=parse_warm_pool(settings.FLEET_CAPACITY) or None,
        period_s=settings.FLEET_HOST_PERIOD_S,
    )
    _host.start()
    log.info("env host %s started: warm pool %s", name, _host.warm)


@worker_shutdown.connect
def _stop_host(**_: object) -> None:
    global _host
    if _host is not None:
        _host.shutdown()
        shutdown_shared()
        _host = None
