"""Advantage estimators: GAE (decoupled, length-adaptive) for PPO, group z-scores for step-wise GRPO.

Shapes: B = sequences in the batch, T = padded length. Padding is on the right: `mask[b]` is a run
of ones (valid positions) followed by zeros. Notation follows the papers: δ_t = r_t + γ·V(s_{t+1}) −
V(s_t), A_t = Σ_k (γλ)^k δ_{t+k} (seed 000 §2.5.4; Schulman et al. 2016).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


def check_right_padded_mask(mask: Tensor, shape: torch.Size) -> Tensor:
    """Return `mask` as a float tensor after checking it is [B, T] 0/1 with ones before zeros per row.

    Raises ValueError otherwise: a hole in the middle of a sequence would silently cut the GAE
    recursion, so it is refused instead.
    """
    if mask.shape != shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != {tuple(shape)}")
    m = mask.to(torch.float32)
    if not torch.all((m == 0) | (m == 1)):
        raise ValueError("mask must contain only 0 and 1")
    if m.shape[-1] > 1 and torch.any(m[..., 1:] > m[..., :-1]):
        raise ValueError("mask must be right-padded: ones followed by zeros in every row")
    return m


def _check_2d(name: str, x: Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} must be [B, T], got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")


def _per_row(value: float | Tensor, batch: int, name: str, low: float, high: float) -> Tensor:
    """Broadcast a scalar or [B] hyperparameter to a [B, 1] float tensor after a range check."""
    t = torch.as_tensor(value, dtype=torch.float32)
    if t.dim() == 0:
        t = t.expand(batch)
    if t.shape != (batch,):
        raise ValueError(f"{name} must be a scalar or shape [{batch}], got {tuple(t.shape)}")
    if not torch.all((t >= low) & (t <= high)):
        raise ValueError(f"{name} must lie in [{low}, {high}]")
    return t.unsqueeze(1)


def gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float,
    lam: float | Tensor,
    bootstrap_values: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over a right-padded batch.

    Args:
        rewards: [B, T] reward received after position t (outcome rewards sit on the last valid t).
        values: [B, T] V(s_t) from the critic (treated as constants, no gradient flows).
        mask: [B, T] 1 for valid positions, 0 for right padding.
        gamma: discount γ in [0, 1].
        lam: λ in [0, 1], a scalar or one value per sequence [B] (length-adaptive GAE).
        bootstrap_values: [B] V of the state after the last valid position; None = 0 (episode ended).
            Pass the critic's estimate for trajectories cut by a step limit.

    Returns:
        (advantages [B, T], returns [B, T]) with returns = advantages + values; both 0 on padding.
    """
    _check_2d("rewards", rewards)
    _check_2d("values", values)
    if values.shape != rewards.shape:
        raise ValueError(f"values shape {tuple(values.shape)} != rewards shape {tuple(rewards.shape)}")
    m = check_right_padded_mask(mask, rewards.shape)
    batch, length = rewards.shape
    lam_b = _per_row(lam, batch, "lam", 0.0, 1.0)[:, 0]
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
    r = rewards.detach().to(torch.float32)
    v = values.detach().to(torch.float32)
    boot = torch.zeros(batch) if bootstrap_values is None else bootstrap_values.detach().to(torch.float32)
    if boot.shape != (batch,):
        raise ValueError(f"bootstrap_values must be [{batch}], got {tuple(boot.shape)}")
    if not torch.isfinite(boot).all():
        raise ValueError("bootstrap_values contain NaN or inf")

    advantages = torch.zeros_like(r)
    next_adv = torch.zeros(batch)
    for t in reversed(range(length)):
        next_valid = m[:, t + 1] if t + 1 < length else torch.zeros(batch)
        next_value_in_seq = v[:, t + 1] if t + 1 < length else torch.zeros(batch)
        # After the last valid step the successor is the bootstrap value, not the padded entry.
        next_value = next_valid * next_value_in_seq + (1.0 - next_valid) * boot
        delta = r[:, t] + gamma * next_value - v[:, t]
        adv_t = delta + gamma * lam_b * next_valid * next_adv
        advantages[:, t] = adv_t * m[:, t]
        next_adv = advantages[:, t]
    returns = (advantages + v) * m
    return advantages, returns


