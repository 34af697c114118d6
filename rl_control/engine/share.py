"""A fair share of the engine's worker capacity among running runs (issue 37 item 3), in Redis.

Two pools: `rollout` (the processes of the rollout workers: one runs one env slot of one run at a
time) and `train` (the train workers' processes: one trainer chunk at a time). Without a share,
Celery hands a freed process to whichever task is next in its FIFO list, and a run launched while
another trains waited behind that run's requeued chunks for minutes. Here:

- a task of run R asks to `admit` before it works; it may when R holds fewer processes than its
  share, or when no other run is *starved* (wants a process and holds fewer than its share), so
  the pool is never left idle while work waits;
- a holder asks `should_yield` at every episode (or trainer loop) boundary; it yields, and its task
  goes back to the end of the queue, when R holds more than its share while another run starves;
- a refused task records R as wanting (with the time it started to want), goes back to the end of
  the queue after a short pause, and so comes round again.

Shares are weighted water-filling: each unit of capacity goes to the run with the fewest held
units per weight that still wants more (its env.parallel_envs, `cap`), ties to the run that has
waited longest. Weights come from the run's `env.priority`. Capacity is what the workers of the pool's queue
announce (webapp.fleet.queues: each worker's concurrency, repeated while it lives); a pool whose
workers announced nothing counts its holders plus one, so it still admits.

Keys (prefix settings.RL_REDIS_PREFIX):
  <p>:share:<pool>:hold    zset  "<run>:<member>" -> expiry (a dead holder lapses)
  <p>:share:<pool>:since   hash  "<run>:<member>" -> when it started holding (minimum hold)
  <p>:share:<pool>:want    zset  run -> when it started wanting
  <p>:share:<pool>:seen    hash  run -> when it last asked (wants lapse after WANT_TTL_S)
  <p>:share:<pool>:run     hash  run -> "weight|cap"
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from rl_control.engine.keys import rds
from webapp.fleet.queues import workers_of

ROLLOUT = "rollout"
TRAIN = "train"
WANT_TTL_S = 90.0  # a run that stopped asking (its tasks gone) stops wanting


def _k(*parts: object) -> str:
    return ":".join([settings.RL_REDIS_PREFIX, *map(str, parts)])


def _s(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def weight_of(config: Mapping[str, Any]) -> int:
    """A run's weight in the shares: its `env.priority` (1 when unset)."""
    return max(1, int((config.get("env") or {}).get("priority", 1) or 1))


def queue_of(pool: str) -> str:
    return settings.RL_ROLLOUT_QUEUE if pool == ROLLOUT else settings.RL_TRAIN_QUEUE


# --------------------------------------------------------------------------------- the state


@dataclass
class PoolState:
    """One read of a pool: capacity, who holds what, who wants, each run's weight and cap."""

    pool: str
    capacity: int
    announced: bool  # False: no worker announced itself (capacity = holders + 1)
    held: dict[int, int] = field(default_factory=dict)
    holders: set[str] = field(default_factory=set)
    wanting: dict[int, float] = field(default_factory=dict)  # run -> wanting since
    weight: dict[int, int] = field(default_factory=dict)
    cap: dict[int, int] = field(default_factory=dict)

    def shares(self) -> dict[int, int]:
        """Units of capacity each active run (holding or wanting) is owed."""
        # Ties go to runs holding nothing, then to the longest waiting: with fewer units than runs,
        # the units rotate (a holder past its minimum hold yields to a run that holds none).
        active = sorted(
            set(self.held) | set(self.wanting),
            key=lambda r: (self.held.get(r, 0) > 0, self.wanting.get(r, float("inf")), r),
        )
        got = dict.fromkeys(active, 0)
        for _ in range(self.capacity):
            open_ = [r for r in active if got[r] < self.cap.get(r, self.capacity)]
            if not open_:
                break
            best = min(open_, key=lambda r: (got[r] / max(1, self.weight.get(r, 1)), active.index(r)))
            got[best] += 1
        return got

    def starved(self, shares: dict[int, int] | None = None) -> list[int]:
        """Runs that want a unit and hold fewer than their share, longest waiting first."""
        shares = self.shares() if shares is None else shares
        late = [r for r in self.wanting if self.held.get(r, 0) < shares.get(r, 0)]
        return sorted(late, key=lambda r: (self.wanting[r], r))

    def waiting(self, shares: dict[int, int] | None = None) -> list[int]:
        """Runs that want a unit and hold none or fewer than their share, longest waiting first."""
        shares = self.shares() if shares is None else shares
        late = [r for r in self.wanting if self.held.get(r, 0) < max(1, shares.get(r, 0))]
        return sorted(late, key=lambda r: (self.wanting[r], r))


def pool_read(pool: str) -> PoolState:
    """The pool as it is now (lapsed holders and wants dropped from the read, not from Redis)."""
    r, now = rds(), time.time()
    pipe = r.pipeline()
    pipe.zrangebyscore(_k("share", pool, "hold"), now, "+inf")
    pipe.zrange(_k("share", pool, "want"), 0, -1, withscores=True)
    pipe.hgetall(_k("share", pool, "seen"))
    pipe.hgetall(_k("share", pool, "run"))
    holds, wants, seen, runs = pipe.execute()
    announced = workers_of(queue_of(pool))
    state = PoolState(pool=pool, capacity=0, announced=bool(announced))
    for raw in holds:
        member = _s(raw)
        state.holders.add(member)
        run_id = int(member.split(":", 1)[0])
        state.held[run_id] = state.held.get(run_id, 0) + 1
    last = {int(_s(k)): float(_s(v)) for k, v in seen.items()}
    for raw, since in wants:
        run_id = int(_s(raw))
        if now - last.get(run_id, 0.0) <= WANT_TTL_S:
            state.wanting[run_id] = float(since)
    for raw, value in runs.items():
        weight, _, cap = _s(value).partition("|")
        state.weight[int(_s(raw))], state.cap[int(_s(raw))] = int(weight or 1), int(cap or 1)
    held_total = sum(state.held.values())
    state.capacity = sum(announced.values()) if announced else held_total + 1
    return state


