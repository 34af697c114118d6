"""Lease bookkeeping for the environment fleet, in Redis (seed 000 §2.2; issue 3 item 6).

Redis is the authority for live state, so a worker restart loses nothing: every env, idle set, lease
and expiry lives here, changed only by atomic Lua scripts. Every change is also appended to a stream
(`<prefix>:events`) that the Django side persists to PostgreSQL in batches (durable record, and what
rebuilds state if Redis itself is lost).

Keys (prefix p):
  p:env:<env_id>      hash  kind, worker, state (idle|leased|crashed|gone), lease, boot_s, task
  p:idle:<kind>       set   idle env ids of that kind
  p:lease:<lease_id>  hash  env, kind, owner, task, ttl, acquired, expires, state (active|crashed)
  p:expiry            zset  lease_id -> expiry (unix seconds)
  p:counters          hash  acquired, released, reclaimed, crashed, booted, renewed, refused, deferred
  p:demand:<kind>     str   set while an interactive lessee is owed an env of that kind (TTL)
  p:events            stream of {event, env, lease, kind, owner, task, at, ...}
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

DEMAND_S = 30.0  # how long a refused interactive lessee keeps background lessees away from a kind

_ACQUIRE = """
local p, kind, owner, task, ttl, now, lease_id = KEYS[1], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local reserve = tonumber(ARGV[7] or '-1')
-- A background lease (RL) leaves `reserve` idle envs of the kind to interactive ones (annotation)
-- and takes none while an interactive lessee was refused one lately.
if reserve >= 0 and (redis.call('SCARD', p .. ':idle:' .. kind) <= reserve
                     or redis.call('EXISTS', p .. ':demand:' .. kind) == 1) then
  redis.call('HINCRBY', p .. ':counters', 'deferred', 1)
  return false
end
local env = redis.call('SPOP', p .. ':idle:' .. kind)
if not env then
  redis.call('HINCRBY', p .. ':counters', 'refused', 1)
  if reserve < 0 then redis.call('SET', p .. ':demand:' .. kind, now, 'PX', tonumber(ARGV[8])) end
  return false
end
if reserve < 0 then redis.call('DEL', p .. ':demand:' .. kind) end
local worker = redis.call('HGET', p .. ':env:' .. env, 'worker')
redis.call('HSET', p .. ':env:' .. env, 'state', 'leased', 'lease', lease_id, 'task', task)
redis.call('HSET', p .. ':lease:' .. lease_id, 'env', env, 'kind', kind, 'owner', owner, 'task', task,
           'ttl', ttl, 'acquired', now, 'expires', now + ttl, 'state', 'active', 'worker', worker)
redis.call('ZADD', p .. ':expiry', now + ttl, lease_id)
redis.call('HINCRBY', p .. ':counters', 'acquired', 1)
redis.call('XADD', p .. ':events', 'MAXLEN', '~', 100000, '*', 'event', 'acquired', 'env', env, 'lease', lease_id,
           'kind', kind, 'owner', owner, 'task', task, 'at', now)
return {env, worker}
"""

_RENEW = """
local p, lease_id, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
local key = p .. ':lease:' .. lease_id
local state = redis.call('HGET', key, 'state')
if not state then return 'gone' end
if state ~= 'active' then return state end
local ttl = tonumber(redis.call('HGET', key, 'ttl'))
redis.call('HSET', key, 'expires', now + ttl)
redis.call('ZADD', p .. ':expiry', now + ttl, lease_id)
redis.call('HINCRBY', p .. ':counters', 'renewed', 1)
return 'active'
"""

_RELEASE = """
local p, lease_id, now, outcome = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local key = p .. ':lease:' .. lease_id
local env = redis.call('HGET', key, 'env')
if not env then return false end
-- A lease renewed after the reaper read the expiry set is not reclaimed.
if outcome == 'reclaimed' and tonumber(redis.call('HGET', key, 'expires')) > now then return false end
local kind = redis.call('HGET', key, 'kind')
local lstate = redis.call('HGET', key, 'state')
redis.call('DEL', key)
redis.call('ZREM', p .. ':expiry', lease_id)
local ekey = p .. ':env:' .. env
-- The env goes back to the idle set unless it crashed meanwhile (or was retired).
if lstate == 'active' and redis.call('HGET', ekey, 'state') == 'leased' then
  redis.call('HSET', ekey, 'state', 'idle', 'lease', '', 'task', '')
  redis.call('SADD', p .. ':idle:' .. kind, env)