def length_adaptive_lambda(lengths: Tensor, alpha: float) -> Tensor:
    """λ_policy = 1 − 1/(α·l) per sequence, clamped to [0, 1] (seed 000 §2.5.4, VAPO).

    Args:
        lengths: [B] valid lengths l ≥ 0 (tokens or steps, whatever the advantage runs over).
        alpha: α > 0; with α = 0.05 sequences of ≤ 20 get λ = 0, 100 get 0.8, 1000 get 0.98.

    Returns:
        [B] float λ. A length of 0 maps to 0 instead of −inf.
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    lens = lengths.to(torch.float32)
    if lens.dim() != 1 or torch.any(lens < 0):
        raise ValueError("lengths must be a 1-D tensor of non-negative values")
    safe = torch.clamp(alpha * lens, min=1e-12)
    return torch.clamp(1.0 - 1.0 / safe, 0.0, 1.0)


def decoupled_gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float,
    lambda_policy: float | Tensor,
    lambda_critic: float = 1.0,
    bootstrap_values: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Decoupled GAE (VC-PPO): policy advantages with λ_policy, value targets with λ_critic.

    Args: as `gae`; `lambda_policy` may be [B] (see `length_adaptive_lambda`).

    Returns:
        (policy_advantages [B, T], value_targets [B, T]); with λ_critic = 1 and γ = 1 the targets are
        the Monte Carlo returns, so the critic's targets do not decay over long sequences.
    """
    policy_adv, _ = gae(rewards, values, mask, gamma, lambda_policy, bootstrap_values)
    _, value_targets = gae(rewards, values, mask, gamma, lambda_critic, bootstrap_values)
    return policy_adv, value_targets


def group_index(group_ids: Sequence[Hashable] | Tensor) -> tuple[Tensor, list[Hashable]]:
    """Map arbitrary group ids to dense indices: ([S] long tensor, unique ids in first-seen order)."""
    raw = group_ids.tolist() if isinstance(group_ids, Tensor) else list(group_ids)
    positions: dict[Hashable, int] = {}
    index = [positions.setdefault(g, len(positions)) for g in raw]
    return torch.tensor(index, dtype=torch.long), list(positions)


@dataclass(frozen=True)
class GroupAdvantages:
    """Step-wise GRPO advantages.

    advantages: one tensor per trajectory, same shape as its step rewards [L_i].
    traj_no_signal: [N] bool, True when the trajectory's group had zero reward variance.
    no_signal_groups: ids of zero-variance groups (all succeed or all fail): curation counts them.
    group_mean / group_std: per group id, the statistics used (population std).
    """

    advantages: list[Tensor]
    traj_no_signal: Tensor
    no_signal_groups: list[Hashable]
    group_mean: dict[Hashable, float]
    group_std: dict[Hashable, float]


def broadcast_trajectory_rewards(
    traj_rewards: Sequence[float] | Tensor, lengths: Sequence[int]
) -> list[Tensor]:
    """Give every step of trajectory i its trajectory reward R_i (seed 002 §3.3): list of [L_i]."""
    rewards = torch.as_tensor(traj_rewards, dtype=torch.float32)
    if rewards.dim() != 1 or rewards.shape[0] != len(lengths):
        raise ValueError(f"need one reward per trajectory: {tuple(rewards.shape)} vs {len(lengths)} lengths")
    if any(n < 1 for n in lengths):
        raise ValueError("every trajectory needs at least one step")
    return [torch.full((n,), float(r)) for r, n in zip(rewards.tolist(), lengths, strict=True)]


def stepwise_grpo_advantages(
    step_rewards_by_traj: Sequence[Tensor | Sequence[float]],
    group_ids: Sequence[Hashable] | Tensor,
    eps: float = 1e-6,
) -> GroupAdvantages:
    """Step-wise GRPO advantages (seed 002 Eq. 1, seed 001 §3.2).

    All steps of all trajectories sharing a group id (the task) form one step group D;
    A_{i,j} = (r_{i,j} − mean_D) / (σ_D + eps) with the population std σ_D (divide by |D|, not |D|−1),
    so a longer trajectory weighs more in the baseline, exactly as in the paper. A group with σ_D < eps
    gets zero advantages and is reported in `no_signal_groups`.

    Args:
        step_rewards_by_traj: N entries, entry i holds the [L_i] step rewards (L_i ≥ 1); use
            `broadcast_trajectory_rewards` for the DART form where every step carries R_i.
        group_ids: [N] group id per trajectory (hashables, or a tensor).
        eps: std guard, > 0.
    """
    if eps <= 0:
        raise ValueError("eps must be > 0")
    trajs = [torch.as_tensor(r, dtype=torch.float32).reshape(-1) for r in step_rewards_by_traj]
    groups, unique = group_index(group_ids)
    if groups.shape[0] != len(trajs):
        raise ValueError(f"{len(trajs)} trajectories but {groups.shape[0]} group ids")
    if not trajs:
        return GroupAdvantages([], torch.zeros(0, dtype=torch.bool), [], {}, {})
    if any(t.numel() == 0 for t in trajs):
        raise ValueError("every trajectory needs at least one step reward")
    flat = torch.cat(trajs).to(torch.float64)
    if not torch.isfinite(flat).all():
        raise ValueError("step rewards contain NaN or inf")
    lengths = torch.tensor([t.numel() for t in trajs])
    step_group = torch.repeat_interleave(groups, lengths)

    n_groups = len(unique)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, step_group, torch.ones_like(flat))
    mean = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, step_group, flat) / count
    centred = flat - mean[step_group]
    var = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, step_group, centred**2) / count
    std = var.sqrt()
    no_signal = std < eps
    adv = torch.where(no_signal[step_group], torch.zeros_like(centred), centred / (std[step_group] + eps))

    return GroupAdvantages(
        advantages=[a.to(torch.float32) for a in torch.split(adv, lengths.tolist())],
        traj_no_signal=no_signal[groups],
        no_signal_groups=[g for g, flag in zip(unique, no_signal.tolist(), strict=True) if flag],
        group_mean=dict(zip(unique, mean.tolist(), strict=True)),
        group_std=dict(zip(unique, std.tolist(), strict=True)),
    )


