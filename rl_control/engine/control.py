"""Starting and watching a run's engine (light imports: called from the web process's services).

`engine_start` gives the trainer a new chunk number (fencing any older chunk) and enqueues it on
the train queue; the trainer starts the rollout slots. `engine_watch_run` (beat) restarts a trainer
whose heartbeat stopped and supervises the slots.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rl_control.engine import share, slots
from rl_control.models import EngineState, Run, RunStatus
from webapp.store.checkpoints import checkpoint_dir


def engine_state(run: Run) -> EngineState:
    state, _ = EngineState.objects.get_or_create(run=run)
    return state


def start_dir(run: Run) -> Path:
    """Weights the run starts from: its start checkpoint, else the untrained initial checkpoint."""
    from webapp.store.checkpoints import checkpoint_create_initial

    checkpoint = run.start_checkpoint or checkpoint_create_initial()
    return checkpoint_dir(checkpoint)


def engine_start(*, run: Run) -> int:
    """Start (or restart) the trainer of a running run: a new chunk number fences off any older
    chunk; returns it. The trainer starts the rollout slots itself."""
    from rl_control.tasks import serving_start, train_chunk

    state = engine_state(run)
    with transaction.atomic():
        locked = EngineState.objects.select_for_update().get(pk=state.pk)
        locked.chunk += 1
        locked.trainer_heartbeat = timezone.now()
        locked.save(update_fields=["chunk", "trainer_heartbeat", "updated_at"])
        chunk = locked.chunk

    def enqueue() -> None:
        # The run wants the trainer from now: a trainer of another run yields it (engine.share).
        share.want(pool=share.TRAIN, run_id=run.pk, weight=share.weight_of(run.config), cap=1)
        train_chunk.apply_async(args=[run.pk, chunk], queue=settings.RL_TRAIN_QUEUE)
        # Its policy servers and rollout slots start now, not when the trainer gets the train worker
        # (while another run trains, that was minutes): rollouts sample from the start weights.
        serving_start.apply_async(args=[run.pk], queue=settings.RL_SERVING_START_QUEUE)

    transaction.on_commit(enqueue)
    return chunk


def serving_start_run(*, run_id: int) -> str:
    """A running run's own policy servers, with the weights its trainer would serve now, and its
    rollout slots: started at launch, before its trainer gets the train worker."""
    from rl_control.engine.serving import serving_ensure

    run = Run.objects.get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return "not running"
    state = engine_state(run)
    checkpoint = Path(state.trainer_dir) if state.trainer_dir else start_dir(run)
    serving_ensure(run, state, checkpoint, state.version)
    slots.slots_supervise(run.pk, int(run.config["env"]["parallel_envs"]), weight=share.weight_of(run.config))
    return "started"


def engine_watch_run(*, run: Run) -> bool:
    """Watchdog for a running run: restart a trainer chunk that stopped beating, supervise slots."""
    from rl_control.engine.serving import lifeline_renew

    state = engine_state(run)
    lifeline_renew(run.pk)  # keeps the run's policy servers up while its trainer waits in the queue
    restarted = False
    stale = timezone.now() - timedelta(seconds=max(60.0, 4 * settings.RL_SLOT_TIMEOUT_S))
    if state.trainer_heartbeat is None or state.trainer_heartbeat < stale:
        engine_start(run=run)
        restarted = True
    got = slots.slots_supervise(
        run.pk, int(run.config["env"]["parallel_envs"]), weight=share.weight_of(run.config)
    )
    return restarted or bool(got["started"])
