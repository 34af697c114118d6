"""The data manager: hands out rollouts, keeps the streaming pool, says which groups are ready to train.

Rollouts are handed out as slots of `RolloutGroup`s (task, N from dynamic sampling, step limit from
the longest success so far, capped by the run's step cap and the task's own `setup["max_steps"]`;
workers.rl.curator state kept in `EngineState.curation`). A slot is claimed by one conditional
UPDATE (`issued < size`), in the same transaction that creates its `Trajectory`, so a slot is
never rolled out twice.

Async mode: a free environment takes the oldest open slot, or opens a new group (rollout-wise
scheduling). It waits only when the rollouts already out, still fresh, would fill the trainer's
next `staleness_bound + 1` batches (`rollouts_ahead_limit`): a rollout started then could only be
trained on beyond the bound, so it would cost the machine an episode for nothing (AReaL's staleness
control, Fu et al. 2025). When the trainer keeps up, the gate never closes; when it is the slower
side (a CPU update on the same cores as the browsers), the cores go to the update instead of to
episodes it would drop. It waits at the barrier below, which every committed update lifts. The
curator's staleness bound still drops what grew too old at training time.
Sync mode (coupled baseline): the groups of batch `u` are opened together once the trainer has made
u updates; an environment with no slot left in the batch waits until the trainer has consumed the
whole batch in update u + 1 and pushed its weights (the barrier). Batches count updates, not policy
versions: PPO's value pretraining updates the critic and keeps the version.

The streaming pool: every completed trajectory is appended to the Redis stream
`<prefix>:run:<id>:pool` (the trainer blocks on it instead of polling) and is durable as its
PostgreSQL row; the trainer reads the pool from PostgreSQL, so a Redis restart loses nothing.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F, Q

from rl_control.engine.keys import key, rds
from rl_control.models import EngineState, RolloutGroup, RolloutGroupState, Run, RunMode
from webapp.store import services as store
from webapp.store.models import UNTRAINABLE_REVIEW_STATES, Task, Trajectory, TrajectoryStatus
from webapp.store.taskspec import task_step_budget
from workers.rl.config import CurationConfig
from workers.rl.curator import GroupCurator
from workers.rl.run_config import MIXED_KIND

POOL_MAXLEN = 100_000


def run_tasks(run: Run) -> list[Task]:
    """The run's tasks: its explicit list, else every enabled, supported task of its pool of the
    run's env kind (of any kind for a "mixed" run), by id."""
    ids = run.config.get("task_ids") or []
    qs = Task.objects.filter(pk__in=ids) if ids else Task.objects.filter(pool_id=run.pool_id)
    kind = run.config.get("env", {}).get("kind")
    if kind and kind != MIXED_KIND:
        qs = qs.filter(env_kind=kind)
    return list(qs.filter(enabled=True, supported=True).order_by("pk"))


def curator_of(run: Run, state: EngineState) -> GroupCurator:
    """The run's curator: as the trainer last saved it, else a new one (its experience pool
    pre-populated with stored successes, seed 002 §4.2)."""
    if state.curation:
        return GroupCurator.from_dict(state.curation)
    curator = GroupCurator(
        CurationConfig.model_validate({**run.config["curation"], "seed": run.config.get("seed", 0)})
    )
    if curator.config.injection == "experience_pool":
        for task_key, trajectory_id in stored_successes(run, curator.config.experience_pool_per_task):
            curator.pool.add(task_key, trajectory_id)
    return curator


def stored_successes(run: Run, per_task: int) -> list[tuple[str, str]]:
    """Successes of the run's tasks collected before it (seed 002 §4.2: the experience pool is
    pre-populated "through preliminary sampling"): trajectories validated V(s) = 1 (annotations,
    expert demonstrations, rejection sampling) or completed with a positive verifier reward and not
    validated otherwise; other runs' rollouts count too. Up to `per_task` per task, oldest first
    (the pool keeps the newest)."""
    out: list[tuple[str, str]] = []
    good = Q(validation=1) | Q(validation__isnull=True, final_reward__gt=0)
    for task in run_tasks(run):
        rows = (
            Trajectory.objects.filter(good, task=task, status=TrajectoryStatus.COMPLETED, num_steps__gt=0)
            .exclude(run=run)
            .exclude(review_state__in=UNTRAINABLE_REVIEW_STATES)
            .order_by("-finished_at", "-pk")
            .values_list("pk", flat=True)[:per_task]
        )
        out += [(task.external_id, str(pk)) for pk in reversed(list(rows))]
    return out


