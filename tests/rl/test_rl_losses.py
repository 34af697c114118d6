"""Losses against hand-computed values: masked means, clip-higher PPO, value loss, IS, KL, entropy, filter."""

import math

import pytest
import torch

from workers.rl.losses import (
    aggregate_loss,
    entropy_from_logits,
    entropy_step_filter,
    grpo_loss,
    kl_penalty,
    masked_mean,
    ppo_policy_loss,
    step_mean_entropy,
    truncated_is_weight,
    value_loss,
)

LN = math.log


def close(actual: torch.Tensor | float, expected: float | list, atol: float = 1e-5) -> None:
    actual_t = torch.as_tensor(actual, dtype=torch.float32)
    torch.testing.assert_close(actual_t, torch.tensor(expected, dtype=torch.float32), atol=atol, rtol=0)


X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
XM = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_masked_mean() -> None:
    close(masked_mean(X, XM), 7 / 3)  # (1 + 2 + 4) / 3
    close(masked_mean(X, XM, dim=-1), [1.5, 4.0, 0.0])  # an empty row gives 0, not NaN
    close(masked_mean(X, torch.zeros_like(X)), 0.0)
    close(masked_mean(X, XM.bool()), 7 / 3)  # a bool mask means the same
    with pytest.raises(ValueError):
        masked_mean(X, XM[:2])


def test_aggregate_loss_modes() -> None:
    # the all-padding third row must not count as a sequence
    close(aggregate_loss(X, XM, "token-mean"), 7 / 3)
    close(aggregate_loss(X, XM, "seq-mean-token-mean"), (1.5 + 4.0) / 2)
    close(aggregate_loss(X, XM, "seq-mean-token-sum"), (3.0 + 4.0) / 2)
    with pytest.raises(ValueError, match="aggregation"):
        aggregate_loss(X, XM, "bogus")  # type: ignore[arg-type]


# Five valid tokens and one padded token with absurd values that must change nothing.
RATIOS = [1.5, 0.5, 1.1, 0.5, 1.5, 100.0]
ADV = torch.tensor([[1.0, -1.0, 2.0, 1.0, -1.0, 50.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])


def test_ppo_policy_loss_clip_higher() -> None:
    # per token −min(rA, clip(r, 0.8, 1.28)A):
    #   r=1.5 A=+1 → −1.28 (upper bound active)   r=0.5 A=−1 → +0.8 (lower bound active)
    #   r=1.1 A=+2 → −2.2   r=0.5 A=+1 → −0.5     r=1.5 A=−1 → +1.5  (no bound active)
    # token mean = (−1.28 + 0.8 − 2.2 − 0.5 + 1.5) / 5 = −0.336
    logp = torch.tensor([[LN(r) for r in RATIOS]], requires_grad=True)
    loss, stats = ppo_policy_loss(logp, torch.zeros(1, 6), ADV, MASK, 0.2, 0.28)
    close(loss, -0.336)
    assert stats.clip_frac_low == pytest.approx(0.2)
    assert stats.clip_frac_high == pytest.approx(0.2)
    assert stats.ratio_mean == pytest.approx(1.02, abs=1e-6)  # (1.5 + 0.5 + 1.1 + 0.5 + 1.5) / 5
    assert stats.ratio_max == pytest.approx(1.5, abs=1e-6)
    assert stats.ratio_min == pytest.approx(0.5, abs=1e-6)
    # k3: (r − 1) − ln r = 0.0945349 (1.5), 0.1931472 (0.5), 0.0046898 (1.1) → (2a + 2b + c) / 5
    assert stats.approx_kl == pytest.approx(0.1160108, abs=1e-6)
    # d/dlogp of −rA/5 is −rA/5 where unclipped, 0 where a bound is active (and on padding)
    loss.backward()
    close(logp.grad, [[0.0, 0.0, -0.44, -0.1, 0.3, 0.0]])


def test_ppo_policy_loss_ratio_one_is_minus_mean_advantage() -> None:
    loss, stats = ppo_policy_loss(torch.zeros(1, 6), torch.zeros(1, 6), ADV, MASK, 0.2, 0.28)
    close(loss, -(1 - 1 + 2 + 1 - 1) / 5)
    assert stats.clip_frac_low == stats.clip_frac_high == 0.0
    assert stats.approx_kl == 0.0


def test_ppo_policy_loss_all_masked_and_bad_clip() -> None:
    loss, stats = ppo_policy_loss(
        torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3), 0.2, 0.28
    )
    close(loss, 0.0)
    assert math.isnan(stats.ratio_max)
    with pytest.raises(ValueError, match="clip"):
        ppo_policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), 1.2, 0.28)


def test_value_loss_plain_and_clipped() -> None:
    values = torch.tensor([[1.0, 2.0]])
    old = torch.tensor([[0.5, 0.5]])
    returns = torch.tensor([[1.0, 0.0]])
    mask = torch.ones(1, 2)
    loss, frac = value_loss(values, old, returns, mask)
    close(loss, 0.5 * (0.0 + 4.0) / 2)
    assert frac == 0.0
    # clipped V = 0.5 ± 0.2 = 0.7 for both: errors² (0.09, 0.49) vs unclipped (0, 4) → max (0.09, 4)
    loss, frac = value_loss(values, old, returns, mask, clip=0.2)
    close(loss, 0.5 * (0.09 + 4.0) / 2)
    assert frac == pytest.approx(0.5)


