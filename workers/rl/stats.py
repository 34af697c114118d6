"""Training statistics and dashboard helpers in numpy (SPEC §9).

Inputs are anything `numpy.asarray` accepts (lists, arrays, CPU torch tensors). NaN entries are
dropped where a statistic is computed over values; functions return NaN, not an exception, when the
statistic is undefined (too few points, zero variance), because a dashboard should show a gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

ArrayLike = Any  # list, numpy array or CPU tensor: whatever np.asarray takes

# Two-sided 95 % Student-t critical values t_{0.975, df} for df = 1..30; beyond 30 the normal 1.96
# is within 2 % and is used instead.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def _vec(x: ArrayLike) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor: avoid a hard torch import in a numpy module
        x = x.detach().cpu().numpy()
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


def _paired(a: ArrayLike, b: ArrayLike, mask: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a and b, apply an optional 0/1 mask, drop pairs where either is NaN."""
    x, y = _vec(a), _vec(b)
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {x.shape} vs {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    if mask is not None:
        m = _vec(mask)
        if m.shape != x.shape:
            raise ValueError(f"mask shape {m.shape} != {x.shape}")
        keep &= m > 0
    return x[keep], y[keep]


def explained_variance(y_pred: ArrayLike, y_true: ArrayLike, mask: ArrayLike | None = None) -> float:
    """1 − Var(y_true − y_pred) / Var(y_true): 1 = perfect critic, 0 = no better than the mean.

    NaN when fewer than two points or Var(y_true) = 0 (the figure is meaningless there).
    """
    pred, true = _paired(y_pred, y_true, mask)
    if true.size < 2:
        return math.nan
    var_true = float(np.var(true))
    if var_true == 0.0:
        return math.nan
    return 1.0 - float(np.var(true - pred)) / var_true


def pearson_correlation(a: ArrayLike, b: ArrayLike, mask: ArrayLike | None = None) -> float:
    """Pearson r of paired samples; NaN when fewer than two points or either side is constant."""
    x, y = _paired(a, b, mask)
    if x.size < 2:
        return math.nan
    xc, yc = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(np.dot(xc, xc)) * float(np.dot(yc, yc)))
    return math.nan if denom == 0.0 else float(np.dot(xc, yc)) / denom


def value_reward_correlation(values: ArrayLike, rewards: ArrayLike) -> float:
    """Correlation between the critic's V(s_0) and the episode's final reward (one pair per episode)."""
    return pearson_correlation(values, rewards)


@dataclass(frozen=True)
class MeanCI:
    """A mean with its two-sided 95 % confidence interval (Student t); bounds NaN when n < 2."""

    mean: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high, "n": self.n}


def mean_ci95(xs: ArrayLike) -> MeanCI:
    """Mean ± t_{0.975, n−1} · s / √n with the sample std s (n − 1 denominator); NaNs dropped."""
    x = _vec(xs)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n == 1:
        return MeanCI(mean, math.nan, math.nan, 1)
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    half = t * float(np.std(x, ddof=1)) / math.sqrt(n)
    return MeanCI(mean, mean - half, mean + half, n)


def histogram(
    xs: ArrayLike, bins: int = 20, value_range: tuple[float, float] | None = None
) -> dict[str, Any]:
    """Fixed-width histogram: {"edges": [bins + 1], "counts": [bins], "nan": count of NaNs dropped}."""
    if bins < 1:
        raise ValueError("bins must be ≥ 1")
    x = _vec(xs)
    nan = int(np.isnan(x).sum())
    x = x[~np.isnan(x)]
    if value_range is None:
        value_range = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
    lo, hi = value_range
    if hi <= lo:  # all values equal: centre one unit-wide range on them so numpy has a width
        lo, hi = lo - 0.5, lo + 0.5
    counts, edges = np.histogram(x, bins=bins, range=(lo, hi))
    return {"edges": edges.tolist(), "counts": counts.astype(int).tolist(), "nan": nan}


def integer_histogram(values: ArrayLike) -> dict[int, int]:
    """Counts per integer value (episode lengths, staleness): {value: count}, sorted by value."""
    x = _vec(values)
    if x.size and (np.isnan(x).any() or np.any(x != np.round(x))):
        raise ValueError("integer_histogram needs whole numbers")
    uniq, counts = np.unique(x.astype(np.int64), return_counts=True)
    return {int(u): int(c) for u, c in zip(uniq, counts, strict=True)}


def downsample_minmax_indices(xs: ArrayLike, ys: ArrayLike, n_buckets: int) -> np.ndarray:
    """Indices of the points a min/max downsampling keeps, ascending.

    The x range is cut into `n_buckets` equal-width buckets; from every non-empty bucket the first,
    last, lowest and highest point are kept, so a single spike can never be averaged away. Points
    with a NaN x or y are skipped. xs must be non-decreasing (a time axis). When there are no more
    points than 4·n_buckets all of them are returned. O(n) in numpy; at most 4·n_buckets indices.
    """
    if n_buckets < 1:
        raise ValueError("n_buckets must be ≥ 1")
    x, y = _vec(xs), _vec(ys)
    if x.shape != y.shape:
        raise ValueError(f"xs and ys differ in length: {x.size} vs {y.size}")
    finite = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
    if finite.size <= 4 * n_buckets:
        return finite
    xf, yf = x[finite], y[finite]
    if np.any(np.diff(xf) < 0):
        raise ValueError("xs must be non-decreasing")
    span = xf[-1] - xf[0]
    if span > 0:
        bucket = np.minimum(((xf - xf[0]) / span * n_buckets).astype(np.int64), n_buckets - 1)
    else:  # every x equal: fall back to equal-count buckets by position
        bucket = np.arange(xf.size) * n_buckets // xf.size
    # xs are sorted, so each bucket is one contiguous run: starts/ends found in one pass.
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], xf.size] - 1
    lengths = ends - starts + 1
    mins = np.repeat(np.minimum.reduceat(yf, starts), lengths)
    maxs = np.repeat(np.maximum.reduceat(yf, starts), lengths)
    # first position in each run equal to its min (max): searchsorted over the hit positions
    min_hits, max_hits = np.flatnonzero(yf == mins), np.flatnonzero(yf == maxs)
    argmins = min_hits[np.searchsorted(min_hits, starts)]
    argmaxs = max_hits[np.searchsorted(max_hits, starts)]
    keep = np.unique(np.concatenate([starts, ends, argmins, argmaxs]))
    kept: np.ndarray = finite[keep]
    return kept


def downsample_minmax(xs: ArrayLike, ys: ArrayLike, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """(xs, ys) of the points `downsample_minmax_indices` keeps, for plotting a long curve."""
    idx = downsample_minmax_indices(xs, ys, n_buckets)
    return _vec(xs)[idx], _vec(ys)[idx]
