"""GAE, decoupled / length-adaptive λ, step-wise GRPO and GiGPO's anchor-state advantages against
hand-computed values."""

import math

import pytest
import torch

from workers.rl.advantages import (
    anchor_step_advantages,
    broadcast_trajectory_rewards,
    decoupled_gae,
    discounted_returns,
    gae,
    length_adaptive_lambda,
    stepwise_grpo_advantages,
)

R = torch.tensor([[0.0, 0.0, 1.0]])
V = torch.tensor([[0.5, 0.6, 0.7]])
M = torch.ones(1, 3)


def close(actual: torch.Tensor, expected: list, atol: float = 1e-5) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=atol, rtol=0)


def test_gae_lambda_one_gamma_one_is_monte_carlo() -> None:
    # δ = [0.1, 0.1, 0.3]; A_t = Σ δ_{≥t} = [0.5, 0.4, 0.3]; returns = A + V = 1 everywhere.
    adv, ret = gae(R, V, M, gamma=1.0, lam=1.0)
    close(adv, [[0.5, 0.4, 0.3]])
    close(ret, [[1.0, 1.0, 1.0]])


def test_gae_discounted() -> None:
    # γ = 0.9, λ = 0.5: δ2 = 0.3, δ1 = 0.9·0.7 − 0.6 = 0.03, δ0 = 0.9·0.6 − 0.5 = 0.04
    # A2 = 0.3, A1 = 0.03 + 0.45·0.3 = 0.165, A0 = 0.04 + 0.45·0.165 = 0.11425
    adv, ret = gae(R, V, M, gamma=0.9, lam=0.5)
    close(adv, [[0.11425, 0.165, 0.3]])
    close(ret, [[0.61425, 0.765, 1.0]])


def test_gae_lambda_zero_is_one_step_td() -> None:
    adv, _ = gae(R, V, M, gamma=1.0, lam=0.0)
    close(adv, [[0.1, 0.1, 0.3]])


def test_gae_per_sequence_lambda() -> None:
    adv, _ = gae(R.repeat(2, 1), V.repeat(2, 1), M.repeat(2, 1), 1.0, torch.tensor([1.0, 0.0]))
    close(adv, [[0.5, 0.4, 0.3], [0.1, 0.1, 0.3]])


def test_gae_padding_ignores_padded_values() -> None:
    # Row 1 ends after two steps; its padded value 9.9 must not be bootstrapped from.
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [0.2, 0.4, 9.9]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv, ret = gae(rewards, values, mask, 1.0, 1.0)
    close(adv, [[0.5, 0.4, 0.3], [0.8, 0.6, 0.0]])
    close(ret, [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def test_gae_bootstrap_for_truncated_trajectory() -> None:
    adv, _ = gae(
        torch.zeros(1, 2), torch.tensor([[0.5, 0.5]]), torch.ones(1, 2), 1.0, 1.0, torch.tensor([0.8])
    )
    close(adv, [[0.3, 0.3]])


def test_gae_single_step_and_all_zero() -> None:
    adv, ret = gae(torch.tensor([[1.0]]), torch.tensor([[0.25]]), torch.ones(1, 1), 1.0, 0.95)
    close(adv, [[0.75]])
    close(ret, [[1.0]])
    adv, ret = gae(torch.zeros(2, 4), torch.zeros(2, 4), torch.ones(2, 4), 0.99, 0.95)
    assert torch.equal(adv, torch.zeros(2, 4)) and torch.equal(ret, torch.zeros(2, 4))


def test_gae_empty_batch() -> None:
    adv, ret = gae(torch.zeros(0, 3), torch.zeros(0, 3), torch.zeros(0, 3), 1.0, 1.0)
    assert adv.shape == (0, 3) and ret.shape == (0, 3)


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.tensor([[0, 1, 1]]), "right-padded"),
        (torch.tensor([[1, 2, 1]]), "only 0 and 1"),
        (torch.ones(1, 2), "shape"),
    ],
)
def test_gae_rejects_bad_masks(mask: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gae(R, V, mask, 1.0, 1.0)


def test_gae_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="NaN"):
        gae(torch.tensor([[float("nan"), 0.0, 1.0]]), V, M, 1.0, 1.0)
    with pytest.raises(ValueError, match="lam"):
        gae(R, V, M, 1.0, 1.5)
    with pytest.raises(ValueError, match="gamma"):
        gae(R, V, M, 1.1, 1.0)
    with pytest.raises(ValueError, match="values shape"):
        gae(R, V[:, :2], M, 1.0, 1.0)


def test_length_adaptive_lambda() -> None:
    # α·l = [0, 0.5, 1, 2, 5] → 1 − 1/(α·l) = [−inf, −1, 0, 0.5, 0.8] → clamped to [0, 1]
    lam = length_adaptive_lambda(torch.tensor([0, 10, 20, 40, 100]), alpha=0.05)
    close(lam, [0.0, 0.0, 0.0, 0.5, 0.8])
    with pytest.raises(ValueError):
        length_adaptive_lambda(torch.tensor([10]), alpha=0.0)
    with pytest.raises(ValueError):
        length_adaptive_lambda(torch.tensor([-1]), alpha=0.05)


def test_decoupled_gae_uses_each_lambda() -> None:
    adv, targets = decoupled_gae(R, V, M, gamma=1.0, lambda_policy=0.0, lambda_critic=1.0)
    close(adv, [[0.1, 0.1, 0.3]])
    close(targets, [[1.0, 1.0, 1.0]])


