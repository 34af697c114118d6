"""The trainer side of the engine: one Celery task per chunk of updates, on the `train` queue.

A chunk (settings.RL_UPDATES_PER_CHUNK updates, fewer when another run's trainer is owed the train
worker: rl_control.engine.share; at once while it only waits for data) loads the trainer from the run's newest save
(`EngineState.trainer_dir`, else the start checkpoint), starts the run's own policy servers with
those weights if they are not up (rl_control.engine.serving) or pushes the weights to them (so the
servers always serve the committed version, also after a crash), then loops:

  1. heartbeat + fence: `EngineState.chunk` must still be this chunk (a resume or the watchdog
     starts a new chunk number; an older chunk that wakes up stops);
  2. stop when the run is no longer running (pause: rollouts stop by themselves after their
     episode, which lands in the pool; nothing is lost);
  3. supervise the environment slots (start stopped ones, reclaim dead ones);
  4. wait on the streaming pool until the completed, not-yet-trained trajectories of finished
     groups reach `curation.min_batch_trajectories` (sync mode: until the whole batch is back);
  5. curate each group (workers.rl.curator: staleness bound, dynamic N, step limit, experience
     pool / BEPA cache / replay injection), build TrajectorySamples from the stored steps, run
     `PolicyTrainer.update`, save version v+1, push it to the policy servers one at a time
     (seed 002 §3.5), and commit in one transaction: the engine state (version, trainer dir,
     curation state), the groups consumed, per-step RL stats for replay. Then record the SPEC §9
     metrics and the run progress (which finishes the run when its budget is spent).

A crash between the save and the commit repeats that update after restart from the previous save:
nothing is trained twice in the committed record and nothing is lost.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from rl_control.engine import measures, share, slots
from rl_control.engine.control import engine_state, start_dir
from rl_control.engine.data import (
    barrier_lift,
    curator_of,
    group_trajectories,
    groups_ready,
    pool_wait,
    sync_batch_groups,
)
from rl_control.engine.entropulse import entropulse_after_update
from rl_control.engine.rollout import run_profile
from rl_control.engine.samples import rollout_outcome, trajectory_sample
from rl_control.engine.serving import (
    lifeline_set,
    lora_models,
    serving_current,
    serving_ensure,
    serving_push,
)
from rl_control.models import EngineState, RolloutGroup, RolloutGroupState, Run, RunMode, RunStatus
from rl_control.services import state
from webapp.overload import database_lost, first_line
from webapp.store.checkpoints import checkpoint_register
from webapp.store.models import Checkpoint, Step, Trajectory, TrajectoryStatus
from workers.policy.openai_client import ModelProfile
from workers.rl.config import RLConfig
from workers.rl.curator import GroupCurator, within_staleness_bound
from workers.rl.samples import TrajectorySample
from workers.rl.trainer import EMA_DIR, PolicyTrainer, resume_trainer, trainer_for

log = logging.getLogger(__name__)
TRAINER = "trainer"  # the trainer's member name in the `train` share
TRAIN_HOLD_TTL_S = (
    900.0  # a trainer that died stops holding the train worker after this (an update may be long)
)
WAIT_S = 1.0
SERVING_CHECK_S = 10.0


class Superseded(RuntimeError):
    """A newer chunk owns the run's trainer; this one stops without writing."""


# ------------------------------------------------------------------------------------ the chunk


def _beat(state: EngineState, chunk: int) -> None:
    if not EngineState.objects.filter(pk=state.pk, chunk=chunk).update(trainer_heartbeat=timezone.now()):
        raise Superseded(f"chunk {chunk} of run {state.run_id} was superseded")