end
redis.call('HINCRBY', p .. ':counters', outcome, 1)
redis.call('XADD', p .. ':events', 'MAXLEN', '~', 100000, '*', 'event', outcome, 'env', env, 'lease', lease_id,
           'kind', kind, 'at', now)
return env
"""

_REGISTER = """
local p, env, kind, worker, boot_s, now = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
redis.call('HSET', p .. ':env:' .. env, 'kind', kind, 'worker', worker, 'state', 'idle', 'lease', '', 'task', '',
           'boot_s', boot_s, 'since', now)
redis.call('SADD', p .. ':idle:' .. kind, env)
redis.call('SADD', p .. ':envs', env)
redis.call('HINCRBY', p .. ':counters', 'booted', 1)
redis.call('XADD', p .. ':events', 'MAXLEN', '~', 100000, '*', 'event', 'booted', 'env', env, 'kind', kind,
           'worker', worker, 'boot_s', boot_s, 'at', now)
return 1
"""

_CRASHED = """
local p, env, now, why = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ekey = p .. ':env:' .. env
local kind = redis.call('HGET', ekey, 'kind')
if not kind then return false end
local lease_id = redis.call('HGET', ekey, 'lease')
redis.call('SREM', p .. ':idle:' .. kind, env)
redis.call('HSET', ekey, 'state', 'crashed', 'reason', why)
if lease_id and lease_id ~= '' then
  -- The lessee learns of the crash on its next renew/step; the lease stays until released or reaped.
  redis.call('HSET', p .. ':lease:' .. lease_id, 'state', 'crashed')
end
redis.call('HINCRBY', p .. ':counters', 'crashed', 1)
redis.call('XADD', p .. ':events', 'MAXLEN', '~', 100000, '*', 'event', 'crashed', 'env', env, 'kind', kind,
           'lease', lease_id or '', 'reason', why, 'at', now)
return lease_id or ''
"""

_RETIRE = """
local p, env, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
local ekey = p .. ':env:' .. env
local kind = redis.call('HGET', ekey, 'kind')
if not kind then return false end
redis.call('SREM', p .. ':idle:' .. kind, env)
redis.call('SREM', p .. ':envs', env)
redis.call('DEL', ekey)
redis.call('XADD', p .. ':events', 'MAXLEN', '~', 100000, '*', 'event', 'retired', 'env', env, 'kind', kind, 'at', now)
return 1
"""


def redis_client(url: str) -> redis.Redis:
    """A client that rides out a Redis restart: a command that meets a dropped connection is sent
    again on a new one, backing off up to ~20 s in all, instead of failing the caller (a trainer
    chunk, a rollout, an env host's upkeep). Lua scripts are reloaded after a restart by redis-py."""
    retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=25)
    return redis.Redis.from_url(
        url, retry=retry, retry_on_error=[RedisConnectionError, RedisTimeoutError], health_check_interval=30
    )


@dataclass(frozen=True)
class Lease:
    lease_id: str
    env_id: str
    worker: str
    kind: str
    owner: str
    task: str