def test_truncated_is_weight() -> None:
    old_train = torch.tensor([[LN(0.5), LN(0.9), LN(0.3)]])
    rollout = torch.tensor([[LN(0.25), LN(0.9), LN(0.6)]])
    # ratios 2.0, 1.0, 0.5
    close(truncated_is_weight(old_train, rollout, cap=1.0), [[1.0, 1.0, 0.5]])
    close(truncated_is_weight(old_train, rollout, cap=1.5), [[1.5, 1.0, 0.5]])
    # sequence level: product 2·1·0.5 = 1; with the last token padded: 2 → capped 1.5, pad → 0
    close(truncated_is_weight(old_train, rollout, 1.5, torch.ones(1, 3), "sequence"), [[1.0, 1.0, 1.0]])
    close(
        truncated_is_weight(old_train, rollout, 1.5, torch.tensor([[1.0, 1.0, 0.0]]), "sequence"),
        [[1.5, 1.5, 0.0]],
    )
    with pytest.raises(ValueError, match="mask"):
        truncated_is_weight(old_train, rollout, 1.0, level="sequence")
    with pytest.raises(ValueError, match="cap"):
        truncated_is_weight(old_train, rollout, cap=0.0)


def test_kl_estimators() -> None:
    logp = torch.tensor([[LN(0.5), LN(0.25)]])
    ref = torch.tensor([[LN(0.25), LN(0.5)]])
    close(kl_penalty(logp, ref, "k1"), [[0.6931472, -0.6931472]])
    close(kl_penalty(logp, ref, "k2"), [[0.2402265, 0.2402265]])
    # k3 = e^{ref−logp} − (ref − logp) − 1: 0.5 + ln2 − 1 and 2 − ln2 − 1
    close(kl_penalty(logp, ref, "k3"), [[0.1931472, 0.3068528]])
    close(kl_penalty(logp, logp, "k3"), [[0.0, 0.0]])
    with pytest.raises(ValueError):
        kl_penalty(logp, ref, "k9")  # type: ignore[arg-type]


def test_entropy_from_logits() -> None:
    close(entropy_from_logits(torch.zeros(4)), 1.3862944)  # uniform over 4: ln 4
    # p = (0.5, 0.25, 0.25): 0.5 ln 2 + 0.5 ln 4 = 1.0397208
    close(entropy_from_logits(torch.tensor([LN(0.5), LN(0.25), LN(0.25)])), 1.0397208)
    close(entropy_from_logits(torch.tensor([[1000.0, 1000.0], [100.0, 0.0]])), [0.6931472, 0.0])


def test_step_mean_entropy() -> None:
    close(step_mean_entropy(X, XM), [1.5, 4.0, 0.0])


def test_entropy_step_filter_keeps_top_fraction_per_group() -> None:
    entropy = torch.tensor([0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.4, 0.05, 0.5, 0.5, 0.5, 0.5, 0.5])
    groups = ["a"] * 5 + ["b"] * 2 + ["c"] + ["d"] * 5
    keep = entropy_step_filter(entropy, groups, 0.8)
    # a: ceil(4.0) = 4 kept, the 0.1 dropped; b: ceil(1.6) = 2 both; c: single step kept;
    # d: all tied, the earliest four kept
    expected = [True, False, True, True, True, True, True, True, True, True, True, True, False]
    assert keep.tolist() == expected
    assert entropy_step_filter(torch.tensor([0.3, 0.1, 0.2]), [1, 1, 1], 0.5).tolist() == [True, False, True]
    assert entropy_step_filter(torch.zeros(0), [], 0.8).tolist() == []
    with pytest.raises(ValueError):
        entropy_step_filter(torch.tensor([0.1]), ["a"], 0.0)
    with pytest.raises(ValueError, match="group ids"):
        entropy_step_filter(torch.tensor([0.1, 0.2]), ["a"], 0.8)


def test_grpo_loss_combines_is_weight_and_kl() -> None:
    # r = 1, A = (+1, −1); IS ratios π_old/π_rollout = (2 → capped 1, 0.5): pg = (−1·1, +1·0.5) → mean −0.25
    # log π − log π_ref = ln 2 on both tokens → k3 = 0.5 + ln 2 − 1 = 0.1931472; β = 0.1
    logp = torch.zeros(1, 2, requires_grad=True)
    rollout = torch.tensor([[-LN(2.0), LN(2.0)]])
    ref = torch.full((1, 2), -LN(2.0))
    loss, stats = grpo_loss(
        logp, torch.zeros(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2),
        rollout_logprobs=rollout, is_cap=1.0, ref_logprobs=ref, beta_kl=0.1,
    )  # fmt: skip
    close(loss, -0.25 + 0.1 * 0.1931472)
    assert stats.is_weight_mean == pytest.approx(0.75)
    assert stats.is_weight_min == pytest.approx(0.5)
    assert stats.is_capped_frac == pytest.approx(0.5)
    assert stats.kl == pytest.approx(0.1931472, abs=1e-6)
    assert set(stats.to_dict()) >= {"policy/clip_frac_low", "policy/clip_frac_high", "kl", "is_weight_mean"}
    loss.backward()
    # d/dlogp: pg −A·w·r/2 = (−0.5, +0.25); k3' = 1 − e^{ref−logp} = 0.5 → +0.1·0.5/2 = 0.025 each
    close(logp.grad, [[-0.475, 0.275]])


def test_grpo_loss_without_is_or_kl_equals_ppo_loss() -> None:
    logp = torch.tensor([[LN(r) for r in RATIOS]])
    g_loss, _ = grpo_loss(logp, torch.zeros(1, 6), ADV, MASK, beta_kl=0.0, ref_logprobs=torch.zeros(1, 6))
    p_loss, _ = ppo_policy_loss(logp, torch.zeros(1, 6), ADV, MASK, 0.2, 0.28)
    close(g_loss, float(p_loss))
    with pytest.raises(ValueError, match="beta_kl"):
        grpo_loss(logp, torch.zeros(1, 6), ADV, MASK, beta_kl=-1.0)