def learner_chunk(*, run_id: int, chunk: int) -> str:
    """Run one chunk; "continue" (enqueue the next), "paused", "ended" or "superseded"."""
    run = Run.objects.get(pk=run_id)
    state = engine_state(run)
    if state.chunk != chunk:
        return "superseded"
    if run.status != RunStatus.RUNNING:
        return "paused" if run.status == RunStatus.PAUSED else "ended"
    if not share.admit(pool=share.TRAIN, run_id=run_id, member=TRAINER, weight=share.weight_of(run.config),
                       cap=1, ttl_s=TRAIN_HOLD_TTL_S):  # fmt: skip
        time.sleep(settings.RL_SHARE_REFUSED_PAUSE_S)  # another run is owed the train worker
        return _hand_on(run, state, chunk)
    try:
        return _chunk(run, state, chunk)
    except Superseded:
        return "superseded"
    except Exception as exc:
        if database_lost(exc):  # PostgreSQL terminated the connection: expected, not the run's failure
            log.warning("run %s: trainer chunk %s lost its database connection (%s); the next chunk "
                        "carries on from the last committed update", run_id, chunk, first_line(exc))  # fmt: skip
            return _hand_on_after_loss(run, state, chunk)
        log.exception("run %s: trainer chunk %s failed", run_id, chunk)
        run.refresh_from_db()
        if run.status in (RunStatus.RUNNING, RunStatus.PAUSED):
            state.run_fail(run=run, error=f"trainer failed: {type(exc).__name__}: {exc}")
        return "ended"
    finally:
        share.release(pool=share.TRAIN, run_id=run_id, member=TRAINER)


def _hand_on(run: Run, state: EngineState, chunk: int) -> str:
    """End this chunk so that the next one goes to the back of the train queue: "continue" (the
    caller enqueues chunk + 1, and the run wants the trainer again), or "superseded"."""
    if EngineState.objects.filter(pk=state.pk, chunk=chunk).update(chunk=chunk + 1) != 1:
        return "superseded"
    share.want(pool=share.TRAIN, run_id=run.pk, weight=share.weight_of(run.config), cap=1)
    return "continue"


def _hand_on_after_loss(run: Run, state: EngineState, chunk: int) -> str:
    """`_hand_on` after a lost connection: the next chunk loads the newest committed save (an update
    saved but not committed is trained again, once). While the database is still out of reach the
    chunk just ends, and `engine_watch` restarts the trainer when its heartbeat lapses."""
    try:
        return _hand_on(run, state, chunk)
    except DatabaseError as exc:
        if not database_lost(exc):
            raise
        log.warning("run %s: the database is out of reach (%s); the trainer restarts when its heartbeat "
                    "lapses", run.pk, first_line(exc))  # fmt: skip
        return "ended"


def _yield_trainer(run: Run, *, min_hold_s: float) -> bool:
    """Another run's trainer is owed the train worker (engine.share) and this one held it at least
    `min_hold_s` (0 while it only waits for data)."""
    return share.should_yield(
        pool=share.TRAIN, run_id=run.pk, member=TRAINER, ttl_s=TRAIN_HOLD_TTL_S, min_hold_s=min_hold_s
    )


def _load_trainer(run: Run, state: EngineState) -> PolicyTrainer:
    config = RLConfig.from_run_config(run.algorithm, run.config)
    if state.trainer_dir:
        return resume_trainer(state.trainer_dir, config)
    trainer = trainer_for(
        start_dir(run), config, seed=int(run.config.get("seed", 0)), vlm=run.config.get("vlm")
    )
    if trainer.version != state.version:
        EngineState.objects.filter(pk=state.pk).update(version=trainer.version)
        state.version = trainer.version
    return trainer


def _in_thread(fn: Any, *args: Any) -> Any:
    """Run `fn` in a pool thread with its own database connection, closed afterwards."""
    from django.db import connection

    try:
        return fn(*args)
    finally:
        connection.close()