def test_grpo_single_injected_success_matches_bepa_formula() -> None:
    # Seed 003 Eq. 4 remark: rewards {1, 0 × 7} give A_succ = √7, A_fail = −1/√7 (population std).
    rewards = broadcast_trajectory_rewards([1.0] + [0.0] * 7, [1] * 8)
    out = stepwise_grpo_advantages(rewards, ["t"] * 8)
    close(torch.cat(out.advantages), [math.sqrt(7)] + [-1 / math.sqrt(7)] * 7, atol=1e-4)
    assert out.no_signal_groups == []
    assert not out.traj_no_signal.any()


def test_grpo_zscore_is_over_steps_not_trajectories() -> None:
    # group a: R=1 over 3 steps, R=0 over 1 step → steps [1,1,1,0]: mean 0.75, σ² = 0.1875, σ = 0.4330127
    # A = 0.25/σ = 0.5773503 and −0.75/σ = −1.7320508 (a per-trajectory z-score would give ±1).
    # group b: both succeed → zero variance → zeros, flagged. Ids interleaved on purpose.
    rewards = broadcast_trajectory_rewards([1.0, 1.0, 0.0, 1.0], [3, 2, 1, 1])
    out = stepwise_grpo_advantages(rewards, ["a", "b", "a", "b"])
    close(out.advantages[0], [0.5773503] * 3)
    close(out.advantages[1], [0.0, 0.0])
    close(out.advantages[2], [-1.7320508])
    close(out.advantages[3], [0.0])
    assert out.no_signal_groups == ["b"]
    assert out.traj_no_signal.tolist() == [False, True, False, True]
    assert out.group_mean == {"a": 0.75, "b": 1.0}
    assert out.group_std["a"] == pytest.approx(0.4330127, abs=1e-6)


def test_grpo_per_step_rewards() -> None:
    # ComputerRL form: steps [1, 0 | 0]: mean 1/3, σ² = 2/9, σ = 0.4714045 → [√2, −1/√2, −1/√2]
    out = stepwise_grpo_advantages([[1.0, 0.0], [0.0]], torch.tensor([7, 7]))
    close(torch.cat(out.advantages), [1.4142136, -0.7071068, -0.7071068])


def test_grpo_all_zero_rewards_and_empty() -> None:
    out = stepwise_grpo_advantages(broadcast_trajectory_rewards([0.0] * 4, [2, 1, 3, 1]), ["x"] * 4)
    assert all(torch.equal(a, torch.zeros_like(a)) for a in out.advantages)
    assert out.no_signal_groups == ["x"]
    empty = stepwise_grpo_advantages([], [])
    assert empty.advantages == [] and empty.no_signal_groups == []


def test_grpo_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="group ids"):
        stepwise_grpo_advantages([[1.0], [0.0]], ["a"])
    with pytest.raises(ValueError, match="at least one step"):
        stepwise_grpo_advantages([[1.0], []], ["a", "a"])
    with pytest.raises(ValueError, match="NaN"):
        stepwise_grpo_advantages([[float("nan")], [0.0]], ["a", "a"])
    with pytest.raises(ValueError, match="one reward per trajectory"):
        broadcast_trajectory_rewards([1.0, 0.0], [1])


def test_discounted_returns_put_the_outcome_on_the_last_step() -> None:
    # r = [0, 0, 0.1] + outcome 1 at t = 2, γ = 0.5: R_2 = 1.1, R_1 = 0.55, R_0 = 0.275
    close(discounted_returns([0.0, 0.0, 0.1], 1.0, 0.5), [0.275, 0.55, 1.1])
    close(discounted_returns([0.0], 1.0, 0.95), [1.0])
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns([0.0], 1.0, 0.0)
    with pytest.raises(ValueError, match="at least one step"):
        discounted_returns([], 1.0, 0.9)


def test_anchor_advantages_compare_the_steps_that_acted_on_one_state() -> None:
    # group g: trajectory 0 wandered on page "s0" (return 0.9) then succeeded from "s1" (1.0);
    # trajectory 1 failed from "s0" (0.0); trajectory 2, of another group, also saw "s0".
    out = anchor_step_advantages(
        [[0.9, 1.0], [0.0], [1.0]], [["s0", "s1"], ["s0"], ["s0"]], ["g", "g", "h"], eps=1e-9
    )
    close(out.advantages[0], [1.0, 0.0])  # s0: mean 0.45, std 0.45 -> +1; s1: no other step, 0
    close(out.advantages[1], [-1.0])
    close(out.advantages[2], [0.0])  # groups never mix
    assert (out.grouped_steps, out.anchor_groups) == (2, 1)
    # three visits of one state: the step nearest to success is credited most
    out = anchor_step_advantages([discounted_returns([0.0, 0.0, 0.0], 1.0, 0.5)], [["a", "a", "a"]], ["g"])
    assert out.advantages[0][2] > out.advantages[0][1] > out.advantages[0][0]
    assert abs(float(out.advantages[0].sum())) < 1e-5


def test_anchor_advantages_without_a_shared_state_or_spread_are_zero() -> None:
    none = anchor_step_advantages([[1.0], [0.0]], [[None], [None]], ["g", "g"])  # unknown states
    equal = anchor_step_advantages([[1.0], [1.0]], [["s"], ["s"]], ["g", "g"])  # no spread
    apart = anchor_step_advantages([[1.0], [0.0]], [["s"], ["t"]], ["g", "g"])
    for out in (none, equal, apart):
        assert all(float(a.abs().sum()) == 0.0 for a in out.advantages)
    assert (none.anchor_groups, equal.anchor_groups, apart.anchor_groups) == (0, 1, 0)
    with pytest.raises(ValueError, match="state keys"):
        anchor_step_advantages([[1.0, 0.0]], [["s"]], ["g"])
    with pytest.raises(ValueError, match="one return row"):
        anchor_step_advantages([[1.0]], [["s"]], ["g", "g"])