def discounted_returns(step_rewards: Sequence[float], final_reward: float, gamma: float) -> Tensor:
    """R_t = Σ_{k ≥ t} γ^(k−t) r_k over one trajectory, where r_k is step k's own (shaped) reward and
    the outcome `final_reward` is received at the last step: [L]."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma}")
    if not step_rewards:
        raise ValueError("a trajectory needs at least one step")
    out = torch.zeros(len(step_rewards), dtype=torch.float64)
    running = 0.0
    for t in reversed(range(len(step_rewards))):
        running = (
            float(step_rewards[t])
            + (float(final_reward) if t == len(step_rewards) - 1 else 0.0)
            + gamma * running
        )
        out[t] = running
    return out.to(torch.float32)


@dataclass(frozen=True)
class AnchorAdvantages:
    """Step-level advantages from repeated states (GiGPO's anchor-state groups).

    advantages: one [L_i] tensor per trajectory (0 for a step whose state no other step of its group
        reached, or whose anchor group's returns are all equal).
    grouped_steps: how many steps share their state with at least one other step of their group.
    anchor_groups: how many anchor groups (≥ 2 steps) there were.
    """

    advantages: list[Tensor]
    grouped_steps: int
    anchor_groups: int


def anchor_step_advantages(
    returns_by_traj: Sequence[Tensor | Sequence[float]],
    state_keys_by_traj: Sequence[Sequence[Hashable | None]],
    group_ids: Sequence[Hashable],
    eps: float = 1e-6,
) -> AnchorAdvantages:
    """Step-level credit within a GRPO group (Feng et al. 2025, "Group-in-Group Policy Optimization
    for LLM Agent Training", GiGPO §3.2): every step of the group's trajectories that starts from the
    same state (equal `state_keys`, a key of None never matches) forms an anchor group; a step's
    advantage is its discounted return minus the anchor group's mean, over the group's population
    std (`discounted_returns`). Steps that act on the same page are compared with each other, so the
    step that reached the goal from a state is credited over the one that wandered from it, where
    step-wise GRPO gives every step of an episode the episode's advantage.

    Args:
        returns_by_traj: N entries of [L_i] discounted returns.
        state_keys_by_traj: N entries of L_i state keys (hashable; None = unknown state).
        group_ids: [N] GRPO group per trajectory; anchor groups never span two groups.
        eps: std guard, > 0; an anchor group with std < eps gets zeros.
    """
    if eps <= 0:
        raise ValueError("eps must be > 0")
    if not len(returns_by_traj) == len(state_keys_by_traj) == len(group_ids):
        raise ValueError("need one return row, key row and group id per trajectory")
    returns = [torch.as_tensor(r, dtype=torch.float64).reshape(-1) for r in returns_by_traj]
    members: dict[tuple[Hashable, Hashable], list[tuple[int, int]]] = {}
    for i, (row, keys) in enumerate(zip(returns, state_keys_by_traj, strict=True)):
        if row.numel() != len(keys) or row.numel() == 0:
            raise ValueError(f"trajectory {i}: {row.numel()} returns but {len(keys)} state keys")
        if not torch.isfinite(row).all():
            raise ValueError("returns contain NaN or inf")
        for t, key in enumerate(keys):
            if key is not None:
                members.setdefault((group_ids[i], key), []).append((i, t))
    out = [torch.zeros_like(r) for r in returns]
    grouped = anchors = 0
    for steps in members.values():
        if len(steps) < 2:
            continue
        anchors += 1
        grouped += len(steps)
        values = torch.stack([returns[i][t] for i, t in steps])
        std = values.std(unbiased=False)
        if std < eps:
            continue
        for (i, t), v in zip(steps, ((values - values.mean()) / (std + eps)).tolist(), strict=True):
            out[i][t] = v
    return AnchorAdvantages([a.to(torch.float32) for a in out], grouped, anchors)