def _chunk(run: Run, state: EngineState, chunk: int) -> str:
    _beat(state, chunk)
    serving = Path(state.trainer_dir) if state.trainer_dir else start_dir(run)
    # The run's own servers: started with these weights if they are not up (pause, a new machine),
    # else given them again (a trainer that crashed after pushing an update it never committed).
    # They start while the trainer loads (two processes: a first launch waits for the slower one).
    t0 = time.perf_counter()
    labelled = state.version
    with ThreadPoolExecutor(max_workers=1) as pool:
        starting = pool.submit(_in_thread, serving_ensure, run, state, serving, labelled)
        trainer = _load_trainer(run, state)
        fresh = starting.result()
    if lora_models(run) and not state.trainer_dir:
        # stock vLLM serves versions as adapters: the first one is the untrained adapter (B = 0)
        serving = Path(settings.RL_CHECKPOINT_ROOT) / f"run{run.pk}" / f"u000000-v{state.version}"
        trainer.save(serving, state.version)
    # A start checkpoint that names its own version (a fork) relabels what was started as v0.
    # Servers already serving the committed version (a chunk that follows one that yielded the
    # train worker) are not loaded again.
    serving_push(run, state, serving, state.version,
                 skip=(fresh if state.version == labelled else set()) | serving_current(run, state.version))  # fmt: skip
    sync_s: float | None = time.perf_counter() - t0
    checked = time.monotonic()
    curator = curator_of(run, state)
    n_slots = int(run.config["env"]["parallel_envs"])
    last_id = "0-0"
    window_start = time.perf_counter()
    idle_s = 0.0
    done = 0
    while True:
        _beat(state, chunk)
        run.refresh_from_db()
        if run.status != RunStatus.RUNNING:
            return "paused" if run.status == RunStatus.PAUSED else "ended"
        lifeline_set(run.pk)
        if (
            time.monotonic() - checked > SERVING_CHECK_S
        ):  # a server that died comes back with the committed weights
            serving_ensure(
                run, state, Path(state.trainer_dir) if state.trainer_dir else serving, state.version
            )
            checked = time.monotonic()
        slots.slots_supervise(run.pk, n_slots, weight=share.weight_of(run.config))
        groups = _collect(run, state)
        if groups is None:
            if _yield_trainer(run, min_hold_s=0.0):
                return _hand_on(run, state, chunk)
            waited = time.perf_counter()
            last_id = pool_wait(run_id=run.pk, last_id=last_id, timeout_s=WAIT_S)
            idle_s += time.perf_counter() - waited
            close_old_connections()
            continue
        # The window runs from the end of the last update to the end of this one (waiting + updating),
        # so rates and the idle fraction cover every second the trainer lived through.
        _update(run, state, chunk, trainer, curator, groups, window=(window_start, idle_s), sync_s=sync_s)
        sync_s = None
        window_start, idle_s = time.perf_counter(), 0.0
        done += 1
        if done >= settings.RL_UPDATES_PER_CHUNK or _yield_trainer(run, min_hold_s=settings.RL_TRAIN_SHARE_S):
            run.refresh_from_db()
            if run.status != RunStatus.RUNNING:
                return "ended"
            return _hand_on(run, state, chunk)


def _collect(run: Run, state: EngineState) -> list[RolloutGroup] | None:
    """Groups to train on now, or None to keep waiting (SPEC §8: the trainer steps when completed
    trajectories reach the minimum batch; unfinished groups stay in the pool)."""
    ready = groups_ready(run=run, batch=state.updates)
    if not ready:
        return None
    if run.mode == RunMode.SYNC:
        batch = RolloutGroup.objects.filter(run=run, batch=state.updates).count()
        if len(ready) < batch or batch < sync_batch_groups(run):
            return None
        return ready
    completed = group_trajectories([g.pk for g in ready], run)
    need = int(run.config["curation"]["min_batch_trajectories"])
    bound = int(run.config["curation"]["staleness_bound"])
    chosen, count = [], 0
    for group in ready:
        chosen.append(group)
        # Only rollouts the update may still train on count towards the batch: groups left beyond the
        # staleness bound (they piled up during a long update) ride along and close with the next
        # update instead of making updates of their own — 20 empty updates in 3 s on `make up`,
        # each one of the run's max_updates, after a first update of 215 s.
        count += sum(
            1 for t in completed[group.pk]
            if t.status == TrajectoryStatus.COMPLETED
            and within_staleness_bound(rollout_outcome(t).policy_version, state.version, bound)
        )  # fmt: skip
        if count >= need:
            return chosen
    return None


@dataclass
class _Batch:
    """What one update trains on: the samples, each group's plan (for the dashboards), the fresh
    rollouts trained on, every finished rollout (for the outcome figures) and what curation did."""

    samples: list[TrajectorySample] = field(default_factory=list)
    plans: dict[int, dict[str, Any]] = field(default_factory=dict)
    trained: set[int] = field(default_factory=set)
    finished: list[Trajectory] = field(default_factory=list)
    injections: dict[str, int] = field(
        default_factory=lambda: {"experience_pool": 0, "bepa_cache": 0, "replay": 0}
    )
    stale: int = 0


