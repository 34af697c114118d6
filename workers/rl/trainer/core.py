"""`PolicyTrainer`: batching, scoring, the update loop, Entropulse and checkpoints (see the package
docstring); the algorithm-specific passes are in workers.rl.trainer.ppo and .grpo."""

from __future__ import annotations

import copy
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import PromptBatch, Scored, grammar_keys, score
from workers.policy.embedded.grammar import THOUGHT_TEXT
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint, load_image
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.policy.prompts import EmbeddedInputs
from workers.rl.config import RLConfig, lr_scale, warmup_scale
from workers.rl.curation import PlateauDetector
from workers.rl.samples import StepSample, TrajectorySample, sft_examples_from
from workers.rl.trainer import grpo, ppo
from workers.rl.trainer import state as saved
from workers.rl.trainer.batch import Meter, Row, Tensor, length_buckets
from workers.rl.trainer.state import EMA_DIR
from workers.rl.value_pretrain import ValuePretrainMonitor

SCORE_CHUNK = 16  # most rows per padded batch of a scoring pass (bounds memory on long prompts)


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
        if self.uses_reference:
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
        self.ema: dict[str, Tensor] | None = self._fresh_ema() if self.config.section.weight_ema > 0 else None

    # setup ----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def trainable_params(self) -> list[torch.nn.Parameter]:
        """What the optimizer steps and the gradient norm is clipped over."""
        return list(self.model.parameters())

    @property
    def uses_reference(self) -> bool:
        return self.config.algorithm == "grpo" and self.config.grpo.beta_kl > 0

    @staticmethod
    def _frozen_copy(model: FlywheelPolicyModel) -> FlywheelPolicyModel:
        ref = copy.deepcopy(model)
        ref.train(False)
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def value_params(self) -> list[torch.nn.Parameter]:
        return list(self.model.value_head.parameters())

    def policy_params(self) -> list[torch.nn.Parameter]:
        value_ids = {id(p) for p in self.value_params()}
        return [p for p in self.model.parameters() if id(p) not in value_ids]

    def _build_optimizer(self) -> torch.optim.Optimizer:
        if self.config.algorithm == "ppo":
            ppo = self.config.ppo
            groups = [
                {"params": self.policy_params(), "lr": ppo.lr_policy},
                {"params": self.value_params(), "lr": ppo.lr_value},
            ]
        else:  # GRPO has no critic: the value head gets no gradient, Adam skips it
            groups = [{"params": list(self.model.parameters()), "lr": self.config.grpo.lr}]
        for group in groups:
            group["base_lr"] = group["lr"]
        return torch.optim.Adam(groups)

    def set_progress(self, progress: float) -> float:
        """Scale the learning rate(s) for `progress`, the fraction of the run's budget spent (the
        algorithm section's lr_schedule / lr_decay_start), and for the warm-up over the first
        `lr_warmup_updates` trained updates; returns the multiplier."""
        section = self.config.section
        scale = lr_scale(section.lr_schedule, section.lr_decay_start, progress) * warmup_scale(
            section.lr_warmup_updates, self.steps_done
        )
        for group in self.optimizer.param_groups:
            group["lr"] = group.get("base_lr", group["lr"]) * scale
        return scale

    # encoding and scoring -------------------------------------------------------------------
    def _rows(self, trajectories: Sequence[TrajectorySample]) -> list[Row]:
        cfg = self.model.config
        rows = []
        for i, traj in enumerate(trajectories):
            for step in traj.steps:
                prompt = cast(EmbeddedInputs, step.prompt)  # this trainer's own policy wrote it
                pixels = load_image(prompt.image, cfg.image_width, cfg.image_height)
                row = Row(i, step, pixels, self._policy.encode_prompt(prompt.text))
                if not self.config.train_thought:  # the thought is context: only the action's tokens train
                    keys = grammar_keys(self.grammar, [step.token_ids], len(step.token_ids))[0]
                    row.trained = (keys != THOUGHT_TEXT).float()
                rows.append(row)
        return rows

    def _batch(self, rows: Sequence[Row]) -> PromptBatch:
        longest = max(len(r.prompt) for r in rows)
        ids = torch.full((len(rows), longest), self.tokenizer.pad_id, dtype=torch.long)
        mask = torch.zeros(len(rows), longest, dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, : len(r.prompt)] = torch.tensor(r.prompt, dtype=torch.long)
            mask[i, : len(r.prompt)] = True
        return PromptBatch(torch.stack([r.pixels for r in rows]), ids, mask)

    def score_rows(self, model: FlywheelPolicyModel, rows: Sequence[Row]) -> Scored:
        """Scored [len(rows), T] of rows' responses under `model`, in the rows' order (T = longest
        response). Differentiable unless called under no_grad. Rows run in padded batches of similar
        prompt length (`length_buckets`), so short prompts do not pay for the longest one; the
        results per row are those of one batch."""
        width = max(len(r.step.token_ids) for r in rows)
        parts: list[Scored] = []
        order: list[int] = []
        for bucket in length_buckets([len(r.prompt) for r in rows], SCORE_CHUNK):
            sub = [rows[i] for i in bucket]
            parts.append(
                score(model, self.grammar, self._batch(sub), [r.step.token_ids for r in sub],
                      self.config.temperature, self.config.thought_temperature)
            )  # fmt: skip
            order += bucket
        back = torch.empty(len(order), dtype=torch.long)
        back[torch.tensor(order)] = torch.arange(len(order))

        def joined(field: str) -> Tensor:
            padded = [F.pad(getattr(p, field), (0, width - p.mask.shape[1])) for p in parts]
            return torch.cat(padded)[back]

        return Scored(joined("logprobs"), joined("entropies"), joined("values"), joined("mask"))

    @staticmethod
    def _fill_old(rows: Sequence[Row], scored: Scored) -> None:
        for i, r in enumerate(rows):
            n = len(r.step.token_ids)
            r.old_logprobs = scored.logprobs[i, :n].detach().clone()
            r.entropies = scored.entropies[i, :n].detach().clone()
            r.old_values = scored.values[i, :n].detach().clone()

    def _score_old(self, rows: Sequence[Row], with_reference: bool, graph: bool = False) -> Scored | None:
        """Fill old log-probs / entropies / values (and reference log-probs) of every row.

        With `graph` (a single-pass update: one epoch, one minibatch), the rows that carry loss
        (`keep`) are scored with autograd on and that Scored is returned for the update to train
        on: π_old is π_θ at the update's only gradient step, so a separate no-grad pass would
        compute the same numbers again. The other rows (stale) only need their old values."""
        live = [r for r in rows if r.keep] if graph else []
        rest = [r for r in rows if not r.keep] if graph else list(rows)
        fresh = self.score_rows(self.model, live) if live else None
        with torch.no_grad():
            if fresh is not None:
                self._fill_old(live, fresh)
            if rest:
                self._fill_old(rest, self.score_rows(self.model, rest))
            if with_reference and self.reference is not None:
                ref = self.score_rows(self.reference, rows)
                for i, r in enumerate(rows):
                    r.ref_logprobs = ref.logprobs[i, : len(r.step.token_ids)].clone()
        return fresh

    def prepare(
        self, trajectories: list[TrajectorySample], with_reference: bool
    ) -> tuple[list[TrajectorySample], list[Row]]:
        """Rows scored under the current (and reference) model, without the trajectories that cannot
        be policy samples: token ids outside the vocabulary or tokens the grammar forbids (log-prob
        −inf). Those are listed in `last_dropped` and never fail the training step."""
        kept, rows, _ = self._prepare(trajectories, with_reference, graph=False)
        return kept, rows

    def _prepare(
        self, trajectories: list[TrajectorySample], with_reference: bool, graph: bool
    ) -> tuple[list[TrajectorySample], list[Row], Scored | None]:
        """`prepare`, and with `graph` the differentiable Scored of the kept rows (`_score_old`)."""
        vocab = self.vocab_size
        dropped = [
            t.trajectory_id
            for t in trajectories
            if any(not 0 <= tok < vocab for s in t.steps for tok in s.token_ids)
        ]
        kept = [t for t in trajectories if t.trajectory_id not in set(dropped)]
        rows = self._rows(kept)
        # Step-level staleness: weights change mid-episode in async mode, so a long rollout's early
        # steps can be older than the bound while its last ones are fresh. Steps beyond the bound
        # carry no loss (their trajectory's reward still sets the group baseline and the returns).
        bound = self.config.curation.staleness_bound
        for r in rows:
            r.keep = self.version - r.step.policy_version <= bound
        fresh = self._score_old(rows, with_reference, graph)
        bad = {r.traj for r in rows if not torch.isfinite(r.old_logprobs).all()}
        if bad:
            dropped += [kept[i].trajectory_id for i in sorted(bad)]
            remap = {old: new for new, old in enumerate(i for i in range(len(kept)) if i not in bad)}
            rows = [replace(r, traj=remap[r.traj]) for r in rows if r.traj not in bad]
            kept = [t for i, t in enumerate(kept) if i not in bad]
            if fresh is not None and rows:  # its graph holds the dropped rows: score the others again
                fresh = self._score_old(rows, with_reference, graph)
        self.last_dropped = dropped
        if not kept:
            raise PolicyError(f"no trainable trajectory: {len(dropped)} dropped as not policy samples")
        return kept, rows, fresh

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
        # PPO with one epoch of one minibatch trains on the scoring pass itself (see _score_old).
        single = self.config.algorithm == "ppo" and ppo.single_pass(self.config.ppo, len(trajectories))
        trajectories, rows, fresh = self._prepare(trajectories, self.uses_reference, graph=single)
        if self.config.algorithm == "ppo":
            metrics = ppo.update(self, trajectories, rows, fresh)
        else:
            metrics = grpo.update(self, trajectories, rows)
        self.model.train(False)
        self._update_ema()
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

    def minibatches(self, n: int, size: int) -> list[list[int]]:
        order = torch.randperm(n, generator=self.generator).tolist()
        return [order[i : i + size] for i in range(0, n, size)]

    def step_optimizer(self, loss: Tensor, meter: Meter) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable_params(), self.config.section.max_grad_norm)
        meter.add("policy/grad_norm", float(grad_norm))
        self.optimizer.step()

    def fill_step_stats(
        self, trajectories: Sequence[TrajectorySample], rows: Sequence[Row], lambdas: list[float] | None
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
        """One critic update with λ = 1 on a fixed policy (only the value head trains): see
        workers.rl.trainer.ppo.pretrain_value. `value_pretrain_done` says when to switch to PPO."""
        return ppo.pretrain_value(self, trajectories)

    @property
    def value_pretrain_done(self) -> str | None:
        """None while pretraining should go on, else why it stopped ("converged" / "max_updates")."""
        return self.value_monitor.done

    # Entropulse -----------------------------------------------------------------------------
    def reset_reference(self) -> None:
        """Entropulse: the KL reference becomes the current policy."""
        if self.uses_reference:
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
        self.model.train(False)
        self.entropulse_count += 1
        self.reset_reference()
        self.plateau.reset()
        return {
            "examples": len(examples),
            "steps": result["steps"],
            "loss_first": result["loss_first"],
            "loss_last": result["loss_last"],
        }

    # weight averaging ---------------------------------------------------------------------
    def _fresh_ema(self) -> dict[str, Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @torch.no_grad()
    def _update_ema(self) -> None:
        """θ̄ ← d·θ̄ + (1 − d)·θ over every floating-point tensor of the model (integer buffers are copied)."""
        if self.ema is None:
            return
        d = self.config.section.weight_ema
        for name, value in self.model.state_dict().items():
            avg = self.ema[name]
            if avg.is_floating_point():
                avg.mul_(d).add_(value.detach(), alpha=1.0 - d)
            else:
                avg.copy_(value)

    def averaged_model(self) -> Any:
        """A copy of the model holding the averaged weights (None when weight_ema is off); the
        model's own class (the embedded model, or an HF VLM with its adapters)."""
        if self.ema is None:
            return None
        averaged = copy.deepcopy(self.model)
        averaged.load_state_dict(self.ema)
        averaged.train(False)
        return averaged

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
        averaged = self.averaged_model()
        if averaged is not None:
            save_checkpoint(averaged, out / EMA_DIR, str(self.version), parent,
                            {"kind": "rl-ema", "weight_ema": self.config.section.weight_ema, "steps_done": self.steps_done})  # fmt: skip
        self.write_state(out, self.state_dict())

    def write_state(self, out: Path, state: dict[str, Any]) -> None:
        saved.write(out, state)

    def state_dict(self) -> dict[str, Any]:
        """Everything `restore` needs besides the weights (trainer_state.pt)."""
        return saved.state_of(self)

    @classmethod
    def resume(cls, out_dir: str | Path, config: RLConfig | None = None) -> PolicyTrainer:
        """A trainer continuing exactly where `save` left off (config defaults to the saved one)."""
        state = saved.load(Path(out_dir))
        config = config or RLConfig.model_validate(state["config"])
        trainer = cls(Path(out_dir), config, seed=int(state["seed"]))
        trainer.restore(state, config)
        return trainer

    def restore(self, state: dict[str, Any], config: RLConfig) -> None:
        """Counters, optimizers, RNG, reference, monitors and curation state from a saved state."""
        saved.restore(self, state, config)