class LeaseRegistry:
    """Atomic lease operations over Redis; safe to use from many processes at once."""

    def __init__(self, client: redis.Redis, prefix: str = "flywheel:fleet") -> None:
        self.r = client
        self.prefix = prefix
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._register = client.register_script(_REGISTER)
        self._crashed = client.register_script(_CRASHED)
        self._retire = client.register_script(_RETIRE)

    # -- environments (called by the worker that hosts them)
    def register_env(self, *, env_id: str, kind: str, worker: str, boot_s: float) -> None:
        self._register(keys=[self.prefix], args=[env_id, kind, worker, f"{boot_s:.4f}", time.time()])

    def mark_crashed(self, *, env_id: str, reason: str) -> str | None:
        """Take a dead env out of service; returns the id of the lease it had, if any."""
        lease = self._crashed(keys=[self.prefix], args=[env_id, time.time(), reason[:500]])
        return _s(lease) or None

    def retire_env(self, *, env_id: str) -> None:
        self._retire(keys=[self.prefix], args=[env_id, time.time()])

    def host_heartbeat(self, *, worker: str, ttl_s: float) -> None:
        """A host says it is alive; its envs are taken out of service once this lapses."""
        self.r.set(f"{self.prefix}:host:{worker}", time.time(), px=int(ttl_s * 1000))

    def retire_worker(self, *, worker: str, reason: str) -> list[str]:
        """Take every env of `worker` out of service (its process is gone or restarting): leases on
        them learn of it as a crash on their next renew. Returns the env ids."""
        gone = []
        for raw in self.r.smembers(f"{self.prefix}:envs"):
            env_id = _s(raw)
            if _s(self.r.hget(f"{self.prefix}:env:{env_id}", "worker") or b"") == worker:
                self.mark_crashed(env_id=env_id, reason=reason)
                self.retire_env(env_id=env_id)
                gone.append(env_id)
        return gone

    def reap_dead_hosts(self) -> list[str]:
        """Retire the envs of every host whose heartbeat lapsed (a killed worker, a lost machine)."""
        workers = {
            _s(self.r.hget(f"{self.prefix}:env:{_s(e)}", "worker") or b"")
            for e in self.r.smembers(f"{self.prefix}:envs")
        }
        gone: list[str] = []
        for worker in sorted(w for w in workers if w):
            if not self.r.exists(f"{self.prefix}:host:{worker}"):
                gone += self.retire_worker(worker=worker, reason=f"host {worker} stopped sending heartbeats")
        return gone

    # -- leases (called by services on behalf of annotation sessions and RL rollouts)
    def acquire(
        self,
        *,
        kind: str,
        owner: str,
        task: str = "",
        ttl_s: float = 60.0,
        reserve: int | None = None,
        demand_s: float = DEMAND_S,
    ) -> Lease | None:
        """Lease an idle env of `kind`, or None when none is idle (the caller may ask for a boot).

        Interactive lessees (annotation: `reserve` None) come first: a background lessee (RL:
        `reserve` = how many idle envs of the kind it must leave) is refused while no more than
        `reserve` are idle, and while an interactive lessee that found none is owed one (for
        `demand_s`, or until an interactive lease succeeds); `interactive_waiting` tells background
        holders to give theirs back."""
        lease_id = uuid.uuid4().hex
        args: list[str | float | int] = [kind, owner, task, ttl_s, time.time(), lease_id,
                                         -1 if reserve is None else max(0, reserve), int(demand_s * 1000)]  # fmt: skip
        got = self._acquire(keys=[self.prefix], args=args)
        if not got:
            return None
        env_id, worker = (_s(x) for x in got)
        return Lease(lease_id=lease_id, env_id=env_id, worker=worker, kind=kind, owner=owner, task=task)

    def interactive_waiting(self, kind: str) -> bool:
        """An interactive lessee found no idle env of `kind` lately (background holders yield)."""
        return bool(self.r.exists(f"{self.prefix}:demand:{kind}"))

    def renew(self, *, lease_id: str) -> str:
        """Heartbeat. Returns 'active', 'crashed' (env died: release and lease again) or 'gone'
        (released or reclaimed)."""
        return _s(self._renew(keys=[self.prefix], args=[lease_id, time.time()]))

    def release(self, *, lease_id: str) -> bool:
        return bool(self._release(keys=[self.prefix], args=[lease_id, time.time(), "released"]))

    def reap(self, *, now: float | None = None, limit: int = 500) -> list[str]:
        """Reclaim every lease whose expiry has passed; returns their ids. Idempotent and safe to
        run from several processes (each lease is reclaimed by exactly one RELEASE script)."""
        now = time.time() if now is None else now
        due = self.r.zrangebyscore(f"{self.prefix}:expiry", "-inf", now, start=0, num=limit)
        reclaimed = []
        for raw in due:
            lease_id = _s(raw)
            if self._release(keys=[self.prefix], args=[lease_id, now, "reclaimed"]):
                reclaimed.append(lease_id)
        return reclaimed

    # -- reads
    def lease(self, lease_id: str) -> dict[str, str]:
        return {_s(k): _s(v) for k, v in self.r.hgetall(f"{self.prefix}:lease:{lease_id}").items()}

    def env(self, env_id: str) -> dict[str, str]:
        return {_s(k): _s(v) for k, v in self.r.hgetall(f"{self.prefix}:env:{env_id}").items()}

    def metrics(self) -> dict[str, Any]:
        """Fleet figures: envs by kind and state, lease counters, boot times."""
        by_kind: dict[str, dict[str, int]] = {}
        boot: list[float] = []
        env_ids = [_s(e) for e in self.r.smembers(f"{self.prefix}:envs")]
        pipe = self.r.pipeline()
        for env_id in env_ids:
            pipe.hmget(f"{self.prefix}:env:{env_id}", "kind", "state", "boot_s")
        for kind, state, boot_s in pipe.execute():
            if kind is None:
                continue
            counts = by_kind.setdefault(_s(kind), {"idle": 0, "leased": 0, "crashed": 0})
            counts[_s(state)] = counts.get(_s(state), 0) + 1
            if boot_s:
                boot.append(float(boot_s))
        counters = {_s(k): int(v) for k, v in self.r.hgetall(f"{self.prefix}:counters").items()}
        return {
            "envs": by_kind,
            "live": sum(c["idle"] + c["leased"] for c in by_kind.values()),
            "leased": sum(c["leased"] for c in by_kind.values()),
            "idle": sum(c["idle"] for c in by_kind.values()),
            "crashed": sum(c["crashed"] for c in by_kind.values()),
            "counters": counters,
            "boot_s_mean": round(sum(boot) / len(boot), 3) if boot else None,
        }

    def snapshot(self) -> dict[str, Any]:
        """Every env with its lease (or None), and every host with the age of its last heartbeat,
        read in two pipelined round trips (the fleet page)."""
        env_ids = sorted(_s(e) for e in self.r.smembers(f"{self.prefix}:envs"))
        host_keys = sorted(_s(k) for k in self.r.scan_iter(f"{self.prefix}:host:*", count=1000))
        pipe = self.r.pipeline()
        for env_id in env_ids:
            pipe.hgetall(f"{self.prefix}:env:{env_id}")
        for host_key in host_keys:
            pipe.get(host_key)
        raw = pipe.execute()
        envs = [{_s(k): _s(v) for k, v in h.items()} for h in raw[: len(env_ids)]]
        lease_ids = [e.get("lease", "") for e in envs]
        pipe = self.r.pipeline()
        for lease_id in lease_ids:
            pipe.hgetall(f"{self.prefix}:lease:{lease_id}") if lease_id else pipe.echo("")
        leases = pipe.execute()
        out_envs = []
        for env_id, env, lease_id, lease in zip(env_ids, envs, lease_ids, leases, strict=True):
            if not env:
                continue  # retired between the two reads
            held = {_s(k): _s(v) for k, v in lease.items()} if isinstance(lease, dict) and lease else None
            out_envs.append(
                {"env_id": env_id, **env, "lease": {"lease_id": lease_id, **held} if held else None}
            )
        hosts = {
            key.rsplit(":", 1)[-1]: float(_s(beat)) for key, beat in zip(host_keys, raw[len(env_ids) :], strict=True)
            if beat is not None
        }  # fmt: skip
        return {"envs": out_envs, "hosts": hosts, "now": time.time()}

    def idle_count(self, kind: str) -> int:
        return int(self.r.scard(f"{self.prefix}:idle:{kind}"))

    def clear(self) -> None:
        """Delete every key of this registry (tests and benchmarks use their own prefix)."""
        for key in self.r.scan_iter(f"{self.prefix}:*", count=1000):
            self.r.delete(key)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
