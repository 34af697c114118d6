"""Environment slots: the unit a rollout worker owns (one leased environment, one trajectory at a time).

A run has `env.parallel_envs` slots. Slot k is a Redis hash `<prefix>:run:<id>:slot:<k>`:

    generation  fencing token: a rollout task runs slot k only while the hash holds its generation
    state       queued (its task waits in the rollout queue) | running | stopped
    heartbeat   unix time of the task's last sign of life (every policy call and env step; for a
                queued slot, when its task was queued)
    lease       lease id of the environment it holds (released when the task stops)
    kind        the kind of that environment (a "mixed" run's slot changes kind with its tasks)
    trajectory  the trajectory in flight ("" between episodes)

`slots_supervise` (called by the trainer loop and by the `engine_watch` beat task) starts a task for
every stopped slot, starts again a queued slot whose task has not run for
settings.RL_SLOT_QUEUED_TIMEOUT_S (its message was lost), records that the run wants rollout
workers while any slot is queued (rl_control.engine.share), and reclaims a running slot whose
heartbeat is older than settings.RL_SLOT_TIMEOUT_S (its worker was killed): the generation moves on (the old task, if it ever wakes, stops at its next
check), the in-flight trajectory is closed as abandoned by one conditional UPDATE (exactly once; it
is never trained on), the lease is released, and a new task starts the slot again.

Redis restarting (it keeps nothing on disk) loses the slot hashes, not the record: trajectories and
groups live in PostgreSQL. A slot whose hash is gone starts again under a generation that cannot
collide with the lost one (a fresh one is time-based), so the old task is fenced at its next beat
and closes its own trajectory; `slots_supervise` also closes, once, any running trajectory of the
run that no slot owns and that has been silent for the slot timeout (a task that died while the
record of its slot was lost). Completed trajectories are untouched and train as usual.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, Q
from django.utils import timezone

from rl_control.engine import share
from rl_control.engine.keys import key, rds
from webapp.fleet import services as fleet
from webapp.store import services as store
from webapp.store.models import Trajectory, TrajectoryStatus

log = logging.getLogger(__name__)

# Compare-and-bump: move slot KEYS[1] to a new generation only if it still has ARGV[1] ("" = none).
# A slot without a hash (new, or lost with a Redis restart) starts at ARGV[3], a time-based number,
# so a generation is never handed out twice even when Redis forgot the last one.
_BUMP = """
local g = redis.call('HGET', KEYS[1], 'generation') or ''
if g ~= ARGV[1] then return 0 end
local n
if g == '' then
  n = tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'generation', n)
else
  n = redis.call('HINCRBY', KEYS[1], 'generation', 1)
end
redis.call('HSET', KEYS[1], 'state', 'queued', 'heartbeat', ARGV[2], 'lease', '', 'trajectory', '')
return n
"""
# Set fields of KEYS[1] only while it holds generation ARGV[1]; returns 1 when written.
_FENCED_SET = """
if redis.call('HGET', KEYS[1], 'generation') ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""


def slot_key(run_id: int, slot: int) -> str:
    return key(run_id, "slot", slot)


def slot_read(run_id: int, slot: int) -> dict[str, str]:
    fields: dict[bytes, bytes] = rds().hgetall(slot_key(run_id, slot))  # type: ignore[assignment]
    return {k.decode(): v.decode() for k, v in fields.items()}


def slot_set(run_id: int, slot: int, generation: int, **fields: Any) -> bool:
    """Write `fields` to the slot if it still belongs to `generation` (False: this task was fenced off)."""
    args: list[Any] = [generation]
    for name, value in fields.items():
        args += [name, str(value)]
    return bool(rds().eval(_FENCED_SET, 1, slot_key(run_id, slot), *args))


def slot_beat(run_id: int, slot: int, generation: int, **fields: Any) -> bool:
    return slot_set(run_id, slot, generation, heartbeat=f"{time.time():.3f}", **fields)


def slot_start(run_id: int, slot: int, seen_generation: str) -> int | None:
    """Start a new task for the slot if it is still at `seen_generation`; returns the new generation."""
    now = time.time()
    generation = int(
        rds().eval(_BUMP, 1, slot_key(run_id, slot), seen_generation, f"{now:.3f}", int(now * 1000))
    )
    if generation == 0:
        return None  # someone else restarted it first
    slot_enqueue(run_id, slot, generation)
    return generation


