"""PPO on token-level episodes (seed 000 §2.5.4) and the critic's value pretraining.

The tokens of all steps of one trajectory form one episode [L = Σ_j T_j]; a step's shaped reward
sits on its last token, the trajectory reward on the last token of the last step. Decoupled GAE:
policy advantages with λ_policy (fixed, or length-adaptive 1 − 1/(α·L)), value targets with
λ_critic (1.0 = Monte Carlo). Clip-higher surrogate, clipped value loss on the shared value head,
optional truncated IS weight min(π_old / π_rollout, C) for stale steps."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from workers.policy.embedded.generation import Scored
from workers.rl.advantages import decoupled_gae, gae, length_adaptive_lambda
from workers.rl.config import PPOConfig
from workers.rl.losses import masked_mean, ppo_policy_loss, truncated_is_weight, value_loss
from workers.rl.samples import TrajectorySample
from workers.rl.stats import explained_variance, value_reward_correlation
from workers.rl.trainer.batch import (
    Meter,
    Row,
    Tensor,
    by_trajectory,
    is_stats,
    record_ratio,
    rows_tensors,
    scatter_tokens,
    token_episodes,
)

if TYPE_CHECKING:
    from workers.rl.trainer.core import PolicyTrainer


def advantages(trainer: PolicyTrainer, trajectories: list[TrajectorySample], rows: list[Row]) -> Tensor:
    """Token-level decoupled GAE per trajectory; fills row advantages/returns; returns λ_policy [N]."""
    ppo = trainer.config.ppo
    grouped = by_trajectory(trajectories, rows)
    rewards, values, mask, lengths = token_episodes(trajectories, grouped)
    if ppo.lambda_policy is None:
        lam = length_adaptive_lambda(lengths, ppo.length_adaptive_alpha)
    else:
        lam = torch.full((len(trajectories),), ppo.lambda_policy)
    adv, targets = decoupled_gae(rewards, values, mask, ppo.gamma, lam, ppo.lambda_critic)
    ordered = [r for rs in grouped for r in rs]
    for r, a, ret in zip(
        ordered, scatter_tokens(grouped, adv), scatter_tokens(grouped, targets), strict=True
    ):
        r.advantages, r.returns = a, ret
    return lam


def single_pass(ppo: PPOConfig, n_trajectories: int) -> bool:
    """One epoch of one minibatch: the update's only gradient step is at π_old, so the scoring pass
    that computes π_old can be the training pass (PolicyTrainer._score_old)."""
    return ppo.epochs == 1 and ppo.minibatch_size >= n_trajectories


def update(
    trainer: PolicyTrainer, trajectories: list[TrajectorySample], rows: list[Row], fresh: Scored | None = None
) -> dict[str, float]:
    """One PPO update over prepared rows; returns the metrics of the pass.

    fresh: the differentiable Scored of the kept rows (in order) of a single-pass update, trained on
    instead of scoring them again. Steps not kept (beyond the staleness bound) carry no loss and
    get no forward or backward pass."""
    ppo = trainer.config.ppo
    lam = advantages(trainer, trajectories, rows)
    live = [r for r in rows if r.keep]
    meter = Meter()
    for _ in range(ppo.epochs):
        for traj_ids in trainer.minibatches(len(trajectories), ppo.minibatch_size):
            chosen = set(traj_ids)
            mb = [r for r in live if r.traj in chosen]
            if not mb:
                continue
            t = rows_tensors(mb)
            if fresh is not None:
                if fresh.logprobs.shape[0] != len(mb):
                    raise RuntimeError("a single-pass update needs every kept row in one minibatch")
                scored, fresh = fresh, None
            else:
                scored = trainer.score_rows(trainer.model, mb)
            mask = t["mask"] * scored.mask.to(t["mask"].dtype)
            weights = None
            if ppo.is_cap is not None:
                weights = truncated_is_weight(t["old"], t["rollout"], ppo.is_cap, mask, "token")
            pg_loss, stats = ppo_policy_loss(
                scored.logprobs,
                t["old"],
                t["adv"],
                mask,
                ppo.clip_low,
                ppo.clip_high,
                ppo.loss_agg,
                weights,
            )
            v_loss, v_clip = value_loss(
                scored.values, t["old_values"], t["ret"], mask, ppo.value_clip, ppo.loss_agg
            )
            entropy = masked_mean(scored.entropies, mask)
            loss = pg_loss + ppo.value_loss_coef * v_loss - ppo.entropy_coef * entropy
            trainer.step_optimizer(loss, meter)
            record_ratio(mb, scored.logprobs, t["old"], t["adv"], mask, ppo.clip_low, ppo.clip_high)
            tokens = float(mask.sum())
            meter.add("policy/loss", float(pg_loss.detach()), tokens)
            meter.add("value/loss", float(v_loss.detach()), tokens)
            meter.add("policy/clip_frac_low", stats.clip_frac_low, tokens)
            meter.add("policy/clip_frac_high", stats.clip_frac_high, tokens)
            meter.add("policy/ratio_mean", stats.ratio_mean, tokens)
            meter.add("policy/kl", stats.approx_kl, tokens)
            meter.add("value/clip_frac", v_clip, tokens)
    metrics = meter.means()
    metrics.pop("value/clip_frac", None)
    is_stats(rows, ppo.is_cap, "token", meter)
    metrics.update({k: v for k, v in meter.means().items() if k.startswith("policy/is_")})
    old_values = torch.cat([r.old_values for r in rows])
    returns = torch.cat([r.returns for r in rows])
    metrics["policy/entropy"] = float(torch.cat([r.entropies for r in rows]).mean())
    metrics["value/explained_variance"] = explained_variance(old_values, returns)
    metrics["value/mean"] = float(old_values.mean())
    firsts: dict[int, float] = {}
    for r in rows:
        firsts.setdefault(r.traj, float(r.old_values[0]))
    metrics["value/reward_corr"] = value_reward_correlation(
        [firsts[i] for i in range(len(trajectories))], [t.reward for t in trajectories]
    )
    metrics["value/pretraining"] = 0.0
    metrics["policy/lr"] = float(trainer.optimizer.param_groups[0]["lr"])
    trainer.fill_step_stats(trajectories, rows, lam.tolist())
    return metrics


def pretrain_value(trainer: PolicyTrainer, trajectories: list[TrajectorySample]) -> dict[str, float]:
    """One critic update with λ = 1 on a fixed policy (only the value head trains).

    Returns value/loss, value/explained_variance, value/mean, value/pretraining (1 while not
    done). `value_pretrain_done` says when to switch to PPO (ValuePretrainMonitor)."""
    if not trajectories:
        raise ValueError("pretrain_value needs at least one trajectory")
    ppo = trainer.config.ppo
    trajectories, rows = trainer.prepare(trajectories, with_reference=False)
    grouped = by_trajectory(trajectories, rows)
    rewards, values, mask, _ = token_episodes(trajectories, grouped)
    _, returns = gae(rewards, values, mask, ppo.gamma, 1.0)
    for r, ret in zip((r for rs in grouped for r in rs), scatter_tokens(grouped, returns), strict=True):
        r.returns = ret
    if trainer.value_optimizer is None:
        trainer.value_optimizer = torch.optim.Adam(trainer.value_params(), lr=ppo.lr_value)
    frozen = trainer.policy_params()
    for p in frozen:
        p.requires_grad_(False)
    meter = Meter()
    try:
        for traj_ids in trainer.minibatches(len(trajectories), ppo.minibatch_size):
            chosen = set(traj_ids)
            mb = [r for r in rows if r.traj in chosen]
            t = rows_tensors(mb)
            scored = trainer.score_rows(trainer.model, mb)
            loss, _ = value_loss(scored.values, t["old_values"], t["ret"], t["mask"], None, ppo.loss_agg)
            trainer.value_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainer.value_params(), ppo.max_grad_norm)
            trainer.value_optimizer.step()
            meter.add("value/loss", float(loss.detach()), float(t["mask"].sum()))
    finally:
        for p in frozen:
            p.requires_grad_(True)
    old_values = torch.cat([r.old_values for r in rows])
    returns_flat = torch.cat([r.returns for r in rows])
    metrics = meter.means()
    ev = explained_variance(old_values, returns_flat)
    trainer.value_monitor.record(metrics["value/loss"], ev)
    metrics["value/explained_variance"] = ev
    metrics["value/mean"] = float(old_values.mean())
    metrics["value/pretraining"] = 0.0 if trainer.value_pretrain_done else 1.0
    metrics["value/pretrain_updates"] = float(trainer.value_monitor.updates)
    return {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