@contextmanager
def _locked(pool: str) -> Iterator[None]:
    """Decisions of one pool are serialised (a read, a decision and a write by one caller at a time)."""
    with rds().lock(_k("share", pool, "lock"), timeout=5.0, blocking_timeout=10.0):
        yield


def _member(run_id: int, member: str) -> str:
    return f"{run_id}:{member}"


# --------------------------------------------------------------------------------- decisions


def want(*, pool: str, run_id: int, weight: int = 1, cap: int = 1) -> None:
    """Record that run `run_id` wants units of `pool` (kept since the first time; refreshed)."""
    r, now = rds(), time.time()
    pipe = r.pipeline()
    pipe.zadd(_k("share", pool, "want"), {str(run_id): now}, nx=True)
    pipe.hset(_k("share", pool, "seen"), str(run_id), f"{now:.3f}")
    pipe.hset(_k("share", pool, "run"), str(run_id), f"{max(1, weight)}|{max(1, cap)}")
    pipe.execute()


def admit(*, pool: str, run_id: int, member: str, weight: int = 1, cap: int = 1, ttl_s: float) -> bool:
    """May this task of run `run_id` work now? True: it holds a unit (for `ttl_s`, renewed by
    `should_yield`); False: it is recorded as wanting and should go back to the queue."""
    with _locked(pool):
        want(pool=pool, run_id=run_id, weight=weight, cap=cap)
        state = pool_read(pool)
        name = _member(run_id, member)
        if name not in state.holders:
            shares = state.shares()
            others = [r for r in state.starved(shares) if r != run_id]
            if state.held.get(run_id, 0) >= shares.get(run_id, 0) and others:
                return False
        now = time.time()
        pipe = rds().pipeline()
        pipe.zadd(_k("share", pool, "hold"), {name: now + ttl_s})
        if name not in state.holders:
            pipe.hset(_k("share", pool, "since"), name, f"{now:.3f}")
        if state.held.get(run_id, 0) + (name not in state.holders) >= cap:
            pipe.zrem(_k("share", pool, "want"), str(run_id))  # it can use no more: a later want queues anew
        pipe.execute()
        return True


def should_yield(*, pool: str, run_id: int, member: str, ttl_s: float, min_hold_s: float = 0.0) -> bool:
    """Renew this holder; True when it has held for `min_hold_s` and its run holds more than its
    share while another run starves (then the caller releases and requeues its task)."""
    name, now = _member(run_id, member), time.time()
    r = rds()
    r.zadd(_k("share", pool, "hold"), {name: now + ttl_s})
    if now - float(_s(r.hget(_k("share", pool, "since"), name) or b"0")) < min_hold_s:
        return False
    state = pool_read(pool)
    shares = state.shares()
    if state.held.get(run_id, 0) <= shares.get(run_id, 0):
        return False
    if not any(r != run_id for r in state.starved(shares)):
        return False
    r.zadd(_k("share", pool, "want"), {str(run_id): now})  # it was served: to the back of the line
    return True


def renew(*, pool: str, run_id: int, member: str, ttl_s: float) -> None:
    """Extend a hold (a holder in the middle of long work); nothing when it is not held."""
    rds().zadd(_k("share", pool, "hold"), {_member(run_id, member): time.time() + ttl_s}, xx=True)


def release(*, pool: str, run_id: int, member: str) -> None:
    pipe = rds().pipeline()
    pipe.zrem(_k("share", pool, "hold"), _member(run_id, member))
    pipe.hdel(_k("share", pool, "since"), _member(run_id, member))
    pipe.execute()


def forget(*, run_id: int) -> None:
    """The run stopped: it neither holds nor wants anything any more."""
    r = rds()
    for pool in (ROLLOUT, TRAIN):
        members: list[bytes] = r.zrange(_k("share", pool, "hold"), 0, -1)  # type: ignore[assignment]
        holds = [_s(m) for m in members if _s(m).startswith(f"{run_id}:")]
        pipe = r.pipeline()
        if holds:
            pipe.zrem(_k("share", pool, "hold"), *holds)
            pipe.hdel(_k("share", pool, "since"), *holds)
        pipe.zrem(_k("share", pool, "want"), str(run_id))
        pipe.hdel(_k("share", pool, "seen"), str(run_id))
        pipe.hdel(_k("share", pool, "run"), str(run_id))
        pipe.execute()


# --------------------------------------------------------------------------------- reading


def wait_reason(*, pool: str, run_id: int, what: str) -> str | None:
    """Why run `run_id` waits for a unit of `pool` ("waiting for a rollout slot: run #6 holds 2 of 2;
    position 1"), or None when it holds its share or does not want one."""
    state = pool_read(pool)
    order = state.waiting()
    if run_id not in order:
        return None
    others = sorted(((n, r) for r, n in state.held.items() if r != run_id), key=lambda x: (-x[0], x[1]))
    held = state.held.get(run_id, 0)
    holders = ", ".join(f"run #{r} holds {n} of {state.capacity}" for n, r in others)
    if held:
        holders = ", ".join(filter(None, [f"this run holds {held}", holders]))
    holders = holders or f"no run holds one of {state.capacity}"
    if not state.announced:
        holders += " (no worker of that queue announced itself: is one running?)"
    return f"waiting for {what}: {holders}; position {order.index(run_id) + 1}"
