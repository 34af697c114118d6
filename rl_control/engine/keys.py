"""Redis keys and the Redis client of the engine (prefix settings.RL_REDIS_PREFIX)."""

from __future__ import annotations

from functools import lru_cache

import redis
from django.conf import settings

from workers.envs.leases import redis_client


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis_client(url)


def rds() -> redis.Redis:
    return _client(settings.REDIS_URL)


def key(run_id: int, *parts: object) -> str:
    return ":".join([settings.RL_REDIS_PREFIX, "run", str(run_id), *map(str, parts)])


def version_of(run_id: int, model_version: str) -> int | None:
    """The integer policy version behind a server's `model_version`, which a run's own servers
    report as "run<id>-v7" (rl_control.engine.serving); None when it names no version of this run
    (bare digits could be any run's)."""
    prefix = f"run{run_id}-v"
    if model_version.startswith(prefix) and model_version[len(prefix) :].isdigit():
        return int(model_version[len(prefix) :])
    return None
