"""Statistics of reported figures (SPEC §10): a rate carries its 95 % interval, and a reported figure
comes from seeds no decision was made on.

`SeedRanges` splits a benchmark's seeds into three disjoint ranges fixed in code: `tuning` (what
settings are chosen on: demonstrations, decoding options), `validation` (checked while developing,
as often as one likes) and `final_test` (touched once per reported figure: the benchmark reads it
only when asked for the reported figure, and says which range each figure came from).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Split = Literal["tuning", "validation", "final_test"]
SPLITS: tuple[Split, ...] = ("tuning", "validation", "final_test")
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate (95 % by default); (0, 1) when n is 0."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-quantile (0 <= q <= 1): the smallest value with at least a fraction `q` of
    the values at or below it (no interpolation, so the figure is one that was measured)."""
    if not 0.0 <= q <= 1.0:  # NaN too
        raise ValueError(f"q must lie in [0, 1], not {q!r}")
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def rate(successes: int, n: int, digits: int = 4) -> dict[str, float | int]:
    """A success rate with its Wilson 95 % interval, as benchmarks report it."""
    low, high = wilson_interval(successes, n)
    return {
        "rate": round(successes / n, digits) if n else 0.0,
        "successes": successes,
        "n": n,
        "ci95": [round(low, digits), round(high, digits)],  # type: ignore[dict-item]
    }


@dataclass(frozen=True)
class SeedRanges:
    """Three disjoint seed ranges, `size` seeds each from `start` on (or the sizes given)."""

    tuning: range
    validation: range
    final_test: range

    def __post_init__(self) -> None:
        ranges = [self.tuning, self.validation, self.final_test]
        for i, a in enumerate(ranges):
            if a.step != 1 or len(a) == 0:
                raise ValueError(f"seed range {a} must be non-empty and contiguous")
            for b in ranges[i + 1 :]:
                if a.start < b.stop and b.start < a.stop:
                    raise ValueError(f"seed ranges {a} and {b} overlap")

    def of(self, split: Split) -> range:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        chosen: range = getattr(self, split)
        return chosen

    def first(self, split: Split, n: int) -> range:
        """The first `n` seeds of a range (a quick run's subset; never reaches into another range)."""
        r = self.of(split)
        return range(r.start, r.start + min(n, len(r)))


def bootstrap_ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of Σ numerators / Σ denominators, resampling the units
    (e.g. sessions: a word error rate's errors are not independent within a session)."""
    import numpy as np

    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if len(num) != len(den) or len(num) == 0:
        raise ValueError("need as many numerators as denominators, at least one")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(num), size=(resamples, len(num)))
    totals = den[picks].sum(axis=1)
    ratios = np.where(totals > 0, num[picks].sum(axis=1) / np.maximum(totals, 1e-12), 0.0)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return (float(low), float(high))


def bootstrap_sum_ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of Σ numerators / Σ denominators where the two come from
    independent samples of units (e.g. the task groups of two runs), each resampled on its own."""
    import numpy as np

    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if len(num) == 0 or len(den) == 0:
        raise ValueError("need at least one unit on each side")
    rng = np.random.default_rng(seed)
    tops = num[rng.integers(0, len(num), size=(resamples, len(num)))].sum(axis=1)
    bottoms = den[rng.integers(0, len(den), size=(resamples, len(den)))].sum(axis=1)
    ratios = np.where(bottoms > 0, tops / np.maximum(bottoms, 1e-12), np.inf)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return (float(low), float(high))
