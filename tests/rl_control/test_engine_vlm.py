"""RL on an HF vision-language policy through the real engine (issue 23): the tiny Qwen2.5-VL
(random weights, tokenizer and image processor built here) served by the policy server's HF backend
in its own process, MiniWoB++ in Chromium, Celery rollout and trainer workers, LoRA PPO updates
with the value head, weights pushed to the server after each update, HF checkpoints registered.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import torch

from rl_control import services
from rl_control.models import RunMetric
from tests.rl_control.test_engine import _miniwob_pool, launch_and_finish, stack_factory  # noqa: F401 (fixture)
from webapp.store.models import Checkpoint, Step, Trajectory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def vlm_checkpoint(tmp_path: Path) -> Checkpoint:
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path / "tiny-vlm", seed=0, version="0")
    return Checkpoint.objects.create(
        version=f"tiny-vlm-{uuid.uuid4().hex[:6]}", path=str(path), profile="hf-vlm"
    )


def test_lora_ppo_on_a_tiny_vlm_through_the_engine(users, stack_factory, vlm_checkpoint) -> None:  # noqa: F811
    from transformers import AutoModelForImageTextToText

    stack = stack_factory(120.0)
    stack.start()
    run = services.run_create(
        user=users["researcher"], name="vlm", algorithm="ppo", pool=_miniwob_pool(), start_checkpoint=vlm_checkpoint,
        config={
            "env": {"parallel_envs": 2, "context_screenshots": 2},
            "ppo": {"lr_policy": 1e-3, "value_pretrain_max_updates": 1, "minibatch_size": 4},
            "curation": {"step_cap": 2, "min_batch_trajectories": 2, "staleness_bound": 2},
            "vlm": {"lora_rank": 4, "lora_alpha": 8, "max_tokens": 12},
            # random weights never solve a task: the format penalty (noise does not parse) gives the
            # returns, hence the advantages, something other than zero to train on
            "reward": {"format_weight": 0.5},
            "budget": {"max_updates": 3, "max_minutes": 20},
        },
    )  # fmt: skip
    run = launch_and_finish(run, stack, 900)
    assert run.updates_done == 3 and run.policy_version == 2
    # the rollouts sampled from the HF backend: token ids and log-probs on every step
    steps = list(Step.objects.filter(trajectory__run=run, trajectory__status="completed"))
    assert steps and all(
        s.rl["token_ids"] and len(s.rl["token_ids"]) == len(s.rl["logprobs"]) <= 12 for s in steps
    )
    assert all(s.coord_convention == "absolute_resized" for s in steps)
    # PPO's first policy update scored version-0 samples with version-0 weights: the trainer's
    # log-probs over the rebuilt multimodal chat equal the server's (ratio 1 before the step)
    first_policy_update = [s for s in steps if s.rl.get("ratio") is not None and s.rl["version"] == 0]
    assert first_policy_update
    assert any(abs(s.rl["ratio"] - 1.0) < 1e-3 for s in first_policy_update), [
        s.rl["ratio"] for s in first_policy_update
    ]
    # every policy version is a plain HF Qwen2.5-VL directory (LoRA merged) plus its adapter
    online = list(Checkpoint.objects.filter(run=run).order_by("created_at"))
    assert len(online) == 2
    newest = Path(online[-1].path)
    assert (newest / "adapter" / "adapter_config.json").is_file()
    model = AutoModelForImageTextToText.from_pretrained(newest)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    base = AutoModelForImageTextToText.from_pretrained(vlm_checkpoint.path)
    changed = [name for name, p in model.state_dict().items() if not torch.equal(p, base.state_dict()[name])]
    diag = list(RunMetric.objects.filter(run=run, name__in=["policy/grad_norm", "policy/lr", "policy/loss"])
                .values_list("step", "name", "value"))  # fmt: skip
    plans = list(run.rollout_groups.values_list("state", "plan")) if hasattr(run, "rollout_groups") else []
    assert changed and all("language_model" in n for n in changed), (
        changed[:5],
        diag,
        plans,
        stack.logs()[-3000:],
    )
    # the run's own policy server (started by the engine from the HF checkpoint, stopped with the
    # run) was an HF VLM server; the samples carry the run's version labels
    assert {s.rl["version"] for s in steps} <= {0, 1, 2}
    sync = RunMetric.objects.filter(run=run, name="efficiency/weight_sync_s").values_list("value", flat=True)
    assert sync and all(v > 0 for v in sync)
    assert Trajectory.objects.filter(run=run, status="completed").count() >= 4
