"""How the trainer batches its passes, on the real embedded model (tiny config, CPU): rows scored in
padded batches of similar prompt length give the numbers of one padded batch, and a single-pass
PPO update (one epoch, one minibatch) that trains on its scoring pass moves the weights exactly as
the two-pass update does. No Django, no mocks."""

from __future__ import annotations

import pytest
import torch

import workers.rl.trainer.ppo as ppo_pass
from tests.rl.trainer_helpers import one_thread, png, ppo_config, sample_steps, tiny_model  # noqa: F401
from workers.envs.base import Element, Observation
from workers.policy.embedded.generation import score
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.rl.samples import TrajectorySample
from workers.rl.trainer import PolicyTrainer
from workers.rl.trainer.batch import length_buckets


def test_length_buckets_group_similar_lengths_within_the_row_and_waste_bounds() -> None:
    lengths = [100, 800, 110, 790, 400, 105, 420, 805, 95]
    buckets = length_buckets(lengths, max_rows=2)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    assert all(len(b) <= 2 for b in buckets)
    buckets = length_buckets(lengths, max_rows=16)
    assert [sorted(lengths[i] for i in b) for b in buckets] == [
        [95, 100, 105, 110], [400, 420], [790, 800, 805]
    ]  # fmt: skip
    for b in buckets:  # padding to the longest spends at most 15 % of the bucket's tokens
        assert len(b) * max(lengths[i] for i in b) <= 1.15 * sum(lengths[i] for i in b)
    assert length_buckets([], max_rows=4) == []
    assert length_buckets([7], max_rows=4) == [[0]]


def screen(n_elements: int) -> Observation:
    """A page with n buttons: the more elements, the longer the prompt."""
    elements = tuple(Element(i, "button", f"Item {i}", 4 + 6 * i, 4, 5, 8) for i in range(n_elements))
    return Observation(png((200, 30, 30)), 64, 40, "png", "Click the OK button.", elements)


def varied_batch(policy: EmbeddedPolicy, versions: list[int]) -> list[TrajectorySample]:
    """One two-step trajectory per entry of `versions` (the version that sampled it), on pages of
    1 to 6 elements: prompts of different lengths in one batch."""
    out = []
    for i, version in enumerate(versions):
        obs = screen(1 + i % 6)
        steps = [step for _, step in sample_steps(policy, obs, [], 2, version)]
        out.append(TrajectorySample(f"t{i}", f"task{i % 3}", f"g{i % 3}", steps, float(i % 2), bool(i % 2)))
    return out


def test_scoring_in_length_buckets_equals_one_padded_batch() -> None:
    trainer = PolicyTrainer(tiny_model(3), ppo_config(), seed=0)
    policy = EmbeddedPolicy(trainer.model, seed=5)
    rows = trainer._rows(varied_batch(policy, [0] * 6))
    lengths = [len(r.prompt) for r in rows]
    assert len(length_buckets(lengths, 16)) > 1  # the bucketing is exercised
    with torch.no_grad():
        bucketed = trainer.score_rows(trainer.model, rows)
        one = score(trainer.model, trainer.grammar, trainer._batch(rows), [r.step.token_ids for r in rows])
    assert torch.equal(bucketed.mask, one.mask)
    for field in ("logprobs", "entropies", "values"):
        assert torch.allclose(getattr(bucketed, field), getattr(one, field), atol=1e-5), field
    # differentiable: a gradient reaches the weights through every bucket
    trainer.score_rows(trainer.model, rows).logprobs.sum().backward()
    assert trainer.model.tok_emb.weight.grad is not None and trainer.model.tok_emb.weight.grad.abs().sum() > 0


def test_single_pass_ppo_update_trains_on_its_scoring_pass_exactly_as_two_passes(monkeypatch) -> None:
    config = ppo_config(minibatch_size=16, epochs=1, lambda_policy=0.9)
    assert ppo_pass.single_pass(config.ppo, 6) and not ppo_pass.single_pass(config.ppo, 17)
    start = tiny_model(3)
    batch = varied_batch(EmbeddedPolicy(start, seed=5), [5, 5, 0, 5, 5, 0])  # two rollouts stale
    results = []
    for single in (True, False):
        # the two-pass path is the one multi-epoch / multi-minibatch updates take
        monkeypatch.setattr(ppo_pass, "single_pass", lambda cfg, n, single=single: single)
        trainer = PolicyTrainer(tiny_model(3), config, seed=0)
        trainer.version = 5
        metrics = trainer.update(batch)
        results.append((metrics, trainer.model.state_dict(), trainer.last_step_stats))
    (m1, w1, s1), (m2, w2, s2) = results
    # Adam's first step moves a weight by ~lr (3e-3) whatever its gradient's size, so weights whose
    # true gradient is 0 (copy_key.bias: softmax ignores it) move by rounding noise, differently in
    # the two passes; a different update would differ by ~lr.
    for name, value in w1.items():
        assert (value - w2[name]).abs().max() < 1e-4, name
    assert not torch.equal(w1["tok_emb.weight"], start.state_dict()["tok_emb.weight"])  # it trained
    for key in ("policy/loss", "value/loss", "policy/entropy", "policy/kl", "policy/grad_norm"):
        assert m1[key] == pytest.approx(m2[key], abs=1e-5), key
    assert m1["efficiency/stale_steps_frac"] == pytest.approx(4 / 12)
    for tid, steps in s1.items():  # the stale rollouts' steps carry no loss and no ratio, in both
        for a, b in zip(steps, s2[tid], strict=True):
            assert a["kept"] == b["kept"] == (tid not in ("t2", "t5"))
            assert (a["ratio"] is None) == (b["ratio"] is None) == (not a["kept"])
            assert a["value"] == pytest.approx(b["value"], abs=1e-6)
