"""Token-level RL trainer for the embedded policy: PPO and step-wise GRPO on stored rollouts (SPEC §8).

The Celery engine (rl_control/engine) collects trajectories from the policy server and hands them
here as `TrajectorySample`s; one `PolicyTrainer.update` is one training step (one policy version).

Data layout. Every policy call of a rollout is a `StepSample`: the prompt the policy read (rebuilt
with `step_sample_from` exactly as `EmbeddedPolicy.inputs_for` / the policy server build it), the
sampled response token ids and their rollout log-probs. The trainer scores a batch of steps as rows
[S, T] (S = steps, T = longest response) with `generation.score`, i.e. under the same
grammar-masked, temperature-scaled distribution the sampler used, so the recomputed log-probs equal
the rollout's for an unchanged model (ratio = 1 at version 0).

PPO (seed 000 §2.5.4): the tokens of all steps of one trajectory form one token-level episode
[L = Σ_j T_j]; a step's shaped reward sits on its last token, the trajectory reward on the last token
of the last step. Decoupled GAE: policy advantages with λ_policy (fixed, or length-adaptive
1 − 1/(α·L)), value targets with λ_critic (1.0 = Monte Carlo). Clip-higher surrogate, clipped value
loss on the shared value head, optional truncated IS weight min(π_old / π_rollout, C) for stale steps.

Step-wise GRPO (seed 002 Eq. 1–2, seed 001 §3.2): every step gets R_traj (+ its shaped reward),
z-scored over all steps of the group (population std); steps outside the top `entropy_keep_fraction`
of mean token entropy of their group are masked out; truncated IS; optional k3 KL to a reference.

Both: a step whose policy version lags the trainer's by more than `curation.staleness_bound` gets no
loss (step-level staleness: in async mode a long rollout spans several versions).

Value pretraining (seed 000 §2.5.4): `pretrain_value` trains only the value head (policy fixed) on
λ = 1 returns until `value_pretrain_done`. Entropulse (seed 001 §3.3): `update` feeds a
`PlateauDetector`; when `plateaued`, the caller runs `entropulse(successes)` = SFT on stored
successes (workers/policy/sft.py) followed by `reset_reference()`.

`save` writes an HF checkpoint directory `EmbeddedPolicy.from_pretrained` loads plus
`trainer_state.pt` (optimizers, RNG, counters, reference weights, plateau / value-pretraining
monitors, the caller's curation state); `resume` restores it so the next update is bit-identical to
the one an uninterrupted trainer would have made.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import PromptBatch, Scored, score
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint, load_image
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.rl.advantages import decoupled_gae, gae, length_adaptive_lambda, stepwise_grpo_advantages
from workers.rl.config import ConfigError, RLConfig, lr_scale
from workers.rl.curation import PlateauDetector
from workers.rl.losses import (
    entropy_step_filter,
    grpo_loss,
    masked_mean,
    ppo_policy_loss,
    step_mean_entropy,
    truncated_is_weight,
    value_loss,
)
from workers.rl.samples import StepSample, TrajectorySample, sft_examples_from
from workers.rl.stats import explained_variance, value_reward_correlation
from workers.rl.value_pretrain import ValuePretrainMonitor

STATE_FILE = "trainer_state.pt"
STATE_KIND = "flywheel-rl-trainer"
SCORE_CHUNK = 16  # rows per no-grad scoring pass (bounds memory on long prompts)

Tensor = torch.Tensor


@dataclass
class _Row:
    """One step as the trainer batches it, with everything computed before the update."""

    traj: int  # index into the batch's trajectories
    step: StepSample
    pixels: Tensor  # [3, H, W]
    prompt: list[int]
    old_logprobs: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    entropies: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    old_values: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    ref_logprobs: Tensor | None = None  # [T]
    advantages: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    returns: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    keep: bool = True
    ratio: float = math.nan
    clipped: bool = False


def _pad(rows: Sequence[Tensor], width: int) -> Tensor:
    """Right-pad 1-D tensors to [len(rows), width] with zeros."""
    out = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out


class _Meter:
    """Weighted running means of named figures over minibatches."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weights: dict[str, float] = {}

    def add(self, name: str, value: float, weight: float = 1.0) -> None:
        if math.isfinite(value) and weight > 0:
            self.sums[name] = self.sums.get(name, 0.0) + value * weight
            self.weights[name] = self.weights.get(name, 0.0) + weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.weights[k] for k in self.sums}


