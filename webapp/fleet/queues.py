"""The Celery queues as the fleet page and the engine see them (issue 37 items 3 and 4).

- Every Celery worker announces, every ANNOUNCE_PERIOD_S, each queue it consumes and its
  concurrency (`<prefix>:workers:<queue>`, worker name -> "concurrency|expiry"): the RL engine
  divides the rollout and train processes among runs from it (rl_control.engine.share), and the
  fleet page lists who consumes what. A worker on another machine joins by starting with the same
  REDIS_URL; one that dies lapses after ANNOUNCE_TTL_S.
- Every task message carries the time it was sent (header `flywheel_sent`), so the depth and the
  age of the oldest waiting message of each queue are read straight from the broker's Redis lists
  (kombu pushes on the left and workers pop on the right: the oldest message is the last element).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import lru_cache
from typing import Any

import redis
from celery.signals import before_task_publish, worker_ready, worker_shutdown
from django.conf import settings

from webapp.fleet.registry import registry
from workers.envs.leases import redis_client

log = logging.getLogger(__name__)
ANNOUNCE_PERIOD_S = 10.0
ANNOUNCE_TTL_S = 3 * ANNOUNCE_PERIOD_S
SENT_HEADER = "flywheel_sent"
# kombu's Redis transport keeps a queue's priority levels in lists named <queue><SEP><n>
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


def _k(queue: str) -> str:
    return f"{settings.FLEET_REDIS_PREFIX}:workers:{queue}"


def _s(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


@lru_cache(maxsize=2)
def _broker(url: str) -> redis.Redis:
    return redis_client(url)


def broker() -> redis.Redis:
    return _broker(settings.CELERY_BROKER_URL)


# ------------------------------------------------------------------------------------ workers


def worker_announce(*, queue: str, worker: str, concurrency: int, ttl_s: float = ANNOUNCE_TTL_S) -> None:
    """`worker` consumes `queue` with `concurrency` processes (or threads); lapses after `ttl_s`."""
    registry().r.hset(_k(queue), worker, f"{int(concurrency)}|{time.time() + ttl_s:.3f}")


def worker_retire(*, queue: str, worker: str) -> None:
    registry().r.hdel(_k(queue), worker)


def workers_of(queue: str) -> dict[str, int]:
    """{worker name: concurrency} of the live workers consuming `queue`."""
    now, out = time.time(), {}
    for name, raw in registry().r.hgetall(_k(queue)).items():
        concurrency, _, expires = _s(raw).partition("|")
        if float(expires or 0) >= now:
            out[_s(name)] = int(concurrency)
    return out


def announced_queues() -> list[str]:
    prefix = f"{settings.FLEET_REDIS_PREFIX}:workers:"
    return sorted(_s(k)[len(prefix) :] for k in registry().r.scan_iter(f"{prefix}*", count=1000))


# ------------------------------------------------------------------------------------ depths


def queue_depth(queue: str, *, now: float | None = None) -> dict[str, Any]:
    """{queue, depth, oldest_wait_s, workers, concurrency} of one queue, read from the broker."""
    now = time.time() if now is None else now
    r = broker()
    names = [queue, *(f"{queue}{_PRIORITY_SEP}{n}" for n in _PRIORITY_STEPS)]
    pipe = r.pipeline()
    for name in names:
        pipe.llen(name)
        pipe.lindex(name, -1)
    raw = pipe.execute()
    depth, oldest = 0, None
    for n, last in zip(raw[::2], raw[1::2], strict=True):
        depth += int(n)
        sent = _sent_at(last)
        if sent is not None:
            oldest = sent if oldest is None else min(oldest, sent)
    workers = workers_of(queue)
    return {
        "queue": queue,
        "depth": depth,
        "oldest_wait_s": round(max(0.0, now - oldest), 1) if oldest is not None else None,
        "workers": sorted(workers),
        "concurrency": sum(workers.values()),
    }


def _sent_at(message: bytes | None) -> float | None:
    if not message:
        return None
    try:
        headers = json.loads(message).get("headers") or {}
        return float(headers[SENT_HEADER])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def queues_overview(*, hosts: list[str]) -> list[dict[str, Any]]:
    """Every known queue: the install's, the live ASR one, each env host's (`hosts`), and any queue
    a live worker announced."""
    names = set(settings.FLYWHEEL_QUEUES) | {settings.THINKALOUD_LIVE_QUEUE} | set(announced_queues())
    names |= {f"env.{host}" for host in hosts}
    now = time.time()
    return [queue_depth(name, now=now) for name in sorted(names)]


# ------------------------------------------------------------------------------------ signals


@before_task_publish.connect
def _stamp(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None:
        headers.setdefault(SENT_HEADER, f"{time.time():.3f}")


_announcing: threading.Event | None = None


@worker_ready.connect
def _start_announcing(sender: Any = None, **_: Any) -> None:
    """In the worker's main process: announce its queues now and every ANNOUNCE_PERIOD_S."""
    global _announcing
    if sender is None or _announcing is not None:
        return
    name = str(sender.hostname)
    queues = [q.name for q in sender.task_consumer.queues]
    concurrency = int(getattr(sender.controller, "concurrency", 1) or 1)
    stop = _announcing = threading.Event()

    def loop() -> None:
        while True:
            try:
                for queue in queues:
                    worker_announce(queue=queue, worker=name, concurrency=concurrency)
            except Exception:
                log.warning("announcing worker %s failed", name, exc_info=True)
            if stop.wait(ANNOUNCE_PERIOD_S):
                return

    threading.Thread(target=loop, name="flywheel-announce", daemon=True).start()
    log.info("worker %s announces %s (concurrency %d)", name, queues, concurrency)


@worker_shutdown.connect
def _stop_announcing(sender: Any = None, **_: Any) -> None:
    global _announcing
    if _announcing is None:
        return
    _announcing.set()
    _announcing = None
    hostname = getattr(sender, "hostname", None)
    for queue in announced_queues():
        if hostname:
            worker_retire(queue=queue, worker=str(hostname))
