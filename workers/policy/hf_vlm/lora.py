"""LoRA adapters on an HF VLM (peft) and merged exports any HF loader (and vLLM) reads.

`add_lora` wraps the language model's attention and MLP projections (the vision tower stays
frozen, as UI-TARS fine-tunes do); `merged_copy` folds the adapters into a plain
`Qwen2_5_VLForConditionalGeneration` (W + B·A·α/r) without touching the training model;
`save_hf` writes a servable checkpoint directory (weights, tokenizer, image processor, lineage).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

# The language model's projections in Qwen2 blocks; the vision tower's `qkv` / `proj` are left out.
LORA_TARGETS = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
VERSION_FILE = "flywheel_version.json"


def add_lora(model: Any, r: int = 8, alpha: int = 16, dropout: float = 0.0) -> Any:
    """A peft model with LoRA adapters (only they train)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=LORA_TARGETS, bias="none")
    return get_peft_model(model, config)


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config")


def merged_copy(model: Any) -> Any:
    """A plain transformers model with the adapters merged (the argument is left unchanged)."""
    if not is_peft(model):
        return model
    return copy.deepcopy(model).merge_and_unload()


def save_hf(
    model: Any, out: Path, tokenizer: Any, image_processor: Any, version: str, parent: str = "",
    extra: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """A servable HF checkpoint directory: merged weights, tokenizer, image processor, lineage."""
    out.mkdir(parents=True, exist_ok=True)
    plain = merged_copy(model)
    plain.config.flywheel_version = str(version)
    plain.config.flywheel_parent = str(parent)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    image_processor.save_pretrained(out)
    record = {"version": str(version), "parent": str(parent), "created": time.time(), **(extra or {})}
    (out / VERSION_FILE).write_text(json.dumps(record, indent=2))