def group_size(run: Run, curator: GroupCurator, task: Task) -> int:
    """PPO trains on single rollouts; GRPO on groups of N (dynamic N, seed 002 §4.1)."""
    if run.algorithm == "ppo":
        return 1
    return max(2, curator.rollouts.n_for(task.external_id))


def sync_batch_groups(run: Run) -> int:
    """Groups per synchronous batch: enough for the trainer's minimum batch."""
    n = run.config["grpo"]["rollouts_per_task"] if run.algorithm == "grpo" else 1
    return max(1, math.ceil(run.config["curation"]["min_batch_trajectories"] / n))


def _open_group(run: Run, state: EngineState, *, batch: int | None) -> RolloutGroup:
    """Next task in the run's order (a seeded shuffle per pass over the tasks, curriculum by N)."""
    tasks = run_tasks(run)
    if not tasks:
        raise RuntimeError(f"run {run.pk} has no enabled task")
    curator = curator_of(run, state)
    counters = dict(state.counters)
    position = int(counters.get("next_task", 0))
    epoch, index = divmod(position, len(tasks))
    order = list(tasks)
    random.Random(f"{run.config.get('seed', 0)}:{epoch}").shuffle(order)
    task = order[index]
    counters["next_task"] = position + 1
    EngineState.objects.filter(pk=state.pk).update(counters=counters)
    state.counters = counters
    cap = run.config["curation"]["step_cap"]
    limit = curator.step_limit.limit_for(task.external_id) if state.curation else cap
    limit = min(limit, task_step_budget(task) or limit)
    return RolloutGroup.objects.create(
        run=run, task=task, size=group_size(run, curator, task), step_limit=max(1, min(limit, cap)),
        created_version=state.version, batch=batch,
    )  # fmt: skip


def rollouts_ahead_limit(run: Run) -> int:
    """Async: the fresh rollouts the run may have out at once: the trainer's next `staleness_bound + 1`
    batches, and one per environment at least."""
    curation = run.config["curation"]
    batches = int(curation["staleness_bound"]) + 1
    return max(batches * int(curation["min_batch_trajectories"]), int(run.config["env"]["parallel_envs"]))


def rollouts_ahead(run: Run, state: EngineState) -> int:
    """Rollouts of open groups, running or completed and not yet trained on, that were handed out at
    a version still within the staleness bound: what the trainer's next updates can take. A crashed
    or cancelled rollout is not counted: it gives the trainer nothing, so it must not hold a place."""
    bound = int(run.config["curation"]["staleness_bound"])
    fresh = [f"v{v}" for v in range(max(0, state.version - bound), state.version + 1)]
    open_ids = list(
        RolloutGroup.objects.filter(run=run, state=RolloutGroupState.OPEN).values_list("pk", flat=True)
    )
    return Trajectory.objects.filter(
        run=run,
        policy_version__in=fresh,
        metadata__engine__group__in=open_ids,
        status__in=(TrajectoryStatus.RUNNING, TrajectoryStatus.COMPLETED),
    ).count()


@dataclass(frozen=True)
class Claim:
    group: RolloutGroup
    slot: int  # index of the rollout within its group
    trajectory: Trajectory


