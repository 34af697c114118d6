"""Rejection sampling end to end on real MiniWoB++ pages in Chromium with the real embedded model:
episodes stored with screenshots and element lists, verified, validated, counted per chunk; the
scripted expert's stand-in annotations; cancellation."""

from __future__ import annotations

import pytest

from webapp.flywheel.models import FlywheelJob
from webapp.flywheel.services.datasets import dataset_build
from webapp.flywheel.services.jobs import job_cancel, job_create
from webapp.flywheel.services.sampling import record_expert_episode
from webapp.flywheel.services.training import dataset_sft_examples
from webapp.flywheel.tasks import rejection_sampling_chunk, rejection_sampling_plan, rejection_sampling_start
from webapp.store.checkpoints import checkpoint_create_initial
from webapp.store.models import Trajectory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_rejection_sampling_job_stores_validated_episodes(tasks) -> None:
    init = checkpoint_create_initial(version="fw-rs-init")
    job = job_create(
        kind="rejection_sampling", checkpoint=init, enqueue=False,
        params={"task_ids": [tasks[0].pk], "k": 2, "chunk": 1, "max_steps": 1, "max_new_tokens": 12},
    )  # fmt: skip
    assert rejection_sampling_plan(job) == [(tasks[0].pk, [10_000]), (tasks[0].pk, [10_001])]
    rejection_sampling_start(job.pk, inline=True)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert (job.done_units, job.total_units, job.result["episodes"]) == (2, 2, 2)
    assert job.result["v1"] + job.result["v0"] == 2
    trajs = list(Trajectory.objects.filter(source="rejection_sampling").order_by("id"))
    assert [t.metadata["seed"] for t in trajs] == [10_000, 10_001]
    for t in trajs:
        assert t.checkpoint == init and t.validation in (0, 1) and t.validator == "verifier"
        step = t.steps.get()
        assert step.screenshot and step.rl["elements"] and step.rl["instruction"]
        assert step.policy_version == "fw-rs-init"
    rejection_sampling_chunk(job.pk, tasks[0].pk, [10_005])  # a late duplicate chunk of a finished job
    assert Trajectory.objects.filter(source="rejection_sampling").count() == 2


def test_expert_stand_in_annotations_feed_sft(tasks) -> None:
    from workers.envs.browser.miniwob import MiniWoBEnv

    env = MiniWoBEnv(wait_s=0.0)
    try:
        trajectory = record_expert_episode(env=env, task=tasks[0], seed=7)
        bare = record_expert_episode(env=env, task=tasks[0], seed=8, thoughts=False)
    finally:
        env.close()
    assert bare is not None and bare.final_reward == 1.0
    assert [(s.thought, s.raw_text.split("\n")[0]) for s in bare.steps.all()] == [("", "Thought: ")]
    bare.delete()
    assert trajectory is not None and trajectory.final_reward == 1.0
    assert trajectory.source == "annotation" and trajectory.policy_version == "scripted-expert"
    assert "scripted" in trajectory.metadata["stand_in"]
    from webapp.flywheel.services.validation import validate_pending

    validate_pending()
    examples = dataset_sft_examples(dataset=dataset_build())
    assert len(examples) == 1 and examples[0].target.startswith("Thought: Click the button.")


def test_cancelled_job_samples_nothing(tasks) -> None:
    init = checkpoint_create_initial(version="fw-rs-init")
    job = job_create(
        kind="rejection_sampling", checkpoint=init, enqueue=False, params={"task_ids": [tasks[0].pk], "k": 3}
    )
    FlywheelJob.objects.filter(pk=job.pk).update(status="running")
    job_cancel(job=job)
    assert rejection_sampling_chunk(job.pk, tasks[0].pk, [1, 2, 3])["episodes"] == 0
    assert not Trajectory.objects.exists()
