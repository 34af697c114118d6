"""Merging checkpoints of one SFT parent (θ = Σ α_k θ_k, refusing other lineages and bad weights) and
the task-pool refresh (buckets, weights toward failing tasks, history)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tests.flywheel.conftest import make_trajectory
from webapp.flywheel.models import FlywheelJob, PoolRefresh, TaskWeight
from webapp.flywheel.services.jobs import JobError, job_create
from webapp.flywheel.services.refresh import assignment_weight, pool_refresh
from webapp.flywheel.services.training import TrainingError, checkpoint_merge
from webapp.flywheel.tasks import merge_execute
from webapp.store.checkpoints import checkpoint_dir
from webapp.store.models import Task

pytestmark = pytest.mark.django_db


def _weights(checkpoint) -> dict[str, torch.Tensor]:
    return load_file(str(checkpoint_dir(checkpoint) / "model.safetensors"))


def test_merge_interpolates_and_registers(lineage) -> None:
    merged = checkpoint_merge(
        checkpoints=[lineage["rl_1"], lineage["rl_2"]], weights=[0.75, 0.25], version="fw-m"
    )
    assert merged.parent == lineage["sft_a"]
    assert merged.metrics["merge"]["weights"] == [0.75, 0.25]
    a, b, m = _weights(lineage["rl_1"]), _weights(lineage["rl_2"]), _weights(merged)
    assert set(m) == set(a)
    for key in a:
        if a[key].is_floating_point():
            torch.testing.assert_close(m[key], 0.75 * a[key] + 0.25 * b[key], atol=1e-5, rtol=1e-5)
    from workers.policy.embedded.policy import load_checkpoint

    model, _ = load_checkpoint(checkpoint_dir(merged))
    assert model.config.flywheel_version == "fw-m" and model.config.flywheel_parent == "fw-sft-a"


def test_merge_refuses_other_lineages_and_bad_weights(lineage) -> None:
    with pytest.raises(TrainingError, match="share one SFT parent"):
        checkpoint_merge(checkpoints=[lineage["rl_1"], lineage["rl_3"]], weights=[0.5, 0.5])
    with pytest.raises(TrainingError, match="sum to 1"):
        checkpoint_merge(checkpoints=[lineage["rl_1"], lineage["rl_2"]], weights=[0.5, 0.6])
    with pytest.raises(TrainingError, match="≥ 0"):
        checkpoint_merge(checkpoints=[lineage["rl_1"], lineage["rl_2"]], weights=[1.5, -0.5])
    with pytest.raises(JobError, match="fw-rl-1 ← fw-sft-a, fw-rl-3 ← fw-sft-b"):
        job_create(kind="merge", params={"checkpoints": ["fw-rl-1", "fw-rl-3"], "weights": [0.5, 0.5]})
    # Two SFT children of one SFT parent merge too (domain-specialised SFTs of seed 000 §2.6) ...
    checkpoint_merge(checkpoints=[lineage["sft_a"], lineage["sft_b"]], weights=[0.5, 0.5])


def test_merge_job_runs_to_a_terminal_state(lineage, django_capture_on_commit_callbacks) -> None:
    job = job_create(
        kind="merge", params={"checkpoints": ["fw-rl-1", "fw-rl-2"], "weights": [0.5, 0.5]}, enqueue=False
    )
    merge_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert job.checkpoint is not None and job.result["checkpoint"] == job.checkpoint.version
    merge_execute(job.pk)  # a second delivery does nothing
    assert FlywheelJob.objects.get(pk=job.pk).finished_at == job.finished_at


def test_assignment_weight_shifts_toward_failures() -> None:
    assert assignment_weight(1.0, 0.0, 10, 3.0) == 4.0
    assert assignment_weight(1.0, 1.0, 10, 3.0) == 1.0
    assert assignment_weight(2.0, 0.5, 10, 1.0) == 3.0
    assert assignment_weight(1.0, 0.0, 0, 3.0) == 4.0  # unseen counts as failing


def test_refresh_buckets_weights_and_history(tasks, pool) -> None:
    easy, mid, hard = tasks
    for reward in (1, 1, 1, 1):
        make_trajectory(easy, reward=reward, steps=1)
    for reward in (1, 0, 1, 0):
        make_trajectory(mid, reward=reward, steps=1, source="annotation")
    for reward in (0, 0, 0, 1):
        make_trajectory(hard, reward=reward, steps=1, source="rl")
    make_trajectory(hard, reward=1, steps=1, source="import")  # not the current model's outcome
    Task.objects.filter(pk=mid.pk).update(importance=2.0)
    first = pool_refresh(pool=pool, shift=3.0)
    assert first.buckets == {"0-25": 0, "25-50": 1, "50-75": 1, "75-100": 1}
    rows = {r["external_id"]: r for r in first.tasks}
    assert rows["click-test"]["rate"] == 1.0 and rows["click-test"]["bucket"] == "75-100"
    assert rows["focus-text"]["rate"] == 0.25 and rows["focus-text"]["by_source"] == {"rl": [1, 4]}
    hard.refresh_from_db()
    easy.refresh_from_db()
    assert hard.importance > easy.importance == 1.0
    assert hard.success_rate == 0.25 and hard.attempts == 4
    assert TaskWeight.objects.get(task=mid).base_importance == 2.0
    # The model improves on the hard task: its weight falls back; the admin's base importance stays.
    for _ in range(8):
        make_trajectory(hard, reward=1, steps=1, source="rejection_sampling")
    second = pool_refresh(pool=pool, shift=3.0)
    assert {r["external_id"]: r["bucket"] for r in second.tasks}["focus-text"] == "75-100"
    assert TaskWeight.objects.get(task=mid).base_importance == 2.0
    assert list(
        PoolRefresh.objects.filter(pool=pool).order_by("created_at").values_list("pk", flat=True)
    ) == [first.pk, second.pk]


def test_merge_of_hf_vlm_checkpoints_loads_with_transformers(tmp_path) -> None:
    """Two RL checkpoints of a run from the tiny Qwen2.5-VL (parent: the start checkpoint) merge into
    a plain HF directory transformers loads and the policy server serves; kinds never mix."""
    from transformers import AutoModelForImageTextToText

    from webapp.store.models import Checkpoint
    from workers.policy.hf_vlm.model import HFVLMPolicy
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    start = Checkpoint.objects.create(version="vlm-start", path=str(build_tiny_checkpoint(tmp_path / "s", seed=0)),
                                      profile="hf-vlm")  # fmt: skip
    a = Checkpoint.objects.create(version="vlm-rl-1", path=str(build_tiny_checkpoint(tmp_path / "a", seed=1)),
                                  parent=start, profile="hf-vlm")  # fmt: skip
    b = Checkpoint.objects.create(version="vlm-rl-2", path=str(build_tiny_checkpoint(tmp_path / "b", seed=2)),
                                  parent=start, profile="hf-vlm")  # fmt: skip
    merged = checkpoint_merge(checkpoints=[a, b], weights=[0.5, 0.5], version="vlm-m")
    assert merged.parent == start and merged.profile == "hf-vlm"
    wa, wb, wm = _weights(a), _weights(b), _weights(merged)
    assert set(wm) == set(wa)
    for key in wa:
        torch.testing.assert_close(wm[key], 0.5 * wa[key] + 0.5 * wb[key], atol=1e-6, rtol=1e-5)
    model = AutoModelForImageTextToText.from_pretrained(checkpoint_dir(merged))
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert HFVLMPolicy.from_pretrained(checkpoint_dir(merged)).model_version == "vlm-m"
    init = Checkpoint.objects.create(version="emb-child", path=str(tmp_path / "s"), parent=start)
    from webapp.store.checkpoints import checkpoint_create_initial

    emb = checkpoint_create_initial(version="emb-x")
    init.path = str(checkpoint_dir(emb))
    init.save()
    with pytest.raises(TrainingError, match="cannot merge"):  # an embedded and an HF VLM checkpoint
        checkpoint_merge(checkpoints=[a, init], weights=[0.5, 0.5])
