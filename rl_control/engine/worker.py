"""The body of a rollout task: one environment slot of one run, episode after episode.

Rollout-wise scheduling (seed 002 §3.3): the slot claims its next rollout the moment the last one
ended; nothing waits for other environments (sync mode waits only at the batch barrier, in
`rollout_claim`; async mode waits at the same barrier only while the trainer's next batches are
out already, `data.rollouts_ahead_limit`). The task keeps its lease between episodes (a run of env.kind "mixed" leases
each claimed task's own kind, and keeps the lease while the next task is of the same kind), renews
the slot heartbeat at every policy call and env step, and returns after settings.RL_ROLLOUT_CHUNK_S
so the next task of the same slot (same generation) picks up: a long run is many short Celery tasks.
Before it works the task asks for its run's fair share of the rollout workers
(rl_control.engine.share): refused, it goes back to the queue; at every episode boundary it gives
its worker up to a run that is owed one ("yielded", its environment released). It stops when the run
is no longer running (after finishing the episode in flight: pause loses nothing) or when its slot
was reclaimed (fenced). Time is booked in `<prefix>:run:<id>:acct` (busy_s in episodes, idle_s
waiting for an environment or at the barrier) for the utilisation figures.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import close_old_connections

from rl_control.engine import share, slots
from rl_control.engine.data import Claim, barrier_mark, barrier_wait, rollout_claim
from rl_control.engine.keys import key, rds
from rl_control.engine.rollout import Fenced, policy_for, run_episode, run_profile
from rl_control.engine.serving import lifeline_renew, lora_models, serving_urls, version_label
from rl_control.models import EngineState, Run, RunStatus
from webapp.fleet import services as fleet
from webapp.store.models import Trajectory
from workers.envs.leases import Lease
from workers.rl.run_config import MIXED_KIND

log = logging.getLogger(__name__)
ENV_WAIT_TTL_S = 5
BARRIER_WAIT_S = 1.0  # the longest a slot at the sync barrier goes without re-checking its run and lease


def _book(run_id: int, **seconds: float) -> None:
    pipe = rds().pipeline()
    for name, value in seconds.items():
        pipe.hincrbyfloat(key(run_id, "acct"), name, value)
    pipe.execute()


def slot_loop(run_id: int, slot: int, generation: int) -> str:
    """Run the slot until the chunk time is up, the run stops running, or the slot is fenced.

    Returns why it returned: "continue" (the chunk time is up), "waiting" (refused a worker: another
    run is owed it), "yielded" (gave its worker to a run that is owed it) — the caller queues the
    slot's task again for these three — or "stopped", "fenced".
    """
    deadline = time.monotonic() + settings.RL_ROLLOUT_CHUNK_S
    run = Run.objects.get(pk=run_id)
    kind = str(run.config["env"]["kind"])  # "mixed": each episode leases its task's kind (after the claim)
    policy, policy_url = None, ""
    info = slots.slot_read(run_id, slot)
    lease = None
    if info.get("lease") and info.get("env"):  # the previous chunk of this generation kept its environment
        lease = Lease(lease_id=info["lease"], env_id=info["env"], worker=info["worker"],
                      kind=info.get("kind") or kind, owner=f"rl:{run_id}:{slot}:{generation}", task="")  # fmt: skip
    if info.get("generation") != str(generation):
        return "fenced"
    if run.status == RunStatus.RUNNING and not _admitted(run, slot):
        return _refused(run_id, slot, generation, lease)
    outcome = "fenced"
    try:
        while True:
            if not slots.slot_beat(run_id, slot, generation, state="running"):
                outcome = "fenced"
                return outcome
            run.refresh_from_db(fields=["status", "mode"])
            if run.status != RunStatus.RUNNING:
                outcome = "stopped"
                return outcome
            if time.monotonic() > deadline:
                outcome = "continue"
                return outcome
            if _should_yield(run_id, slot):  # another run waits for a rollout worker: give this one up
                outcome = "yielded"
                return outcome
            if lease is not None and fleet.interactive_waiting(kind=lease.kind):
                # an annotator found no idle environment of this kind: annotation comes first
                fleet.lease_release(lease_id=lease.lease_id)
                slots.slot_set(run_id, slot, generation, lease="", env="", worker="", kind="")
                lease = None
            waited = time.perf_counter()
            # The run's own servers (rl_control.engine.serving): none while the trainer starts them;
            # another URL after they were started again.
            urls = serving_urls(run)
            if not urls:
                time.sleep(0.5)
                _book(run_id, idle_s=time.perf_counter() - waited)
                continue
            if urls[slot % len(urls)] != policy_url:
                if policy is not None:
                    policy.client.close()
                policy_url = urls[slot % len(urls)]
                policy = policy_for(policy_url, run_id, run_profile(run))
            lifeline_renew(run_id)
            if lease is None and kind != MIXED_KIND:
                try:
                    lease = _lease(run_id, slot, generation, kind)
                except fleet.NoEnvironmentAvailable:
                    _env_wait(run_id, kind)
                    time.sleep(0.5)
                    _book(run_id, idle_s=time.perf_counter() - waited)
                    continue
            mark = barrier_mark(run_id=run_id)
            claim = rollout_claim(run=run, env_slot=slot, generation=generation)
            if claim is None:  # the batch is handed out (sync) or the trainer's next batches are (async,
                # data.rollouts_ahead_limit): wait for the update that lifts the barrier
                if lease is not None and fleet.lease_renew(lease_id=lease.lease_id) != "active":
                    lease = None
                barrier_wait(run_id=run_id, mark=mark, timeout_s=BARRIER_WAIT_S)
                _book(run_id, idle_s=time.perf_counter() - waited)
                continue
            slots.slot_set(run_id, slot, generation, trajectory=claim.trajectory.pk)
            if kind == MIXED_KIND:
                lease = _lease_for_claim(run_id, slot, generation, lease, claim)
                if lease is None:  # fenced or stopped while no environment of its kind was idle
                    slots.abandon(claim.trajectory.pk, "its rollout stopped before an environment was leased")
                    _book(run_id, idle_s=time.perf_counter() - waited)
                    continue
            _book(run_id, idle_s=time.perf_counter() - waited)
            version = EngineState.objects.filter(run_id=run_id).values_list("version", flat=True).first() or 0
            assert policy is not None  # set above with the run's server URL
            assert lease is not None  # leased above: before the claim, or for it ("mixed")
            if lora_models(run):
                policy.model = version_label(run_id, version)  # vLLM serves each version's adapter by name
            started = time.perf_counter()
            try:
                run_episode(
                    run=run, claim=claim, lease=lease, policy=policy, current_version=version,
                    beat=lambda: slots.slot_beat(run_id, slot, generation) and _hold(run_id, slot),
                )  # fmt: skip
            except fleet.LeaseLost as exc:
                log.warning("run %s slot %s: %s; leasing another environment", run_id, slot, exc)
                rds().hincrby(key(run_id, "acct"), "crashed", 1)
                fleet.lease_release(lease_id=lease.lease_id)
                slots.slot_set(run_id, slot, generation, lease="", env="", worker="", kind="")
                lease = None
            except Fenced:
                # Reclaimed: the reclaimer closed the trajectory already. Redis lost the slot's
                # record: nobody else knows it is in flight, so close it here (once, either way).
                slots.abandon(claim.trajectory.pk, "its rollout lost its slot before the episode ended")
                outcome = "fenced"
                return outcome
            finally:
                _book(run_id, busy_s=time.perf_counter() - started)
            slots.slot_set(run_id, slot, generation, trajectory="")
            close_old_connections()
    finally:
        share.release(pool=share.ROLLOUT, run_id=run_id, member=str(slot))
        if outcome != "continue" and lease is not None:
            fleet.lease_release(lease_id=lease.lease_id)
            slots.slot_set(run_id, slot, generation, lease="", env="", worker="", kind="")
        if outcome == "stopped":
            slots.slot_set(run_id, slot, generation, state="stopped")


def _admitted(run: Run, slot: int) -> bool:
    """May this slot use the rollout worker it runs on now (the run's fair share, engine.share)?"""
    return share.admit(
        pool=share.ROLLOUT, run_id=run.pk, member=str(slot), weight=share.weight_of(run.config),
        cap=int(run.config["env"]["parallel_envs"]), ttl_s=settings.RL_SLOT_TIMEOUT_S,
    )  # fmt: skip


def _hold(run_id: int, slot: int) -> bool:
    """Keep holding the rollout worker through a long episode (with every slot heartbeat)."""
    share.renew(pool=share.ROLLOUT, run_id=run_id, member=str(slot), ttl_s=settings.RL_SLOT_TIMEOUT_S)
    return True


def _should_yield(run_id: int, slot: int) -> bool:
    return share.should_yield(
        pool=share.ROLLOUT, run_id=run_id, member=str(slot), ttl_s=settings.RL_SLOT_TIMEOUT_S,
        min_hold_s=settings.RL_ROLLOUT_SHARE_S,
    )  # fmt: skip


def _refused(run_id: int, slot: int, generation: int, lease: Lease | None) -> str:
    """Another run is owed this worker: give back the environment an earlier chunk kept (the run
    that is owed the worker may need it), pause a moment (no hot loop through the queue) and go
    back to the queue ("waiting")."""
    if lease is not None:
        fleet.lease_release(lease_id=lease.lease_id)
        slots.slot_set(run_id, slot, generation, lease="", env="", worker="", kind="")
    time.sleep(settings.RL_SHARE_REFUSED_PAUSE_S)
    return "waiting"


def _env_wait(run_id: int, kind: str) -> None:
    """Note for the run page that a slot found no idle environment of `kind` (lapses in seconds)."""
    rds().set(key(run_id, "envwait"), kind, ex=ENV_WAIT_TTL_S)


def _lease(run_id: int, slot: int, generation: int, kind: str) -> Lease:
    """Lease an idle environment of `kind` for the slot and record it on the slot (raises
    fleet.NoEnvironmentAvailable when none is idle)."""
    lease = fleet.lease_acquire(kind=kind, owner=f"rl:{run_id}:{slot}:{generation}", background=True)
    slots.slot_set(
        run_id, slot, generation, lease=lease.lease_id, env=lease.env_id, worker=lease.worker, kind=kind
    )
    return lease


def _lease_for_claim(
    run_id: int, slot: int, generation: int, lease: Lease | None, claim: Claim
) -> Lease | None:
    """A "mixed" run's environment for the claimed rollout: the slot's own when it is of the task's
    kind, else that one released and one of the task's kind leased, waiting while none is idle. The
    wait is recorded on the trajectory (`metadata.engine.lease_wait_s`: the episode starts after it).
    None when the slot was fenced or the run stopped during the wait."""
    want = claim.group.task.env_kind
    if lease is not None and lease.kind == want:
        return lease
    if lease is not None:
        fleet.lease_release(lease_id=lease.lease_id)
        slots.slot_set(run_id, slot, generation, lease="", env="", worker="", kind="")
    waited = time.perf_counter()
    while slots.slot_beat(run_id, slot, generation):
        try:
            got = _lease(run_id, slot, generation, want)
        except fleet.NoEnvironmentAvailable:
            _env_wait(run_id, want)
            if not Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists():
                return None
            time.sleep(0.2)
            continue
        trajectory = claim.trajectory
        meta = {**trajectory.metadata}
        meta["engine"] = {**meta.get("engine", {}), "lease_wait_s": round(time.perf_counter() - waited, 3)}
        Trajectory.objects.filter(pk=trajectory.pk).update(metadata=meta)
        trajectory.metadata = meta
        return got
    return None
