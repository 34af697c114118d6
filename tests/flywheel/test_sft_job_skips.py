"""SFT from a dataset leaves out steps the model cannot write (real Chromium, PostgreSQL, torch)."""

from __future__ import annotations

import pytest

from webapp.flywheel.services.datasets import dataset_build
from webapp.flywheel.services.sampling import record_expert_episode
from webapp.store.checkpoints import checkpoint_create_initial

pytestmark = pytest.mark.django_db


def test_sft_leaves_out_steps_the_model_cannot_write(tasks) -> None:
    """A sampled RL thought longer than the model's thought cap used to fail the whole SFT job."""
    from webapp.flywheel.services.training import checkpoint_sft
    from webapp.flywheel.services.validation import validate_pending
    from webapp.store.models import Step
    from workers.envs.browser.miniwob import MiniWoBEnv

    env = MiniWoBEnv(wait_s=0.0)
    try:
        good = record_expert_episode(env=env, task=tasks[0], seed=7)
        long = record_expert_episode(env=env, task=tasks[0], seed=8)
    finally:
        env.close()
    assert good is not None and long is not None
    Step.objects.filter(trajectory=long).update(thought="x " * 400)
    validate_pending()
    child = checkpoint_sft(parent=checkpoint_create_initial(version="fw-sft-skip"), dataset=dataset_build(),
                           steps=2, version="fw-sft-skip-child")  # fmt: skip
    sft = child.metrics["sft"]
    assert sft["examples"] == 1 and sft["skipped_examples"] == 1 and sft["steps"] == 2
