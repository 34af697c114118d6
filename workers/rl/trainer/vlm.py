"""`VLMPolicyTrainer`: the engine's PPO and step-wise GRPO on a Hugging Face vision-language policy
(Qwen2.5-VL family: UI-TARS-1.5, the tiny one of workers.policy.hf_vlm.tiny).

Everything algorithmic is `PolicyTrainer`'s (advantages, losses, curation, staleness, metrics,
checkpoint state, resume); this class swaps what depends on the model:

- prompts: a step's prompt is the chat the rollout sent (`ChatInputs`: UI-TARS template, the last K
  screenshots, history turns), encoded by `workers.policy.hf_vlm.model.encode_prompt` — the same
  function the policy server runs, so the token log-probs over the multimodal conversation equal
  the served ones (`score`: one forward pass over prompt + response, at the rollout temperature);
- parameters: LoRA adapters on the language model (peft; `lora_rank` > 0, the vision tower frozen)
  or full fine-tuning (`lora_rank` 0); PPO's critic is a linear value head on the last hidden state
  (zero-initialised, saved in trainer_state.pt);
- checkpoints: `save` writes a plain HF directory (adapters merged) that our server, transformers
  and vLLM load, the adapter itself under `adapter/` (vLLM's runtime LoRA loading reads it), and
  trainer_state.pt (adapter / value-head weights, optimizer, counters). `resume` rebuilds LoRA from
  the base checkpoint it started from plus the saved adapter, so optimizer moments stay meaningful.

Entropulse phases train the sampled tokens of stored successes (workers.policy.hf_vlm.sft). Not
here: `thought_temperature` (the HF server samples the whole response at one temperature).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import Scored
from workers.policy.hf_vlm.lora import ADAPTER_DIR, add_lora, is_peft, save_hf
from workers.policy.hf_vlm.model import PromptInputs, encode_prompt, eos_ids, load_vlm, score
from workers.policy.hf_vlm.sft import EncodedPair, train_pairs
from workers.policy.prompts import ChatInputs
from workers.rl.config import RLConfig
from workers.rl.curation import PlateauDetector
from workers.rl.samples import StepSample, TrajectorySample
from workers.rl.trainer import state as saved
from workers.rl.trainer.batch import Row
from workers.rl.trainer.core import PolicyTrainer
from workers.rl.trainer.state import EMA_DIR
from workers.rl.value_pretrain import ValuePretrainMonitor


@dataclass
class VLMRow(Row):
    inputs: PromptInputs | None = None


class ResponseEncoder:
    """Encodes a person's / expert's `Thought: …\\nAction: …` as the policy would write it (text
    tokens + end of turn): experience-pool injection of stored steps without tokens."""

    def __init__(self, tokenizer: Any, eos: int) -> None:
        self.tokenizer, self.eos = tokenizer, eos

    def encode_response(self, text: str) -> list[int]:
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.eos]


class VLMPolicyTrainer(PolicyTrainer):
    """See the module docstring. `vlm`: {"lora_rank": int (0 = full fine-tuning), "lora_alpha": int,
    optional "device" and "dtype"}."""

    def __init__(
        self,
        checkpoint_dir: str | Path,
        config: RLConfig,
        seed: int = 0,
        vlm: dict[str, Any] | None = None,
        base_dir: str | Path | None = None,
    ) -> None:
        if config.thought_temperature is not None:
            raise ValueError("grpo.thought_temperature: not available for HF VLM policies (use null)")
        self.vlm = {"lora_rank": 0, "lora_alpha": 16, **(vlm or {})}
        # "device" / "dtype" (e.g. "cuda", "bfloat16"): where the model runs; the trainer's math and
        # the value head stay on the CPU in float32 (scripts/gpu_check.sh)
        dtype = getattr(torch, str(self.vlm.get("dtype") or "float32"))
        model, tokenizer, image_processor = load_vlm(
            checkpoint_dir, dtype=dtype, device=self.vlm.get("device")
        )
        torch.manual_seed(seed)
        self.base_dir = str(base_dir or checkpoint_dir)
        if int(self.vlm["lora_rank"]) > 0:
            model = add_lora(model, r=int(self.vlm["lora_rank"]), alpha=int(self.vlm["lora_alpha"]))
        self.config = config
        self.seed = seed
        self.model = model
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        eos = sorted(eos_ids(model, tokenizer))
        self.grammar = ResponseEncoder(tokenizer, eos[0])  # type: ignore[assignment]
        raw_version = str(getattr(model.config, "flywheel_version", "0"))
        self.version = int(raw_version) if raw_version.isdigit() else 0
        self.steps_done = 0
        self.generator = torch.Generator().manual_seed(seed)
        hidden = int(model.config.get_text_config().hidden_size)
        self.value_head = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)
        self.optimizer = self._build_optimizer()
        self.value_optimizer: torch.optim.Optimizer | None = None
        self.reference = self._frozen_copy(model) if self.uses_reference else None
        c = config.curation
        self.plateau = PlateauDetector(
            c.plateau_window, c.plateau_reward_min_gain, c.plateau_entropy_max_rel_change
        )
        self.value_monitor = ValuePretrainMonitor.from_config(config.ppo)
        self.curation_state: dict[str, Any] = {}
        self.last_step_stats: dict[str, list[dict[str, Any]]] = {}
        self.last_dropped: list[str] = []
        self.entropulse_count = 0
        self.ema = self._fresh_ema() if self.config.section.weight_ema > 0 else None
        self._encoded: dict[int, PromptInputs] = {}

    # parameters -----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return int(self.model.config.get_text_config().vocab_size)

    def value_params(self) -> list[torch.nn.Parameter]:
        return list(self.value_head.parameters())

    def policy_params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def trainable_params(self) -> list[torch.nn.Parameter]:
        return self.policy_params() + (self.value_params() if self.config.algorithm == "ppo" else [])

    def _build_optimizer(self) -> torch.optim.Optimizer:
        if self.config.algorithm == "ppo":
            groups = [
                {"params": self.policy_params(), "lr": self.config.ppo.lr_policy},
                {"params": self.value_params(), "lr": self.config.ppo.lr_value},
            ]
        else:
            groups = [{"params": self.policy_params(), "lr": self.config.grpo.lr}]
        for group in groups:
            group["base_lr"] = group["lr"]
        return torch.optim.Adam(groups)

    # encoding and scoring -------------------------------------------------------------------
    def _encode(self, step: StepSample) -> PromptInputs:
        if not isinstance(step.prompt, ChatInputs):
            raise PolicyError("an HF VLM trainer needs chat prompts (chat_step_sample_from)")
        key = id(step.prompt)
        if key not in self._encoded:
            try:
                self._encoded[key] = encode_prompt(self.tokenizer, self.image_processor, step.prompt.messages)
            except ValueError as exc:
                raise PolicyError(f"stored prompt cannot be encoded: {exc}") from exc
        return self._encoded[key]

    def _trained_mask(self, token_ids: list[int]) -> torch.Tensor:
        """1 on the tokens from "Action:" on (the thought is context when train_thought is off)."""
        mask = torch.ones(len(token_ids))
        for i in range(len(token_ids)):
            if "Action:" in self.tokenizer.decode(token_ids[: i + 1]):
                break
            mask[i] = 0.0
        return mask

    def _rows(self, trajectories: Any) -> list[Row]:
        self._encoded = {}
        rows: list[Row] = []
        for i, traj in enumerate(trajectories):
            for step in traj.steps:
                inputs = self._encode(step)
                row = VLMRow(i, step, torch.zeros(0), inputs.ids, inputs=inputs)
                if not self.config.train_thought:
                    row.trained = self._trained_mask(step.token_ids)
                rows.append(row)
        return rows

    def score_rows(self, model: Any, rows: Any) -> Scored:
        """Scored [len(rows), T]: each row in its own forward pass (images differ per row; padding a
        multimodal batch would shift nothing in the math but costs more than it saves on a CPU)."""
        width = max(len(r.step.token_ids) for r in rows)
        n = len(rows)
        logprobs = torch.zeros(n, width)
        entropies = torch.zeros(n, width)
        values = torch.zeros(n, width)
        mask = torch.zeros(n, width)
        lp_rows, ent_rows, val_rows = [], [], []
        for r in rows:
            inputs = r.inputs if isinstance(r, VLMRow) and r.inputs is not None else self._encode(r.step)
            s = score(model, inputs, r.step.token_ids, self.config.temperature)
            pad = width - len(r.step.token_ids)
            lp_rows.append(F.pad(s.logprobs, (0, pad)))
            ent_rows.append(F.pad(s.entropies, (0, pad)))
            if self.config.algorithm == "ppo":
                val_rows.append(F.pad(self.value_head(s.hidden.float()).squeeze(-1), (0, pad)))
        for i, r in enumerate(rows):
            mask[i, : len(r.step.token_ids)] = 1.0
        logprobs = torch.stack(lp_rows)
        entropies = torch.stack(ent_rows)
        if val_rows:
            values = torch.stack(val_rows)
        return Scored(logprobs, entropies, values, mask)

    # checkpoints ----------------------------------------------------------------------------
    def save(self, out_dir: str | Path, version: int, curation_state: dict[str, Any] | None = None) -> None:
        """A servable HF directory (LoRA merged), the adapter under adapter/, trainer_state.pt."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.version = int(version)
        if curation_state is not None:
            self.curation_state = curation_state
        parent = str(getattr(self.model.config, "flywheel_parent", "") or "")
        extra: dict[str, Any] = {
            "kind": "rl",
            "steps_done": self.steps_done,
            "lora_rank": int(self.vlm["lora_rank"]),
        }
        if is_peft(self.model):
            extra["base_dir"] = str(Path(self.base_dir).resolve())  # what adapter/ applies to
        save_hf(self.model, out, self.tokenizer, self.image_processor, str(self.version), parent, extra)
        if is_peft(self.model):
            self.model.save_pretrained(out / ADAPTER_DIR)
        averaged = self.averaged_model()
        if averaged is not None:
            save_hf(averaged, out / EMA_DIR, self.tokenizer, self.image_processor, str(self.version), parent,
                    {**extra, "kind": "rl-ema", "weight_ema": self.config.section.weight_ema})  # fmt: skip
        state = self.state_dict()
        state["vlm"] = dict(self.vlm)
        state["base_dir"] = self.base_dir
        state["value_head"] = self.value_head.state_dict()
        state["trainable"] = (
            {k: v for k, v in self.model.state_dict().items() if "lora_" in k}
            if is_peft(self.model)
            else None
        )
        self.write_state(out, state)

    @classmethod
    def resume(cls, out_dir: str | Path, config: RLConfig | None = None) -> VLMPolicyTrainer:
        out = Path(out_dir)
        state = saved.load(out)
        config = config or RLConfig.model_validate(state["config"])
        vlm = state.get("vlm") or {}
        lora = int(vlm.get("lora_rank", 0)) > 0
        # LoRA: the base weights plus the saved adapter (the merged directory would double-apply it)
        source = state["base_dir"] if lora else out
        trainer = cls(source, config, seed=int(state["seed"]), vlm=vlm, base_dir=state["base_dir"])
        if lora and state.get("trainable"):
            missing = trainer.model.load_state_dict(state["trainable"], strict=False)
            if missing.unexpected_keys:
                raise PolicyError(f"adapter of {out} does not fit its base: {missing.unexpected_keys[:3]}")
        trainer.value_head.load_state_dict(state["value_head"])
        trainer.restore(state, config)
        return trainer

    # Entropulse ----------------------------------------------------------------------------
    def entropulse(
        self,
        successes: list[TrajectorySample],
        steps: int = 50,
        lr: float = 1e-4,
        batch_size: int = 16,
        workdir: str | Path | None = None,
    ) -> dict[str, Any]:
        """SFT on stored successes — the token ids their rollouts sampled, after the chat prompts they
        were sampled from (workers.policy.hf_vlm.sft.train_pairs, on the trainable parameters: the
        adapters under LoRA) — then reset the reference and the plateau detector."""
        pairs = [EncodedPair(self._encode(step), list(step.token_ids)) for t in successes for step in t.steps]
        if not pairs:
            raise PolicyError("Entropulse needs at least one stored success")
        self._encoded = {}
        losses, done, _, _ = train_pairs(
            self.model, pairs, steps, lr=lr, batch_size=batch_size, seed=self.seed + self.entropulse_count
        )
        self.entropulse_count += 1
        self.reset_reference()
        self.plateau.reset()
        return {"examples": len(pairs), "steps": done, "loss_first": losses[0], "loss_last": losses[-1]}
