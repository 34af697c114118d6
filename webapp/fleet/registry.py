"""This process's client of the fleet's Redis lease registry (workers.envs.leases), shared by the
fleet's services, its upkeep jobs and its readers."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from workers.envs.leases import LeaseRegistry, redis_client


@lru_cache(maxsize=1)
def registry() -> LeaseRegistry:
    return LeaseRegistry(redis_client(settings.REDIS_URL), prefix=settings.FLEET_REDIS_PREFIX)