def slot_enqueue(run_id: int, slot: int, generation: int) -> bool:
    """Queue the slot's task (again) and mark the slot queued; False when `generation` was fenced."""
    from rl_control.tasks import rollout_slot

    if not slot_set(run_id, slot, generation, state="queued", heartbeat=f"{time.time():.3f}"):
        return False
    rollout_slot.apply_async(args=[run_id, slot, generation], queue=settings.RL_ROLLOUT_QUEUE)
    return True


def abandon(trajectory_id: int, reason: str) -> bool:
    """Close a running trajectory as abandoned (never trained on; the store closes a trajectory once);
    False when it was closed already."""
    trajectory = Trajectory.objects.filter(pk=trajectory_id).first()
    if trajectory is None or trajectory.status != TrajectoryStatus.RUNNING:
        return False
    store.trajectory_finish(trajectory=trajectory, status=TrajectoryStatus.ABANDONED, final_reward=None)
    if trajectory.status != TrajectoryStatus.ABANDONED:
        return False
    Trajectory.objects.filter(pk=trajectory.pk).update(
        metadata={**trajectory.metadata, "abandoned_reason": reason}
    )
    return True


def _reclaim(run_id: int, slot: int, info: dict[str, str]) -> None:
    """Close what a dead task left: its in-flight trajectory (abandoned, once) and its lease."""
    trajectory_id = info.get("trajectory")
    if trajectory_id:
        abandon(int(trajectory_id), "rollout worker stopped responding")
    if info.get("lease"):
        fleet.lease_release(lease_id=info["lease"])
    rds().hincrby(key(run_id, "acct"), "reclaimed", 1)


def slots_supervise(
    run_id: int, n_slots: int, *, timeout_s: float | None = None, weight: int = 1
) -> dict[str, int]:
    """Make sure each of the run's `n_slots` slots has a live task; returns {started, reclaimed}.
    `weight`: the run's share weight (env.priority), recorded with its want of rollout workers."""
    timeout_s = settings.RL_SLOT_TIMEOUT_S if timeout_s is None else timeout_s
    queued_timeout_s = max(timeout_s, settings.RL_SLOT_QUEUED_TIMEOUT_S)
    started = reclaimed = queued = 0
    now = time.time()
    owned: set[int] = set()  # trajectories in flight on a slot as read now (a reclaimed one is closed)
    for slot in range(n_slots):
        info = slot_read(run_id, slot)
        if info.get("trajectory"):
            owned.add(int(info["trajectory"]))
        seen = info.get("generation", "")
        age = now - float(info.get("heartbeat") or 0)
        if info.get("state") == "running" and age <= timeout_s:
            continue
        if info.get("state") == "queued" and age <= queued_timeout_s:
            queued += 1
            continue
        if info.get("state") == "running":
            log.warning("run %s slot %s: no heartbeat for %.0f s, reclaiming", run_id, slot, timeout_s)
            if slot_start(run_id, slot, seen) is not None:
                _reclaim(run_id, slot, info)
                reclaimed += 1
                started += 1
            continue
        if slot_start(run_id, slot, seen) is not None:
            started += 1
    if queued + started:
        share.want(pool=share.ROLLOUT, run_id=run_id, weight=weight, cap=n_slots)
    reclaimed += close_orphans(run_id, owned, timeout_s)
    return {"started": started, "reclaimed": reclaimed}


def close_orphans(run_id: int, owned: set[int], timeout_s: float) -> int:
    """Abandon the run's running trajectories that no slot owns (`owned`: the ids the slots hold)
    and that had no new step for `timeout_s` (their task died while Redis had lost its slot's
    record); returns how many."""
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    silent = (
        Trajectory.objects.filter(run_id=run_id, status=TrajectoryStatus.RUNNING, created_at__lt=cutoff)
        .exclude(pk__in=owned)
        .annotate(last_step=Max("steps__created_at"))
        .filter(Q(last_step=None) | Q(last_step__lt=cutoff))
        .values_list("pk", flat=True)
    )
    closed = sum(abandon(pk, "no rollout owns it any more (its slot's record was lost)") for pk in silent)
    if closed:
        log.warning("run %s: closed %d running trajectories no slot owns", run_id, closed)
        rds().hincrby(key(run_id, "acct"), "reclaimed", closed)
    return closed


def slot_fail(run_id: int, slot: int, generation: int) -> None:
    """A rollout task died of an unexpected error: close its in-flight trajectory (abandoned, once),
    release its environment and mark the slot stopped so the supervisor starts it again."""
    info = slot_read(run_id, slot)
    if info.get("generation") != str(generation):
        return  # already reclaimed by the supervisor
    _reclaim(run_id, slot, info)
    slot_set(run_id, slot, generation, state="stopped", lease="", env="", worker="", trajectory="")