def _update(
    run: Run, state: EngineState, chunk: int, trainer: PolicyTrainer, curator: GroupCurator,
    groups: list[RolloutGroup], *, window: tuple[float, float], sync_s: float | None,
) -> None:  # fmt: skip
    """One update: curate the groups into samples, train, save and serve the weights, commit the
    new version with the groups' plans (unless the chunk was superseded), record the figures."""
    batch = _batch(run, state, trainer, curator, groups)
    before = trainer.version
    metrics, step_stats = _train(run, trainer, batch)
    # Nothing to learn from (every rollout stale or without signal): the groups still close below, but the
    # weights did not change, so neither does the version. Moving it would make every rollout in flight
    # one version staler and, under a tight staleness bound, leave the next batches empty too.
    version = trainer.version
    out_dir = Path(settings.RL_CHECKPOINT_ROOT) / f"run{run.pk}" / f"u{state.updates + 1:06d}-v{version}"
    trainer.save(out_dir, version, curation_state=curator.to_dict())
    new_policy = version != before
    sync = (serving_push(run, state, out_dir, version) if new_policy else 0.0) + (sync_s or 0.0)
    parent = Checkpoint.objects.filter(run=run).order_by("-created_at", "-id").first() or run.start_checkpoint
    with transaction.atomic():
        _commit_version(state, chunk, version, out_dir, curator)
        _close_groups(groups, batch, version)
        _store_step_stats(step_stats, batch.trained)
        if new_policy:
            _register_checkpoints(run, trainer, version, out_dir, parent, metrics)
    barrier_lift(run_id=run.pk, updates=state.updates)  # committed: the next sync batch may go out
    measures.update_record(
        run, state.updates, version, metrics, batch.finished, batch.trained, batch.injections, batch.stale,
        window, sync,
    )  # fmt: skip


def _batch(
    run: Run, state: EngineState, trainer: PolicyTrainer, curator: GroupCurator, groups: list[RolloutGroup]
) -> _Batch:
    """Curate each group's completed rollouts (staleness, signal, injections) into samples."""
    by_group = group_trajectories([g.pk for g in groups], run)
    profile = run_profile(run)
    chat = profile if not profile.include_elements else None  # the embedded layout is not a chat prompt
    batch = _Batch()
    step_credit = run.algorithm == "grpo" and trainer.config.grpo.anchor_weight > 0
    for group in groups:
        done = [t for t in by_group[group.pk] if t.status == TrajectoryStatus.COMPLETED]
        batch.finished += done
        if not done:
            batch.plans[group.pk] = {"skipped": "no completed rollout"}
            continue
        plan = curator.process_group(
            group.task.external_id, [rollout_outcome(t) for t in done], state.version, step_credit
        )
        batch.plans[group.pk] = plan.to_dict()
        batch.stale += len(plan.stale_ids)
        if plan.no_signal and run.algorithm == "grpo":
            continue
        fresh = {int(i) for i in plan.train_ids}
        for t in done:
            if t.pk in fresh and (s := trajectory_sample(t, str(group.pk), profile=chat)) is not None:
                batch.samples.append(s)
                batch.trained.add(t.pk)
        for use in plan.injections:
            batch.injections[use.source] = batch.injections.get(use.source, 0) + 1
            if (s := _injected_sample(int(use.trajectory_id), group, trainer, chat)) is not None:
                batch.samples.append(s)
    return batch


def _injected_sample(
    trajectory_id: int, group: RolloutGroup, trainer: PolicyTrainer, chat: ModelProfile | None
) -> TrajectorySample | None:
    """A stored success injected into `group` (BEPA cache / experience pool), its log-probs
    recomputed under the current policy; None when it is gone or the model cannot write it."""
    stored = Trajectory.objects.filter(pk=trajectory_id).select_related("task").first()
    s = stored and trajectory_sample(
        stored, str(group.pk), sample_id=f"{stored.pk}@g{group.pk}", grammar=trainer.grammar, profile=chat
    )
    if not s:
        return None
    for step, lps in zip(s.steps, trainer.recompute_logprobs(s.steps), strict=True):
        step.rollout_logprobs, step.policy_version = lps, trainer.version
    return s


