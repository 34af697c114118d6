"""Entropulse in the engine (seed 001 §3.3): after an update, when the run enables it and the
trainer's plateau detector says the reward stagnates while entropy does not recover, one SFT phase
on the run's most recent successful rollouts (`PolicyTrainer.entropulse`: SFT, then the KL reference
and the detector reset); RL goes on from the new weights, which the learner saves and pushes as the
update's version. The phase counter is recorded every update (`policy/entropulse_phases`), so the
dashboard can shade each SFT phase between the RL phases."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from rl_control.models import Run
from webapp.store.models import Trajectory, TrajectoryStatus
from workers.policy.base import PolicyError
from workers.rl.run_config import EntropulseSettings
from workers.rl.trainer import PolicyTrainer

log = logging.getLogger(__name__)


def entropulse_after_update(run: Run, trainer: PolicyTrainer) -> dict[str, float]:
    """Run an SFT phase when it is due; the update's Entropulse figures (empty when disabled)."""
    from rl_control.engine.rollout import run_profile
    from rl_control.engine.samples import trajectory_sample

    cfg = EntropulseSettings.model_validate(run.config.get("entropulse") or {})
    if not cfg.enabled:
        return {}
    out: dict[str, float] = {"policy/entropulse_phases": float(trainer.entropulse_count)}
    if trainer.entropulse_count >= cfg.max_phases or not trainer.plateaued:
        return out
    recent = (
        Trajectory.objects.filter(run=run, status=TrajectoryStatus.COMPLETED, metadata__engine__success=True)
        .select_related("task")
        .order_by("-finished_at", "-pk")[: cfg.successes]
    )
    profile = run_profile(run)
    chat = profile if not profile.include_elements else None  # an HF VLM run: its rollouts' chat prompts
    samples = [
        s for t in recent if (s := trajectory_sample(t, "entropulse", grammar=trainer.grammar, profile=chat))
    ]
    if not samples:
        log.info("run %s: training plateaued but there is no stored success to run Entropulse on", run.pk)
        return out
    started = time.perf_counter()
    Path(settings.RL_CHECKPOINT_ROOT).mkdir(parents=True, exist_ok=True)  # the SFT phase's scratch space
    try:
        figures: dict[str, Any] = trainer.entropulse(
            samples, steps=cfg.sft_steps, lr=cfg.sft_lr, batch_size=cfg.sft_batch_size,
            workdir=settings.RL_CHECKPOINT_ROOT,
        )  # fmt: skip
    except PolicyError as exc:
        log.warning("run %s: Entropulse skipped: %s", run.pk, exc)
        return out
    log.info(
        "run %s: Entropulse phase %d on %d examples", run.pk, trainer.entropulse_count, figures["examples"]
    )
    out.update({
        "policy/entropulse_phases": float(trainer.entropulse_count),
        "policy/entropulse_sft_loss": float(figures["loss_last"]),
        "policy/entropulse_sft_examples": float(figures["examples"]),
        "policy/entropulse_sft_s": time.perf_counter() - started,
    })  # fmt: skip
    return out
