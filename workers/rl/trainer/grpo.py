"""Step-wise GRPO (seed 002 Eq. 1–2, seed 001 §3.2).

Every step gets R_traj (+ its shaped reward), z-scored over all steps of the group (population
std), plus, with `grpo.anchor_weight` ω > 0, ω × its step-level credit among the group's steps that
acted on the same state (GiGPO, workers.rl.advantages.anchor_step_advantages); steps outside the
top `entropy_keep_fraction` of mean token entropy of their group are masked out; truncated IS;
optional k3 KL to a reference."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from workers.rl.advantages import anchor_step_advantages, discounted_returns, stepwise_grpo_advantages
from workers.rl.losses import entropy_step_filter, grpo_loss, step_mean_entropy
from workers.rl.samples import TrajectorySample, state_key
from workers.rl.trainer.batch import Meter, Row, is_stats, pad, record_ratio, rows_tensors

if TYPE_CHECKING:
    from workers.rl.trainer.core import PolicyTrainer


def update(trainer: PolicyTrainer, trajectories: list[TrajectorySample], rows: list[Row]) -> dict[str, float]:
    """One step-wise GRPO update over prepared rows; returns the metrics of the pass."""
    g = trainer.config.grpo
    step_rewards = [[traj.reward + s.reward for s in traj.steps] for traj in trajectories]
    group_ids = [t.group_id for t in trajectories]
    grouped = stepwise_grpo_advantages(step_rewards, group_ids, g.adv_eps)
    advantages = grouped.advantages
    anchored = None
    if g.anchor_weight > 0:  # GiGPO: + ω × the step's credit among the steps that acted on its state
        anchored = anchor_step_advantages(
            [discounted_returns([s.reward for s in t.steps], t.reward, g.anchor_gamma) for t in trajectories],
            [[state_key(s) for s in t.steps] for t in trajectories],
            group_ids,
            g.adv_eps,
        )
        advantages = [a + g.anchor_weight * b for a, b in zip(advantages, anchored.advantages, strict=True)]
    pos = [0] * len(trajectories)
    for r in rows:
        a = float(advantages[r.traj][pos[r.traj]])
        pos[r.traj] += 1
        r.advantages = torch.full((len(r.step.token_ids),), a)
    step_entropy = step_mean_entropy(
        pad([r.entropies for r in rows], max(len(r.step.token_ids) for r in rows)),
        pad([torch.ones(len(r.step.token_ids)) for r in rows], max(len(r.step.token_ids) for r in rows)),
    )
    keep = entropy_step_filter(step_entropy, [group_ids[r.traj] for r in rows], g.entropy_keep_fraction)
    for r, k in zip(rows, keep.tolist(), strict=True):
        r.keep = r.keep and bool(k)
    meter = Meter()
    # Steps filtered out (entropy filter, staleness) carry no loss: minibatches are drawn from the
    # others, so no forward and backward pass is spent on them.
    kept = [r for r in rows if r.keep]
    for _ in range(g.epochs):
        for idx in trainer.minibatches(len(kept), g.minibatch_size):
            mb = [kept[i] for i in idx]
            t = rows_tensors(mb)
            scored = trainer.score_rows(trainer.model, mb)
            mask = t["mask"] * scored.mask.to(t["mask"].dtype)
            if float(mask.sum()) == 0:  # every step of this minibatch filtered out
                continue
            loss, stats = grpo_loss(
                scored.logprobs,
                t["old"],
                t["adv"],
                mask,
                g.clip_low,
                g.clip_high,
                rollout_logprobs=t["rollout"],
                is_cap=g.is_cap,
                is_level=g.is_level,
                ref_logprobs=t.get("ref"),
                beta_kl=g.beta_kl,
                kl_estimator=g.kl_estimator,
                agg=g.loss_agg,
            )
            trainer.step_optimizer(loss, meter)
            record_ratio(mb, scored.logprobs, t["old"], t["adv"], mask, g.clip_low, g.clip_high)
            tokens = float(mask.sum())
            meter.add("policy/loss", float(loss.detach()), tokens)
            meter.add("policy/clip_frac_low", stats.policy.clip_frac_low, tokens)
            meter.add("policy/clip_frac_high", stats.policy.clip_frac_high, tokens)
            meter.add("policy/ratio_mean", stats.policy.ratio_mean, tokens)
            if trainer.uses_reference:
                meter.add("policy/kl", stats.kl, tokens)
    metrics = meter.means()
    is_stats(rows, g.is_cap, g.is_level, meter)
    metrics.update({k: v for k, v in meter.means().items() if k.startswith("policy/is_")})
    metrics["policy/entropy"] = float(torch.cat([r.entropies for r in rows]).mean())
    metrics["policy/steps_kept_frac"] = float(keep.float().mean())
    metrics["policy/lr"] = float(trainer.optimizer.param_groups[0]["lr"])
    metrics["curation/no_signal_groups"] = float(len(grouped.no_signal_groups))
    if anchored is not None:
        steps = sum(len(t.steps) for t in trajectories)
        metrics["policy/anchor_steps_frac"] = anchored.grouped_steps / steps if steps else 0.0
        metrics["policy/anchor_groups"] = float(anchored.anchor_groups)
    trainer.fill_step_stats(trajectories, rows, None)
    return metrics
