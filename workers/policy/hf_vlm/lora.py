"""LoRA adapters on an HF VLM (peft) and merged exports any HF loader (and vLLM) reads.

`add_lora` wraps the language model's attention and MLP projections (the vision tower stays
frozen, as UI-TARS fine-tunes do); `merged_copy` folds the adapters into a plain
`Qwen2_5_VLForConditionalGeneration` (W + B·A·α/r) without touching the training model;
`save_hf` writes a servable checkpoint directory (weights, tokenizer, image processor, lineage).

A LoRA-trained version directory also holds the adapter alone under `adapter/` (peft's format:
`adapter_config.json` + `adapter_model.safetensors`, which vLLM's `--lora-modules` and its
`/v1/load_lora_adapter` read too) and names the base it applies to in `flywheel_version.json`
(`base_dir`); `adapter_of` finds both, `adapter_base` reads the base an adapter was trained on.
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
ADAPTER_DIR = "adapter"


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


def adapter_of(directory: str | Path) -> tuple[Path, Path] | None:
    """(base checkpoint directory, adapter directory) of a LoRA-trained version directory; None for
    a plain checkpoint (full fine-tuning, the start checkpoint, the embedded model)."""
    root = Path(directory)
    adapter = root / ADAPTER_DIR
    if not (adapter / "adapter_config.json").is_file():
        return None
    try:
        record = json.loads((root / VERSION_FILE).read_text())
    except (OSError, ValueError):
        return None
    base = record.get("base_dir") if isinstance(record, dict) else None
    return (Path(base), adapter) if isinstance(base, str) and base else None


def adapter_base(adapter: str | Path) -> str:
    """The base checkpoint an adapter directory was trained on (peft's `base_model_name_or_path`,
    the path the trainer loaded its base from); "" when it does not say."""
    try:
        config = json.loads((Path(adapter) / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return ""
    value = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    return value if isinstance(value, str) else ""