def _train(
    run: Run, trainer: PolicyTrainer, batch: _Batch
) -> tuple[dict[str, float], dict[str, list[dict[str, Any]]]]:
    """The update's figures and per-step statistics: PPO pretrains its critic on the fixed policy
    first (seed 000 §2.5.4, the version stays); otherwise one policy update, then Entropulse's check."""
    metrics: dict[str, float] = measures.curation_figures(batch.plans.values())
    if not batch.samples:
        return metrics, {}
    if run.algorithm == "ppo" and trainer.value_pretrain_done is None:
        metrics.update(trainer.pretrain_value(batch.samples))
        for entry in batch.plans.values():
            entry["value_pretraining"] = True
        return metrics, {}
    # The learning-rate schedule anneals over the run's budget (counters as of now, not as loaded).
    lr_scale = trainer.set_progress(state.run_budget_fraction(Run.objects.get(pk=run.pk)))
    metrics.update(trainer.update(batch.samples))
    metrics["policy/lr_scale"] = lr_scale
    metrics.update(entropulse_after_update(run, trainer))
    return metrics, trainer.last_step_stats


def _commit_version(
    state: EngineState, chunk: int, version: int, out_dir: Path, curator: GroupCurator
) -> None:
    """The engine state moves to `version` (in the caller's transaction), unless a newer chunk of
    the learner took over meanwhile."""
    locked = EngineState.objects.select_for_update().get(pk=state.pk)
    if locked.chunk != chunk:
        raise Superseded(f"chunk {chunk} superseded before committing version {version}")
    locked.version, locked.updates, locked.trainer_dir = version, locked.updates + 1, str(out_dir)
    locked.curation = curator.to_dict()
    locked.save(update_fields=["version", "updates", "trainer_dir", "curation", "updated_at"])
    state.version, state.updates, state.trainer_dir = locked.version, locked.updates, locked.trainer_dir


def _close_groups(groups: list[RolloutGroup], batch: _Batch, version: int) -> None:
    for group in groups:
        has_samples = any(s.group_id == str(group.pk) for s in batch.samples)
        RolloutGroup.objects.filter(pk=group.pk).update(
            state=RolloutGroupState.TRAINED if has_samples else RolloutGroupState.SKIPPED,
            trained_version=version, plan=batch.plans[group.pk],
        )  # fmt: skip


def _store_step_stats(step_stats: dict[str, list[dict[str, Any]]], trained: set[int]) -> None:
    """The trainer's per-step figures (value, advantage, ratio, ...) into the trained rollouts' steps."""
    for trajectory_id, rows in step_stats.items():
        if not trajectory_id.isdigit() or int(trajectory_id) not in trained:
            continue
        steps = list(
            Step.objects.filter(trajectory_id=int(trajectory_id), rl__has_key="token_ids").order_by("index")
        )
        for step, stats in zip(steps, rows, strict=False):
            step.rl = {**step.rl, **{k: v for k, v in stats.items() if k != "policy_version"}}
        Step.objects.bulk_update(steps, ["rl"])


def _register_checkpoints(
    run: Run, trainer: PolicyTrainer, version: int, out_dir: Path, parent: Checkpoint | None,
    metrics: dict[str, float],
) -> None:  # fmt: skip
    """The new policy as a checkpoint, and its averaged weights beside it when the trainer keeps them."""
    online = checkpoint_register(
        version=f"run{run.pk}-v{version}", path=str(out_dir), parent=parent, run_id=run.pk,
        metrics={k: metrics[k] for k in ("policy/entropy", "policy/kl") if k in metrics},
    )  # fmt: skip
    if (out_dir / EMA_DIR / "config.json").is_file():
        decay = trainer.config.section.weight_ema
        checkpoint_register(
            version=f"run{run.pk}-v{version}-ema", path=str(out_dir / EMA_DIR), parent=online,
            run_id=run.pk, metrics={"weight_ema": decay},
            notes=f"averaged weights (EMA, decay {decay:g}) of run {run.pk} up to version {version}",
        )  # fmt: skip