class PolicyTrainer:
    """PPO / step-wise GRPO updates of a `FlywheelPolicyModel` (see the module docstring).

    Attributes: model (trained in place), version (policy version the current weights are),
    last_step_stats ({trajectory_id: [per-step dict]} of the last update, for episode replay),
    curation_state (opaque dict the engine keeps here so it is checkpointed with the trainer).
    """

    def __init__(
        self,
        checkpoint_dir: str | Path | FlywheelPolicyModel,
        config: RLConfig,
        seed: int = 0,
    ) -> None:
        problems = config.validate()
        if problems:
            raise ConfigError(problems)
        if isinstance(checkpoint_dir, FlywheelPolicyModel):
            model, tokenizer = checkpoint_dir, FlywheelTokenizer()
        else:
            model, tokenizer = load_checkpoint(checkpoint_dir)
        self.config = config
        self.seed = seed
        self.model = model
        self.tokenizer = tokenizer
        # EmbeddedPolicy supplies prompt encoding and the grammar, identical to inference.
        self._policy = EmbeddedPolicy(model, tokenizer)
        self.grammar = self._policy.grammar
        raw_version = str(model.config.flywheel_version)
        self.version = int(raw_version) if raw_version.isdigit() else 0
        self.steps_done = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer = self._build_optimizer()
        self.value_optimizer: torch.optim.Optimizer | None = None
        self.reference: FlywheelPolicyModel | None = None
        if self._uses_reference:
            self.reference = self._frozen_copy(model)
        c = config.curation
        self.plateau = PlateauDetector(
            c.plateau_window, c.plateau_reward_min_gain, c.plateau_entropy_max_rel_change
        )
        self.value_monitor = ValuePretrainMonitor.from_config(config.ppo)
        self.curation_state: dict[str, Any] = {}
        self.last_step_stats: dict[str, list[dict[str, Any]]] = {}
        self.last_dropped: list[str] = []  # trajectory ids the last update could not train on
        self.entropulse_count = 0

    # setup ----------------------------------------------------------------------------------
    @property
    def _uses_reference(self) -> bool:
        return self.config.algorithm == "grpo" and self.config.grpo.beta_kl > 0

    @staticmethod
    def _frozen_copy(model: FlywheelPolicyModel) -> FlywheelPolicyModel:
        ref = copy.deepcopy(model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _value_params(self) -> list[torch.nn.Parameter]:
        return list(self.model.value_head.parameters())

    def _policy_params(self) -> list[torch.nn.Parameter]:
        value_ids = {id(p) for p in self._value_params()}
        return [p for p in self.model.parameters() if id(p) not in value_ids]

    def _build_optimizer(self) -> torch.optim.Optimizer:
        if self.config.algorithm == "ppo":
            ppo = self.config.ppo
            groups = [
                {"params": self._policy_params(), "lr": ppo.lr_policy},
                {"params": self._value_params(), "lr": ppo.lr_value},
            ]
        else:  # GRPO has no critic: the value head gets no gradient, Adam skips it
            groups = [{"params": list(self.model.parameters()), "lr": self.config.grpo.lr}]
        for group in groups:
            group["base_lr"] = group["lr"]
        return torch.optim.Adam(groups)

    def set_progress(self, progress: float) -> float:
        """Scale the learning rate(s) for `progress`, the fraction of the run's budget spent (the
        algorithm section's lr_schedule / lr_decay_start); returns the multiplier."""
        section = self.config.ppo if self.config.algorithm == "ppo" else self.config.grpo
        scale = lr_scale(section.lr_schedule, section.lr_decay_start, progress)
        for group in self.optimizer.param_groups:
            group["lr"] = group.get("base_lr", group["lr"]) * scale
        return scale

    # encoding and scoring -------------------------------------------------------------------
    def _rows(self, trajectories: Sequence[TrajectorySample]) -> list[_Row]:
        cfg = self.model.config
        rows = []
        for i, traj in enumerate(trajectories):
            for step in traj.steps:
                pixels = load_image(step.prompt.image, cfg.image_width, cfg.image_height)
                rows.append(_Row(i, step, pixels, self._policy.encode_prompt(step.prompt.text)))
        return rows

    def _batch(self, rows: Sequence[_Row]) -> PromptBatch:
        longest = max(len(r.prompt) for r in rows)
        ids = torch.full((len(rows), longest), self.tokenizer.pad_id, dtype=torch.long)
        mask = torch.zeros(len(rows), longest, dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, : len(r.prompt)] = torch.tensor(r.prompt, dtype=torch.long)
            mask[i, : len(r.prompt)] = True
        return PromptBatch(torch.stack([r.pixels for r in rows]), ids, mask)

    def _score(self, model: FlywheelPolicyModel, rows: Sequence[_Row]) -> Scored:
        batch = self._batch(rows)
        return score(model, self.grammar, batch, [r.step.token_ids for r in rows], self.config.temperature)

    @torch.no_grad()
    def _score_old(self, rows: Sequence[_Row], with_reference: bool) -> None:
        """Fill old log-probs / entropies / values (and reference log-probs) of every row."""
        for start in range(0, len(rows), SCORE_CHUNK):
            chunk = rows[start : start + SCORE_CHUNK]
            scored = self._score(self.model, chunk)
            ref = self._score(self.reference, chunk) if with_reference and self.reference else None
            for i, r in enumerate(chunk):
                n = len(r.step.token_ids)
                r.old_logprobs = scored.logprobs[i, :n].clone()
                r.entropies = scored.entropies[i, :n].clone()
                r.old_values = scored.values[i, :n].clone()
                if ref is not None:
                    r.ref_logprobs = ref.logprobs[i, :n].clone()

    def _prepare(
        self, trajectories: list[TrajectorySample], with_reference: bool
    ) -> tuple[list[TrajectorySample], list[_Row]]:
        """Rows scored under the current (and reference) model, without the trajectories that cannot
        be policy samples: token ids outside the vocabulary or tokens the grammar forbids (log-prob
        −inf). Those are listed in `last_dropped` and never fail the training step."""
        vocab = self.model.config.vocab_size
        dropped = [
            t.trajectory_id
            for t in trajectories
            if any(not 0 <= tok < vocab for s in t.steps for tok in s.token_ids)
        ]
        kept = [t for t in trajectories if t.trajectory_id not in set(dropped)]
        rows = self._rows(kept)
        self._score_old(rows, with_reference)
        bad = {r.traj for r in rows if not torch.isfinite(r.old_logprobs).all()}
        if bad:
            dropped += [kept[i].trajectory_id for i in sorted(bad)]
            remap = {old: new for new, old in enumerate(i for i in range(len(kept)) if i not in bad)}
            rows = [replace(r, traj=remap[r.traj]) for r in rows if r.traj not in bad]
            kept = [t for i, t in enumerate(kept) if i not in bad]
        self.last_dropped = dropped
        if not kept:
            raise PolicyError(f"no trainable trajectory: {len(dropped)} dropped as not policy samples")
        # Step-level staleness: weights change mid-episode in async mode, so a long rollout's early
        # steps can be older than the bound while its last ones are fresh. Steps beyond the bound
        # carry no loss (their trajectory's reward still sets the group baseline and the returns).
        bound = self.config.curation.staleness_bound
        for r in rows:
            r.keep = self.version - r.step.policy_version <= bound
        return kept, rows

    def recompute_logprobs(self, steps: Sequence[StepSample]) -> list[list[float]]:
        """Current-model log-probs of given steps' tokens (BEPA: injected stored successes get their
        rollout log-probs recomputed under the policy that trains on them). A token the grammar
        forbids gets −inf."""
        if not steps:
            return []
        traj = TrajectorySample("recompute", "", "", list(steps), 0.0, False)
        rows = self._rows([traj])
        self._score_old(rows, with_reference=False)
        return [r.old_logprobs.tolist() for r in rows]

    # the update -----------------------------------------------------------------------------
    def update(self, trajectories: list[TrajectorySample]) -> dict[str, float]:
        """One training step over `trajectories`; returns SPEC §9 metrics (rl_control/metric_names)
        whose values are finite (undefined figures such as EV of a constant return are left out).

        policy/kl is KL(π_θ ‖ π_ref) for GRPO with β > 0 and, for PPO (no reference), the k3
        estimate of KL(π_old ‖ π_θ) over the update. Trajectories that cannot be policy samples are
        skipped and listed in `last_dropped`; the version advances by one."""
        if not trajectories:
            raise ValueError("update needs at least one trajectory")
        ids = [t.trajectory_id for t in trajectories]
        if len(set(ids)) != len(ids):
            raise ValueError("trajectory ids must be unique within an update")
        started = time.perf_counter()
        self.model.train()
        trajectories, rows = self._prepare(trajectories, with_reference=self._uses_reference)
        if self.config.algorithm == "ppo":
            metrics = self._update_ppo(trajectories, rows)
        else:
            metrics = self._update_grpo(trajectories, rows)
        self.model.eval()
        lags = [self.version - r.step.policy_version for r in rows]
        bound = self.config.curation.staleness_bound
        metrics["efficiency/stale_steps_frac"] = sum(lag > bound for lag in lags) / len(lags)
        metrics["efficiency/staleness_mean"] = sum(lags) / len(lags)
        metrics["efficiency/staleness_max"] = float(max(lags))
        self.version += 1
        self.steps_done += 1
        self.model.config.flywheel_version = str(self.version)
        reward_mean = sum(t.reward for t in trajectories) / len(trajectories)
        if "policy/entropy" in metrics:
            self.plateau.record(reward_mean, metrics["policy/entropy"])
        metrics["efficiency/update_s"] = time.perf_counter() - started
        return {k: float(v) for k, v in metrics.items() if math.isfinite(v)}

    @property
    def plateaued(self) -> bool:
        """Entropulse trigger: reward stagnates while entropy does not recover (see PlateauDetector)."""
        return self.plateau.plateaued

    def _minibatches(self, n: int, size: int) -> list[list[int]]:
        order = torch.randperm(n, generator=self.generator).tolist()
        return [order[i : i + size] for i in range(0, n, size)]

    def _step_optimizer(self, loss: Tensor, meter: _Meter) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        max_norm = (
            self.config.ppo.max_grad_norm
            if self.config.algorithm == "ppo"
            else self.config.grpo.max_grad_norm
        )
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        meter.add("policy/grad_norm", float(grad_norm))
        self.optimizer.step()

    @staticmethod
    def _record_ratio(
        rows: Sequence[_Row], logprobs: Tensor, old: Tensor, adv: Tensor, mask: Tensor, lo: float, hi: float
    ) -> None:
        """Per-step ratio (token mean) and clip flag of this pass, for episode replay."""
        with torch.no_grad():
            ratio = torch.exp(torch.clamp(logprobs.detach() - old, -20.0, 20.0))
            clipped = ((ratio < 1 - lo) & (adv < 0)) | ((ratio > 1 + hi) & (adv > 0))
            valid = mask > 0
            for i, r in enumerate(rows):
                if not bool(valid[i].any()):  # filtered out: not trained on
                    continue
                r.ratio = float(masked_mean(ratio[i], valid[i].to(ratio.dtype)))
                r.clipped = bool((clipped[i] & valid[i]).any())

    def _is_stats(self, rows: Sequence[_Row], cap: float | None, level: str, meter: _Meter) -> None:
        """IS-weight figures over all rows: mean of the truncated weights, max before truncation."""
        old = torch.cat([r.old_logprobs for r in rows])
        rollout = torch.tensor([x for r in rows for x in r.step.rollout_logprobs])
        raw = torch.exp(torch.clamp(old - rollout, max=20.0))
        if cap is None:
            meter.add("policy/is_weight_mean", float(raw.mean()))
            meter.add("policy/is_weight_max", float(raw.max()))
            return
        width = max(r.old_logprobs.numel() for r in rows)
        o = _pad([r.old_logprobs for r in rows], width)
        ro = _pad([torch.tensor(r.step.rollout_logprobs) for r in rows], width)
        m = _pad([torch.ones(r.old_logprobs.numel()) for r in rows], width)
        w = truncated_is_weight(o, ro, cap, m, level)  # type: ignore[arg-type]
        if level == "sequence":
            raw_seq = torch.exp(torch.clamp(((o - ro) * m).sum(-1), max=20.0))
            meter.add("policy/is_weight_max", float(raw_seq.max()))
        else:
            meter.add("policy/is_weight_max", float(raw.max()))
        meter.add("policy/is_weight_mean", float(masked_mean(w, m)))
        meter.add("policy/is_truncated_frac", float(masked_mean((w >= cap * (1 - 1e-6)).float(), m)))

    # PPO ------------------------------------------------------------------------------------
    def _ppo_advantages(self, trajectories: Sequence[TrajectorySample], rows: list[_Row]) -> Tensor:
        """Token-level decoupled GAE per trajectory; fills row advantages/returns; returns λ_policy [N]."""
        ppo = self.config.ppo
        by_traj: list[list[_Row]] = [[] for _ in trajectories]
        for r in rows:
            by_traj[r.traj].append(r)
        lengths = torch.tensor([sum(r.old_logprobs.numel() for r in rs) for rs in by_traj])
        width = int(lengths.max())
        rewards = torch.zeros(len(trajectories), width)
        values = _pad([torch.cat([r.old_values for r in rs]) for rs in by_traj], width)
        mask = _pad([torch.ones(int(n)) for n in lengths], width)
        for i, (traj, rs) in enumerate(zip(trajectories, by_traj, strict=True)):
            end = 0
            for r in rs:
                end += r.old_logprobs.numel()
                rewards[i, end - 1] += r.step.reward
            rewards[i, end - 1] += traj.reward
        if ppo.lambda_policy is None:
            lam = length_adaptive_lambda(lengths, ppo.length_adaptive_alpha)
        else:
            lam = torch.full((len(trajectories),), ppo.lambda_policy)
        adv, targets = decoupled_gae(rewards, values, mask, ppo.gamma, lam, ppo.lambda_critic)
        for i, rs in enumerate(by_traj):
            pos = 0
            for r in rs:
                n = r.old_logprobs.numel()
                r.advantages, r.returns = adv[i, pos : pos + n].clone(), targets[i, pos : pos + n].clone()
                pos += n
        return lam

    def _rows_tensors(self, rows: Sequence[_Row]) -> dict[str, Tensor]:
        width = max(len(r.step.token_ids) for r in rows)
        out = {
            "old": _pad([r.old_logprobs for r in rows], width),
            "rollout": _pad([torch.tensor(r.step.rollout_logprobs) for r in rows], width),
            "adv": _pad([r.advantages for r in rows], width),
            "ret": _pad([r.returns for r in rows], width),
            "old_values": _pad([r.old_values for r in rows], width),
            "mask": _pad([torch.ones(len(r.step.token_ids)) * float(r.keep) for r in rows], width),
        }
        if all(r.ref_logprobs is not None for r in rows):
            out["ref"] = _pad([r.ref_logprobs for r in rows], width)  # type: ignore[misc]
        return out

    def _update_ppo(self, trajectories: list[TrajectorySample], rows: list[_Row]) -> dict[str, float]:
        ppo = self.config.ppo
        lam = self._ppo_advantages(trajectories, rows)
        meter = _Meter()
        for _ in range(ppo.epochs):
            for traj_ids in self._minibatches(len(trajectories), ppo.minibatch_size):
                chosen = set(traj_ids)
                mb = [r for r in rows if r.traj in chosen]
                t = self._rows_tensors(mb)
                scored = self._score(self.model, mb)
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
                self._step_optimizer(loss, meter)
                self._record_ratio(mb, scored.logprobs, t["old"], t["adv"], mask, ppo.clip_low, ppo.clip_high)
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
        self._is_stats(rows, ppo.is_cap, "token", meter)
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
        metrics["policy/lr"] = float(self.optimizer.param_groups[0]["lr"])
        self._fill_step_stats(trajectories, rows, lam.tolist())
        return metrics

    # GRPO -----------------------------------------------------------------------------------
    def _update_grpo(self, trajectories: list[TrajectorySample], rows: list[_Row]) -> dict[str, float]:
        g = self.config.grpo
        step_rewards = [[traj.reward + s.reward for s in traj.steps] for traj in trajectories]
        group_ids = [t.group_id for t in trajectories]
        grouped = stepwise_grpo_advantages(step_rewards, group_ids, g.adv_eps)
        pos = [0] * len(trajectories)
        for r in rows:
            a = float(grouped.advantages[r.traj][pos[r.traj]])
            pos[r.traj] += 1
            r.advantages = torch.full((len(r.step.token_ids),), a)
        step_entropy = step_mean_entropy(
            _pad([r.entropies for r in rows], max(len(r.step.token_ids) for r in rows)),
            _pad([torch.ones(len(r.step.token_ids)) for r in rows], max(len(r.step.token_ids) for r in rows)),
        )
        keep = entropy_step_filter(step_entropy, [group_ids[r.traj] for r in rows], g.entropy_keep_fraction)
        for r, k in zip(rows, keep.tolist(), strict=True):
            r.keep = r.keep and bool(k)
        meter = _Meter()
        for _ in range(g.epochs):
            for idx in self._minibatches(len(rows), g.minibatch_size):
                mb = [rows[i] for i in idx]
                t = self._rows_tensors(mb)
                scored = self._score(self.model, mb)
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
                self._step_optimizer(loss, meter)
                self._record_ratio(mb, scored.logprobs, t["old"], t["adv"], mask, g.clip_low, g.clip_high)
                tokens = float(mask.sum())
                meter.add("policy/loss", float(loss.detach()), tokens)
                meter.add("policy/clip_frac_low", stats.policy.clip_frac_low, tokens)
                meter.add("policy/clip_frac_high", stats.policy.clip_frac_high, tokens)
                meter.add("policy/ratio_mean", stats.policy.ratio_mean, tokens)
                if self._uses_reference:
                    meter.add("policy/kl", stats.kl, tokens)
        metrics = meter.means()
        self._is_stats(rows, g.is_cap, g.is_level, meter)
        metrics.update({k: v for k, v in meter.means().items() if k.startswith("policy/is_")})
        metrics["policy/entropy"] = float(torch.cat([r.entropies for r in rows]).mean())
        metrics["policy/steps_kept_frac"] = float(keep.float().mean())
        metrics["policy/lr"] = float(self.optimizer.param_groups[0]["lr"])
        metrics["curation/no_signal_groups"] = float(len(grouped.no_signal_groups))
        self._fill_step_stats(trajectories, rows, None)
        return metrics

    def _fill_step_stats(
        self, trajectories: Sequence[TrajectorySample], rows: Sequence[_Row], lambdas: list[float] | None
    ) -> None:
        ppo = self.config.algorithm == "ppo"
        stats: dict[str, list[dict[str, Any]]] = {t.trajectory_id: [] for t in trajectories}
        for r in rows:
            traj = trajectories[r.traj]
            stats[traj.trajectory_id].append(
                {
                    "value": float(r.old_values[0]) if ppo else None,
                    "advantage": float(r.advantages.mean()),
                    "lambda_policy": lambdas[r.traj] if lambdas is not None else None,
                    "ratio": None if math.isnan(r.ratio) else r.ratio,
                    "clipped": r.clipped,
                    "kept": r.keep,
                    "policy_version": r.step.policy_version,
                }
            )
        self.last_step_stats = stats

    # value pretraining ----------------------------------------------------------------------
    def pretrain_value(self, trajectories: list[TrajectorySample]) -> dict[str, float]:
        """One critic update with λ = 1 on a fixed policy (only the value head trains).

        Returns value/loss, value/explained_variance, value/mean, value/pretraining (1 while not
        done). `value_pretrain_done` says when to switch to PPO (ValuePretrainMonitor)."""
        if not trajectories:
            raise ValueError("pretrain_value needs at least one trajectory")
        ppo = self.config.ppo
        trajectories, rows = self._prepare(trajectories, with_reference=False)
        by_traj: list[list[_Row]] = [[] for _ in trajectories]
        for r in rows:
            by_traj[r.traj].append(r)
        lengths = [sum(r.old_logprobs.numel() for r in rs) for rs in by_traj]
        width = max(lengths)
        rewards = torch.zeros(len(trajectories), width)
        for i, (traj, rs) in enumerate(zip(trajectories, by_traj, strict=True)):
            end = 0
            for r in rs:
                end += r.old_logprobs.numel()
                rewards[i, end - 1] += r.step.reward
            rewards[i, end - 1] += traj.reward
        values = _pad([torch.cat([r.old_values for r in rs]) for rs in by_traj], width)
        mask = _pad([torch.ones(n) for n in lengths], width)
        _, returns = gae(rewards, values, mask, ppo.gamma, 1.0)
        for i, rs in enumerate(by_traj):
            pos = 0
            for r in rs:
                n = r.old_logprobs.numel()
                r.returns = returns[i, pos : pos + n].clone()
                pos += n
        if self.value_optimizer is None:
            self.value_optimizer = torch.optim.Adam(self._value_params(), lr=ppo.lr_value)
        frozen = self._policy_params()
        for p in frozen:
            p.requires_grad_(False)
        meter = _Meter()
        try:
            for traj_ids in self._minibatches(len(trajectories), ppo.minibatch_size):
                chosen = set(traj_ids)
                mb = [r for r in rows if r.traj in chosen]
                t = self._rows_tensors(mb)
                scored = self._score(self.model, mb)
                loss, _ = value_loss(scored.values, t["old_values"], t["ret"], t["mask"], None, ppo.loss_agg)
                self.value_optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self._value_params(), ppo.max_grad_norm)
                self.value_optimizer.step()
                meter.add("value/loss", float(loss.detach()), float(t["mask"].sum()))
        finally:
            for p in frozen:
                p.requires_grad_(True)
        old_values = torch.cat([r.old_values for r in rows])
        returns_flat = torch.cat([r.returns for r in rows])
        metrics = meter.means()
        ev = explained_variance(old_values, returns_flat)
        self.value_monitor.record(metrics["value/loss"], ev)
        metrics["value/explained_variance"] = ev
        metrics["value/mean"] = float(old_values.mean())
        metrics["value/pretraining"] = 0.0 if self.value_pretrain_done else 1.0
        return {k: float(v) for k, v in metrics.items() if math.isfinite(v)}

    @property
    def value_pretrain_done(self) -> str | None:
        """None while pretraining should go on, else why it stopped ("converged" / "max_updates")."""
        return self.value_monitor.done

    # Entropulse -----------------------------------------------------------------------------
    def reset_reference(self) -> None:
        """Entropulse: the KL reference becomes the current policy."""
        if self._uses_reference:
            self.reference = self._frozen_copy(self.model)

    def entropulse(
        self,
        successes: list[TrajectorySample],
        steps: int = 50,
        lr: float = 1e-4,
        batch_size: int = 16,
        workdir: str | Path | None = None,
    ) -> dict[str, Any]:
        """SFT on stored successes (workers.policy.sft.sft_train), then reset the reference and the
        plateau detector. Returns the SFT figures (steps, loss_first, loss_last, examples)."""
        from workers.policy.sft import sft_train

        examples = sft_examples_from(successes, self.tokenizer, self.grammar)
        if not examples:
            raise PolicyError("Entropulse needs at least one stored success inside the grammar")
        version = str(self.model.config.flywheel_version)
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            # a fresh directory: sft_train would resume from an existing trainer state
            result = sft_train(
                self.model,
                examples,
                Path(tmp) / "entropulse",
                steps=steps,
                lr=lr,
                batch_size=batch_size,
                seed=self.seed + self.entropulse_count,
            )
        self.model.config.flywheel_version = version
        self.model.eval()
        self.entropulse_count += 1
        self.reset_reference()
        self.plateau.reset()
        return {
            "examples": len(examples),
            "steps": result["steps"],
            "loss_first": result["loss_first"],
            "loss_last": result["loss_last"],
        }

    # checkpoints ----------------------------------------------------------------------------
    def save(self, out_dir: str | Path, version: int, curation_state: dict[str, Any] | None = None) -> None:
        """HF checkpoint dir (EmbeddedPolicy.from_pretrained loads it) + trainer_state.pt."""
        from workers.policy.sft import save_checkpoint

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        parent = str(self.model.config.flywheel_parent or "")
        self.version = int(version)
        if curation_state is not None:
            self.curation_state = curation_state
        save_checkpoint(
            self.model, out, str(self.version), parent, {"kind": "rl", "steps_done": self.steps_done}
        )
        state = {
            "kind": STATE_KIND,
            "config": self.config.to_dict(),
            "seed": self.seed,
            "version": self.version,
            "steps_done": self.steps_done,
            "entropulse_count": self.entropulse_count,
            "optimizer": self.optimizer.state_dict(),
            "value_optimizer": self.value_optimizer.state_dict() if self.value_optimizer else None,
            "generator": self.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "reference": self.reference.state_dict() if self.reference is not None else None,
            "plateau": self.plateau.to_dict(),
            "value_monitor": self.value_monitor.to_dict(),
            "curation_state": self.curation_state,
            "last_step_stats": self.last_step_stats,
        }
        tmp = out / (STATE_FILE + ".tmp")
        torch.save(state, tmp)
        tmp.replace(out / STATE_FILE)  # atomic: a crash never leaves a half-written state

    @classmethod
    def resume(cls, out_dir: str | Path, config: RLConfig | None = None) -> PolicyTrainer:
        """A trainer continuing exactly where `save` left off (config defaults to the saved one)."""
        out = Path(out_dir)
        path = out / STATE_FILE
        if not path.is_file():
            raise PolicyError(f"no trainer state at {path}")
        state = torch.load(path, weights_only=False)
        if state.get("kind") != STATE_KIND:
            raise PolicyError(f"{path} is not an RL trainer state (an SFT checkpoint?)")
        config = config or RLConfig.from_dict(state["config"])
        trainer = cls(out, config, seed=int(state["seed"]))
        trainer.version = int(state["version"])
        trainer.steps_done = int(state["steps_done"])
        trainer.entropulse_count = int(state.get("entropulse_count", 0))
        base_lrs = [g["base_lr"] for g in trainer.optimizer.param_groups]
        trainer.optimizer.load_state_dict(state["optimizer"])
        for group, base in zip(trainer.optimizer.param_groups, base_lrs, strict=True):
            group["base_lr"] = base  # the config's learning rate wins over the saved one
        if state["value_optimizer"] is not None:
            trainer.value_optimizer = torch.optim.Adam(trainer._value_params(), lr=config.ppo.lr_value)
            trainer.value_optimizer.load_state_dict(state["value_optimizer"])
        trainer.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if state["reference"] is not None and trainer._uses_reference:
            assert trainer.reference is not None
            trainer.reference.load_state_dict(state["reference"])
        trainer.plateau = PlateauDetector.from_dict(state["plateau"])
        trainer.value_monitor = ValuePretrainMonitor.from_dict(state["value_monitor"])
        trainer.curation_state = state["curation_state"]
        trainer.last_step_stats = state["last_step_stats"]
        return trainer
