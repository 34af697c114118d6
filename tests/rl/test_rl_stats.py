"""Dashboard statistics against hand-computed values; min/max downsampling keeps every spike."""

import math

import numpy as np
import pytest
import torch

from workers.rl.stats import (
    downsample_minmax,
    downsample_minmax_indices,
    explained_variance,
    histogram,
    integer_histogram,
    mean_ci95,
    pearson_correlation,
    value_reward_correlation,
)


def test_explained_variance() -> None:
    # residual [0, 0, 0, −1]: var 0.1875; var(y) = 1.25 → 1 − 0.15 = 0.85
    assert explained_variance([1, 2, 3, 5], [1, 2, 3, 4]) == pytest.approx(0.85)
    assert explained_variance(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])) == pytest.approx(1.0)
    assert explained_variance([1, 2, 3, 9], [1, 2, 3, 4], mask=[1, 1, 1, 0]) == pytest.approx(1.0)
    assert explained_variance([0.0, 0.0], [1.0, 3.0]) == pytest.approx(0.0)  # predicting a constant
    assert math.isnan(explained_variance([1, 2], [3, 3]))  # Var(y) = 0
    assert math.isnan(explained_variance([], []))
    with pytest.raises(ValueError):
        explained_variance([1, 2], [1, 2, 3])


def test_correlations() -> None:
    # x = [1,2,3], y = [2,4,7]: Σ xc·yc = 5, Σ xc² = 2, Σ yc² = 114/9 → 5 / √(2·114/9) = 0.9933993
    assert pearson_correlation([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9933993, abs=1e-6)
    assert value_reward_correlation([0.9, 0.1, 0.5], [1.0, 0.0, 0.0]) == pytest.approx(0.8660254, abs=1e-6)
    assert pearson_correlation([1, 2, float("nan"), 3], [3, 2, 100, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson_correlation([1, 1, 1], [1, 2, 3]))
    assert math.isnan(pearson_correlation([1], [1]))


def test_mean_ci95() -> None:
    # mean 3, s = √2.5, s/√5 = 0.7071068, t(4) = 2.776 → ± 1.962928
    ci = mean_ci95([1, 2, 3, 4, 5, float("nan")])
    assert (ci.mean, ci.n) == (3.0, 5)
    assert ci.low == pytest.approx(1.037072, abs=1e-5)
    assert ci.high == pytest.approx(4.962928, abs=1e-5)
    # n = 100 of alternating 0/1: mean 0.5, s = 0.5025189, ± 1.96·s/10 = 0.0984937
    big = mean_ci95([0, 1] * 50)
    assert big.high - big.mean == pytest.approx(0.0984937, abs=1e-6)
    one = mean_ci95([2.0])
    assert one.mean == 2.0 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(mean_ci95([]).mean)
    assert set(ci.to_dict()) == {"mean", "ci_low", "ci_high", "n"}


def test_histograms() -> None:
    h = histogram([0.0, 0.5, 1.0, 1.0, float("nan")], bins=2, value_range=(0.0, 1.0))
    assert h == {"edges": [0.0, 0.5, 1.0], "counts": [1, 3], "nan": 1}
    assert histogram([2.0, 2.0], bins=1) == {"edges": [1.5, 2.5], "counts": [2], "nan": 0}
    assert histogram([], bins=3)["counts"] == [0, 0, 0]
    assert integer_histogram([3, 1, 3, 2]) == {1: 1, 2: 1, 3: 2}
    assert integer_histogram([]) == {}
    with pytest.raises(ValueError):
        integer_histogram([1.5])
    with pytest.raises(ValueError):
        histogram([1.0], bins=0)


def test_downsample_small_hand_example() -> None:
    # 12 points, 2 buckets over x ∈ [0, 11]: bucket 0 = x 0..5, bucket 1 = x 6..11
    # bucket 0: first 0, last 5, min (1) at 1, max (9) at 2; bucket 1: first 6, last 11, min 8, max 9
    ys = [5, 1, 9, 2, 3, 3, 3, 3, 0, 8, 7, 6]
    idx = downsample_minmax_indices(np.arange(12), ys, 2)
    assert idx.tolist() == [0, 1, 2, 5, 6, 8, 9, 11]
    xs_out, ys_out = downsample_minmax(np.arange(12), ys, 2)
    assert xs_out.tolist() == [0, 1, 2, 5, 6, 8, 9, 11]
    assert ys_out.tolist() == [5, 1, 9, 3, 3, 0, 8, 6]


def test_downsample_keeps_single_spike_in_a_million_points() -> None:
    n = 1_000_000
    xs = np.arange(n, dtype=np.float64)
    ys = np.sin(xs / 5000.0) * 0.01
    ys[543_210] = 100.0
    ys[765_432] = -50.0
    idx = downsample_minmax_indices(xs, ys, 500)
    assert 543_210 in idx and 765_432 in idx
    assert idx[0] == 0 and idx[-1] == n - 1
    assert len(idx) <= 4 * 500
    assert np.all(np.diff(idx) > 0)
    assert np.array_equal(idx, downsample_minmax_indices(xs, ys, 500))  # deterministic


def test_downsample_edge_cases() -> None:
    assert downsample_minmax_indices([], [], 10).tolist() == []
    assert downsample_minmax_indices([0, 1, 2], [5, 6, 7], 10).tolist() == [0, 1, 2]  # fewer than buckets
    ys = np.arange(100, dtype=float)
    ys[[3, 50]] = np.nan
    idx = downsample_minmax_indices(np.arange(100), ys, 5)
    assert 3 not in idx and 50 not in idx and idx[0] == 0 and idx[-1] == 99
    # all x equal: equal-count buckets by position still keep the extremes
    ys = np.zeros(100)
    ys[37] = 9.0
    assert 37 in downsample_minmax_indices(np.zeros(100), ys, 5)
    with pytest.raises(ValueError, match="non-decreasing"):
        downsample_minmax_indices(np.arange(100)[::-1], np.zeros(100), 5)
    with pytest.raises(ValueError):
        downsample_minmax_indices([0, 1], [0], 5)
    with pytest.raises(ValueError):
        downsample_minmax_indices([0, 1], [0, 1], 0)
