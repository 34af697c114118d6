"""Policy-gradient losses as small pure torch functions (verl `core_algos` style).

Shapes: B = sequences (one per step of a trajectory for step-wise GRPO, one per trajectory for PPO),
T = padded token length. `mask` is [B, T] with 1 for tokens that count and 0 for padding or filtered
steps. All losses are to be minimised; statistics are plain floats for dashboards (SPEC §9).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

import torch

from workers.rl.advantages import group_index
from workers.rl.config import IsLevel, KlEstimator, LossAggregation

Tensor = torch.Tensor

# exp() of a log-ratio beyond ±20 overflows float32 gradients without changing any clipped loss.
_MAX_LOG_RATIO = 20.0


def _same_shape(reference: Tensor, **others: Tensor | None) -> None:
    for name, t in others.items():
        if t is not None and t.shape != reference.shape:
            raise ValueError(f"{name} shape {tuple(t.shape)} != {tuple(reference.shape)}")


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·mask over `dim` (all dims when None). x and mask share a shape."""
    _same_shape(x, mask=mask)
    product = x * mask.to(x.dtype)  # bool / int masks allowed
    return product.sum() if dim is None else product.sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·mask / Σ mask over `dim`; where Σ mask = 0 the result is 0, not NaN."""
    total = masked_sum(x, mask, dim)
    m = mask.to(x.dtype)
    count = m.sum() if dim is None else m.sum(dim=dim)
    return total / count.clamp(min=1.0)


def aggregate_loss(loss_mat: Tensor, mask: Tensor, mode: LossAggregation = "token-mean") -> Tensor:
    """Reduce per-token losses [B, T] to a scalar.

    token-mean: Σ_{b,t} loss·mask / Σ mask — every token weighs the same (DAPO, seed 001 / 004).
    seq-mean-token-mean: mean over sequences with ≥ 1 valid token of each sequence's token mean —
        every sequence (step) weighs the same whatever its length.
    seq-mean-token-sum: mean over those sequences of each sequence's token sum.
    """
    if loss_mat.dim() != 2:
        raise ValueError(f"loss_mat must be [B, T], got {tuple(loss_mat.shape)}")
    mask = mask.to(loss_mat.dtype)
    if mode == "token-mean":
        return masked_mean(loss_mat, mask)
    has_tokens = (mask.sum(dim=-1) > 0).to(loss_mat.dtype)
    if mode == "seq-mean-token-mean":
        per_seq = masked_mean(loss_mat, mask, dim=-1)
    elif mode == "seq-mean-token-sum":
        per_seq = masked_sum(loss_mat, mask, dim=-1)
    else:
        raise ValueError(f"unknown loss aggregation {mode!r}")
    return masked_mean(per_seq, has_tokens)


@dataclass(frozen=True)
class PolicyLossStats:
    """Dashboard figures for one policy-loss evaluation (all over valid tokens)."""

    clip_frac_low: float  # share of tokens where the lower bound 1 − ε_low was active (A < 0)
    clip_frac_high: float  # share of tokens where the upper bound 1 + ε_high was active (A > 0)
    approx_kl: float  # mean k3 estimate of KL(π_old ‖ π_θ): (r − 1) − log r
    ratio_mean: float
    ratio_max: float
    ratio_min: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float,
    clip_high: float,
    agg: LossAggregation = "token-mean",
    weights: Tensor | None = None,
) -> tuple[Tensor, PolicyLossStats]:
    """Clip-higher PPO surrogate (seed 000 Eq. 4, DAPO): −min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A).

    Args:
        logprobs: [B, T] log π_θ of the taken tokens (carries the gradient).
        old_logprobs: [B, T] log π_θ_old of the same tokens (constants).
        advantages: [B, T] advantages (constants); a step-level advantage is repeated over its tokens.
        mask: [B, T] 1 = token counts.
        clip_low, clip_high: ε_low ∈ (0, 1), ε_high > 0.
        agg: see `aggregate_loss`.
        weights: optional [B, T] per-token constant weights (the truncated IS weight in GRPO).

    Returns:
        (scalar loss, PolicyLossStats).
    """
    _same_shape(logprobs, old_logprobs=old_logprobs, advantages=advantages, mask=mask, weights=weights)
    if not (0.0 < clip_low < 1.0 and clip_high > 0.0):
        raise ValueError(f"need 0 < clip_low < 1 and clip_high > 0, got {clip_low}, {clip_high}")
    m = mask.to(logprobs.dtype)
    adv = advantages.detach()
    log_ratio = torch.clamp(logprobs - old_logprobs.detach(), -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    loss_mat = -torch.minimum(unclipped, clipped)
    if weights is not None:
        loss_mat = loss_mat * weights.detach()
    loss = aggregate_loss(loss_mat, m, agg)

    with torch.no_grad():
        # A bound is active exactly when the clipped branch is the smaller one: r beyond it, on the
        # side the advantage pushes towards. There the token contributes no gradient.
        low_active = ((ratio < 1.0 - clip_low) & (adv < 0)).to(m.dtype)
        high_active = ((ratio > 1.0 + clip_high) & (adv > 0)).to(m.dtype)
        valid = m > 0
        any_valid = bool(valid.any())
        stats = PolicyLossStats(
            clip_frac_low=float(masked_mean(low_active, m)),
            clip_frac_high=float(masked_mean(high_active, m)),
            approx_kl=float(masked_mean((ratio - 1.0) - log_ratio, m)),
            ratio_mean=float(masked_mean(ratio, m)),
            ratio_max=float(ratio[valid].max()) if any_valid else math.nan,
            ratio_min=float(ratio[valid].min()) if any_valid else math.nan,
        )
    return loss, stats


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float | None = None,
    agg: LossAggregation = "token-mean",
) -> tuple[Tensor, float]:
    """½·(V − R)², optionally PPO-clipped: ½·max((V − R)², (V_old + clip(V − V_old, ±c) − R)²).

    Args:
        values: [B, T] V_θ (carries the gradient). old_values: [B, T] V at rollout time.
        returns: [B, T] targets (e.g. λ_critic-returns from `decoupled_gae`). mask: [B, T].
        clip: c > 0 or None for the plain squared error.

    Returns:
        (scalar loss, fraction of valid tokens where the clipped term was the larger one).
    """
    _same_shape(values, old_values=old_values, returns=returns, mask=mask)
    m = mask.to(values.dtype)
    target = returns.detach()
    err = (values - target) ** 2
    if clip is None:
        return 0.5 * aggregate_loss(err, m, agg), 0.0
    if clip <= 0:
        raise ValueError(f"value clip must be > 0, got {clip}")
    old = old_values.detach()
    clipped_values = old + torch.clamp(values - old, -clip, clip)
    err_clipped = (clipped_values - target) ** 2
    loss = 0.5 * aggregate_loss(torch.maximum(err, err_clipped), m, agg)
    clip_frac = float(masked_mean((err_clipped > err).to(m.dtype), m))
    return loss, clip_frac


def truncated_is_weight(
    old_train_logprobs: Tensor,
    rollout_logprobs: Tensor,
    cap: float = 1.0,
    mask: Tensor | None = None,
    level: IsLevel = "token",
) -> Tensor:
    """Truncated importance weight min(π_train_old / π_rollout, C) (seed 002 §4.4, Yao et al. 2025).

    Corrects for the gap between the rollout engine's and the trainer's probabilities of the same
    tokens (different kernels or quantisation, or injected stored trajectories).

    Args:
        old_train_logprobs: [B, T] log π of the sampled tokens recomputed by the trainer before update.
        rollout_logprobs: [B, T] log π reported by the rollout engine when sampling.
        cap: C > 0.
        mask: [B, T]; required for level="sequence", where one weight per row uses Σ_t over valid t.
        level: "token" = one weight per token; "sequence" = the step's whole action probability ratio.

    Returns:
        [B, T] detached weights in (0, C] (0 on padding when a mask is given).
    """
    _same_shape(old_train_logprobs, rollout_logprobs=rollout_logprobs, mask=mask)
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    log_w = (old_train_logprobs - rollout_logprobs).detach()
    if level == "token":
        w = torch.exp(torch.clamp(log_w, max=math.log(cap)))
    elif level == "sequence":
        if mask is None:
            raise ValueError("sequence-level IS weights need a mask")
        seq_log_w = masked_sum(
            log_w,
            mask.to(log_w.dtype),
            dim=-1,
        )
        seq_w = torch.exp(torch.clamp(seq_log_w, max=math.log(cap)))
        w = seq_w.unsqueeze(-1).expand_as(log_w)
    else:
        raise ValueError(f"unknown IS level {level!r}")
    return w * mask.to(w.dtype) if mask is not None else w


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kind: KlEstimator = "k3") -> Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) from sampled tokens (Schulman's k1/k2/k3). [B, T] → [B, T].

    k1 = log π_θ − log π_ref (the simple estimator: unbiased, can be negative);
    k2 = ½ (log π_θ − log π_ref)²;
    k3 = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1 (unbiased and ≥ 0; GRPO's choice),
    clamped to [−10, 10] as in verl so one wild token cannot dominate.
    """
    _same_shape(logprobs, ref_logprobs=ref_logprobs)
    diff = logprobs - ref_logprobs.detach()
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff**2
    if kind == "k3":
        neg = torch.clamp(-diff, -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        return torch.clamp(torch.exp(neg) - neg - 1.0, min=-10.0, max=10.0)
    raise ValueError(f"unknown KL estimator {kind!r}")


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Token entropy H = −Σ_v p_v log p_v from logits [..., V] → [...], computed stably in log space."""
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError("logits need a non-empty vocabulary dimension")
    log_p = torch.log_softmax(logits.float(), dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def step_mean_entropy(token_entropy: Tensor, mask: Tensor) -> Tensor:
    """H_t = mean token entropy over a step's thought + action tokens (seed 002 §4.3): [B, T] → [B]."""
    return masked_mean(token_entropy.detach(), mask.to(token_entropy.dtype), dim=-1)


def entropy_step_filter(
    step_mean_entropy: Tensor,
    group_ids: Sequence[Hashable] | Tensor,
    keep_fraction: float = 0.8,
) -> Tensor:
    """Keep the highest-entropy steps of each group (seed 002 §4.3): [S] entropies → [S] bool mask.

    In a group of n steps exactly ceil(keep_fraction · n) steps are kept (at least one), the ones
    with the largest mean entropy; ties are broken towards the earlier step so the result is
    deterministic. With keep_fraction = 0.8 this drops the bottom 20 % of each group.
    """
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    entropy = step_mean_entropy.detach().reshape(-1).to(torch.float64)
    groups, unique = group_index(group_ids)
    if groups.shape[0] != entropy.shape[0]:
        raise ValueError(f"{entropy.shape[0]} steps but {groups.shape[0]} group ids")
    if torch.isnan(entropy).any():
        raise ValueError("step entropies contain NaN")
    keep = torch.zeros(entropy.shape[0], dtype=torch.bool)
    for g in range(len(unique)):
        members = torch.nonzero(groups == g).flatten()
        n_keep = max(1, math.ceil(round(keep_fraction * members.numel(), 9)))
        # stable sort on −H keeps the earlier index first among equal entropies
        order = torch.sort(-entropy[members], stable=True).indices
        keep[members[order[:n_keep]]] = True
    return keep


@dataclass(frozen=True)
class GrpoLossStats:
    """Policy stats plus the IS-weight and KL figures of one GRPO loss evaluation."""

    policy: PolicyLossStats
    is_weight_mean: float
    is_weight_min: float
    is_capped_frac: float  # share of valid tokens whose IS weight hit the cap C
    kl: float  # mean per-token KL estimate to the reference (0 when β = 0 or no reference)
    pg_loss: float
    kl_loss: float

    def to_dict(self) -> dict[str, float]:
        out = {f"policy/{k}": v for k, v in self.policy.to_dict().items()}
        out.update({k: v for k, v in asdict(self).items() if k != "policy"})
        return out


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    rollout_logprobs: Tensor | None = None,
    is_cap: float = 1.0,
    is_level: IsLevel = "token",
    ref_logprobs: Tensor | None = None,
    beta_kl: float = 0.1,
    kl_estimator: KlEstimator = "k3",
    agg: LossAggregation = "token-mean",
) -> tuple[Tensor, GrpoLossStats]:
    """Step-wise GRPO objective of seed 002 Eq. 2, negated to be minimised.

    loss = agg( w_IS · −min(r·A, clip(r)·A) + β · KL(π_θ ‖ π_ref) ) over `mask`, where r = π_θ / π_θ_old
    and w_IS = min(π_θ_old / π_rollout, C). Apply the entropy step filter by zeroing filtered rows of
    `mask` before calling.

    Args:
        logprobs, old_logprobs, advantages, mask: [B, T] as in `ppo_policy_loss` (B = steps).
        rollout_logprobs: [B, T] rollout-engine log-probs; None = no IS correction (weight 1).
        ref_logprobs: [B, T] reference-policy log-probs; None or beta_kl = 0 drops the KL term.
    """
    _same_shape(logprobs, rollout_logprobs=rollout_logprobs, ref_logprobs=ref_logprobs)
    if beta_kl < 0:
        raise ValueError(f"beta_kl must be ≥ 0, got {beta_kl}")
    m = mask.to(logprobs.dtype)
    if rollout_logprobs is not None:
        weights = truncated_is_weight(old_logprobs, rollout_logprobs, is_cap, m, is_level)
    else:
        weights = m.clone()
    pg_loss, policy_stats = ppo_policy_loss(
        logprobs, old_logprobs, advantages, m, clip_low, clip_high, agg, weights=weights
    )
    if ref_logprobs is not None and beta_kl > 0:
        kl_mat = kl_penalty(logprobs, ref_logprobs, kl_estimator)
        kl_loss = aggregate_loss(kl_mat, m, agg)
    else:
        kl_mat = torch.zeros_like(logprobs)
        kl_loss = torch.zeros((), dtype=logprobs.dtype)
    loss = pg_loss + beta_kl * kl_loss
    with torch.no_grad():
        valid = m > 0
        if rollout_logprobs is None:
            capped = torch.zeros_like(valid)
        else:  # relative tolerance: exp(log C) need not round-trip to exactly C
            capped = (weights >= is_cap * (1 - 1e-6)) & valid
        stats = GrpoLossStats(
            policy=policy_stats,
            is_weight_mean=float(masked_mean(weights, m)),
            is_weight_min=float(weights[valid].min()) if bool(valid.any()) else math.nan,
            is_capped_frac=float(masked_mean(capped.to(m.dtype), m)),
            kl=float(masked_mean(kl_mat, m)),
            pg_loss=float(pg_loss),
            kl_loss=float(kl_loss),
        )
    return loss, stats
