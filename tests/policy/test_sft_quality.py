"""Slow: an embedded policy trained by SFT on scripted-expert MiniWoB++ demonstrations completes a
clearly larger share of held-out episodes than the same untrained model (issue 4 "done when").

Mirrors the measurement in benchmarks/HISTORY.md (policy section): demonstrations from seeds 0..19,
evaluation on seeds 10000..10004 (never seen in training), greedy decoding, 8 tasks. One torch thread:
on a shared 2-core machine, two OpenMP threads per process spend most of their time waiting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.evaluate import evaluate
from workers.policy.expert import collect_demonstrations
from workers.policy.sft import policy_from_result, sft_train

TASKS = [
    "click-test",
    "click-button",
    "click-link",
    "focus-text",
    "enter-text",
    "click-dialog",
    "click-tab",
    "click-checkboxes",
]
CONFIG = {"d_model": 96, "n_layers": 2, "n_heads": 4, "d_ff": 256}
HELD_OUT = range(10000, 10005)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sft_on_expert_demonstrations_beats_the_untrained_model(miniwob: MiniWoBEnv, tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        examples = collect_demonstrations(TASKS, range(20), env=miniwob)
        assert len(examples) > 200
        untrained = new_model(FlywheelPolicyConfig(flywheel_version="init-small", **CONFIG), seed=0)
        before = evaluate(EmbeddedPolicy(untrained), TASKS, HELD_OUT, env=miniwob)
        trained = new_model(FlywheelPolicyConfig(flywheel_version="init-small", **CONFIG), seed=0)
        result = sft_train(trained, examples, tmp_path / "sft", steps=700, batch_size=8, lr=3e-3)
        after = evaluate(policy_from_result(result), TASKS, HELD_OUT, env=miniwob)
    finally:
        torch.set_num_threads(threads)
    assert result["loss_last"] < 0.5 * result["loss_first"]
    assert after.mean >= before.mean + 0.3, (before.as_dict(), after.as_dict())
    assert sum(rate > 0 for rate in after.per_task.values()) >= 4, after.per_task
