"""Parameter interpolation of checkpoints from one SFT parent (seed 000 §2.6, SPEC §8).

θ = Σ_k α_k θ_k with α_k ≥ 0 and Σ α_k = 1. Works on plain state dicts so it needs no model class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

Tensor = torch.Tensor


def check_merge_weights(weights: Sequence[float], n: int) -> list[float]:
    """Return the weights as floats after checking there are n of them, each ≥ 0, summing to 1 (±1e-6)."""
    alphas = [float(w) for w in weights]
    if len(alphas) != n:
        raise ValueError(f"{n} checkpoints but {len(alphas)} weights")
    if any(not math.isfinite(a) or a < 0 for a in alphas):
        raise ValueError(f"merge weights must be finite and ≥ 0, got {alphas}")
    if abs(sum(alphas) - 1.0) > 1e-6:
        raise ValueError(f"merge weights must sum to 1, got {sum(alphas)}")
    return alphas


def merge_state_dicts(
    state_dicts: Sequence[Mapping[str, Tensor]], weights: Sequence[float]
) -> dict[str, Tensor]:
    """Weighted average of state dicts with identical keys, shapes and dtypes.

    Floating tensors are averaged in float64 and cast back to their dtype. Non-floating tensors
    (step counters, index buffers) cannot be interpolated: they must be equal in every checkpoint
    and are copied. Raises ValueError on any mismatch rather than merging unrelated models.
    """
    if not state_dicts:
        raise ValueError("nothing to merge")
    alphas = check_merge_weights(weights, len(state_dicts))
    keys = list(state_dicts[0])
    for i, sd in enumerate(state_dicts[1:], start=1):
        if set(sd) != set(keys):
            diff = sorted(set(sd) ^ set(keys))
            raise ValueError(f"checkpoint {i} has different parameter names, e.g. {diff[:3]}")
    merged: dict[str, Tensor] = {}
    for key in keys:
        tensors = [sd[key] for sd in state_dicts]
        first = tensors[0]
        for t in tensors[1:]:
            if t.shape != first.shape or t.dtype != first.dtype:
                raise ValueError(
                    f"{key}: shape/dtype {tuple(t.shape)}/{t.dtype} != {tuple(first.shape)}/{first.dtype}"
                )
        if first.is_floating_point():
            acc = torch.zeros(first.shape, dtype=torch.float64)
            for alpha, t in zip(alphas, tensors, strict=True):
                acc += alpha * t.detach().to(torch.float64)
            merged[key] = acc.to(first.dtype)
        else:
            if any(not torch.equal(t, first) for t in tensors[1:]):
                raise ValueError(f"{key}: non-floating tensor differs between checkpoints")
            merged[key] = first.detach().clone()
    return merged
