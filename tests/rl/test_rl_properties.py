"""Property checks (hypothesis) that complement the hand-computed cases."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.rl.advantages import gae, stepwise_grpo_advantages
from workers.rl.rewards import repetition_penalty
from workers.rl.stats import downsample_minmax_indices

FAST = settings(max_examples=40, deadline=None)
reward = st.floats(-5, 5, allow_nan=False)


@FAST
@given(st.lists(st.lists(reward, min_size=1, max_size=6), min_size=2, max_size=8))
def test_group_advantages_have_zero_mean_and_unit_population_variance(trajs: list[list[float]]) -> None:
    out = stepwise_grpo_advantages(trajs, ["g"] * len(trajs))
    flat = torch.cat(out.advantages).double()
    if out.no_signal_groups:
        assert torch.all(flat == 0)
    else:
        assert abs(float(flat.mean())) < 1e-4
        # population variance (divide by n) of (r − mean) / (σ + ε): (σ / (σ + ε))², ≈ 1 unless σ is tiny
        sigma = out.group_std["g"]
        assert abs(float((flat**2).mean()) - (sigma / (sigma + 1e-6)) ** 2) < 1e-3


@FAST
@given(st.lists(reward, min_size=1, max_size=10), st.integers(0, 9))
def test_gae_lambda_one_returns_are_reward_to_go(rewards: list[float], pad: int) -> None:
    n = len(rewards)
    r = torch.tensor([rewards + [0.0] * pad])
    v = torch.rand(1, n + pad, generator=torch.Generator().manual_seed(n))
    m = torch.tensor([[1.0] * n + [0.0] * pad])
    _, ret = gae(r, v, m, gamma=1.0, lam=1.0)
    to_go = np.cumsum(rewards[::-1])[::-1]
    np.testing.assert_allclose(ret[0, :n].numpy(), to_go, atol=1e-4)
    assert torch.all(ret[0, n:] == 0)


@FAST
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=400), st.integers(1, 20))
def test_downsample_keeps_global_extremes_and_ends(ys: list[float], buckets: int) -> None:
    y = np.array(ys)
    idx = downsample_minmax_indices(np.arange(len(y)), y, buckets)
    assert np.all(np.diff(idx) > 0) and idx[0] == 0 and idx[-1] == len(y) - 1
    assert y[idx].max() == y.max() and y[idx].min() == y.min()
    assert len(idx) <= max(4 * buckets, 0) or len(idx) == len(y)


@FAST
@given(st.lists(st.sampled_from("abcd"), max_size=30))
def test_repetition_penalty_is_a_fraction(actions: list[str]) -> None:
    p = repetition_penalty(actions)
    assert 0.0 <= p <= 1.0
    if len(set(actions)) == len(actions):
        assert p == 0.0