def rollout_claim(*, run: Run, env_slot: int, generation: int) -> Claim | None:
    """Claim the next rollout for an environment, creating its running Trajectory; None = wait."""
    with transaction.atomic():
        state = EngineState.objects.select_for_update().get(run=run)
        sync = run.mode == RunMode.SYNC
        open_groups = RolloutGroup.objects.filter(run=run, state=RolloutGroupState.OPEN)
        if sync:
            open_groups = open_groups.filter(batch=state.updates)
        group = open_groups.filter(issued__lt=F("size")).order_by("id").first()
        if group is None:
            if sync:
                if open_groups.exists() or RolloutGroup.objects.filter(run=run, batch=state.updates).exists():
                    return None  # batch fully handed out: wait at the barrier
                groups = [_open_group(run, state, batch=state.updates) for _ in range(sync_batch_groups(run))]
                group = groups[0]
            else:
                if rollouts_ahead(run, state) >= rollouts_ahead_limit(run):
                    return None  # the trainer's next batches are out already: wait for an update
                group = _open_group(run, state, batch=None)
        if group is None:
            return None
        RolloutGroup.objects.filter(pk=group.pk).update(issued=F("issued") + 1)
        group.refresh_from_db()
        trajectory = store.trajectory_create(
            task=group.task, source="rl", run_id=run.pk, policy_version=f"v{state.version}",
            metadata={"engine": {"group": group.pk, "slot": group.issued - 1, "env_slot": env_slot,
                                 "generation": generation, "step_limit": group.step_limit}},
        )  # fmt: skip
    return Claim(group=group, slot=group.issued - 1, trajectory=trajectory)


def pool_push(*, run_id: int, trajectory_id: int, group_id: int) -> None:
    rds().xadd(key(run_id, "pool"), {"trajectory": trajectory_id, "group": group_id}, maxlen=POOL_MAXLEN)


def _stream_wait(stream: str, last_id: str, timeout_s: float) -> str:
    """Block until an entry lands in `stream` after `last_id` (or the timeout); the newest id."""
    got: Any = rds().xread({stream: last_id}, block=max(1, int(timeout_s * 1000)))
    if not got:
        return last_id
    return got[0][1][-1][0].decode()


def pool_wait(*, run_id: int, last_id: str, timeout_s: float) -> str:
    """Block until a trajectory lands in the pool after `last_id` (or the timeout); the newest id."""
    return _stream_wait(key(run_id, "pool"), last_id, timeout_s)


# The sync barrier: an environment whose claim found the batch handed out waits for the next
# committed update instead of asking PostgreSQL again every few milliseconds (each claim locks the
# run's engine-state row). `barrier_mark` before the claim, `barrier_wait` from that mark after it:
# an update committed in between wakes the wait at once.
def barrier_mark(*, run_id: int) -> str:
    newest: Any = rds().xrevrange(key(run_id, "updates"), count=1)
    return newest[0][0].decode() if newest else "0-0"


def barrier_lift(*, run_id: int, updates: int) -> None:
    """An update was committed (the learner, after its transaction): wake the waiting environments."""
    rds().xadd(key(run_id, "updates"), {"updates": updates}, maxlen=POOL_MAXLEN)


def barrier_wait(*, run_id: int, mark: str, timeout_s: float) -> str:
    return _stream_wait(key(run_id, "updates"), mark, timeout_s)


def groups_ready(*, run: Run, batch: int) -> list[RolloutGroup]:
    """Open groups whose every slot was handed out and none is still running (sync: batch `batch` only)."""
    qs = (
        RolloutGroup.objects.filter(run=run, state=RolloutGroupState.OPEN, issued=F("size"))
        .select_related("task")
        .order_by("id")
    )
    if run.mode == RunMode.SYNC:
        qs = qs.filter(batch=batch)
    groups = list(qs)
    if not groups:
        return []
    running = {
        int(g)
        for g in Trajectory.objects.filter(run=run, status=TrajectoryStatus.RUNNING).values_list(
            "metadata__engine__group", flat=True
        )
        if g is not None
    }
    return [g for g in groups if g.pk not in running]


def group_trajectories(group_ids: list[int], run: Run) -> dict[int, list[Trajectory]]:
    out: dict[int, list[Trajectory]] = {g: [] for g in group_ids}
    for t in Trajectory.objects.filter(run=run, metadata__engine__group__in=group_ids).order_by("pk"):
        out[int(t.metadata["engine"]["group"])].append(t)
    return out


def pool_fill(*, run: Run) -> int:
    """Completed trajectories not yet consumed by the trainer (the streaming pool's fill)."""
    open_ids = RolloutGroup.objects.filter(run=run, state=RolloutGroupState.OPEN).values_list("pk", flat=True)
    return Trajectory.objects.filter(
        Q(run=run, status=TrajectoryStatus.COMPLETED), metadata__engine__group__in=list(open_ids)
    ).count()
