"""Hugging Face vision-language policies (Qwen2.5-VL family: UI-TARS-1.5, Qwen2.5-VL; issue 23).

- `model`: prompt encoding (chat template + image processor), sampling with log-probs, scoring;
  the policy server's HF backend (workers.policy.server) and the RL trainer share it.
- `tiny`: a tiny Qwen2.5-VL built from a config on this machine (tests, benches, demos).
- `lora`: LoRA adapters (peft) and merged HF exports.
- `checkpoint_kind`: which kind of policy a checkpoint directory holds (no torch import).
- `profile_for`: the client profile (workers.policy.openai_client.ModelProfile) to talk to a
  checkpoint: UI-TARS prompt template, last K screenshots, smart_resize at the checkpoint's pixel cap,
  coordinates in the resized image (Convention.ABSOLUTE_RESIZED), token ids back for RL.
"""

from __future__ import annotations

import json
from pathlib import Path

from workers.actions.types import Convention
from workers.policy.base import PolicyError
from workers.policy.openai_client import ModelProfile

# Read without torch or transformers (the web process, rollout workers and the preflight ask).
VLM_MODEL_TYPES = frozenset({"qwen2_5_vl", "qwen2_vl"})

# A UI-TARS answer is one thought and one action: 256 tokens hold both for UI-TARS-1.5; the tiny
# model writes noise until trained, so RL on it caps responses shorter (RL rollouts and benches).
DEFAULT_MAX_TOKENS = 256


def checkpoint_kind(directory: str | Path) -> str:
    """ "hf_vlm" for a Qwen2.5-VL-family checkpoint, "embedded" for the project's own model (from
    config.json alone); PolicyError when there is no readable config or another model type."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise PolicyError(f"no checkpoint at {path.parent} (config.json missing)")
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PolicyError(f"config.json of {path.parent} is unreadable ({type(exc).__name__})") from exc
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type in VLM_MODEL_TYPES:
        return "hf_vlm"
    if model_type == "flywheel_policy":
        return "embedded"
    raise PolicyError(f"unsupported checkpoint model_type {model_type!r} at {path.parent}")


def image_max_pixels(directory: str | Path) -> int | None:
    """The pixel cap of a checkpoint's image processor (preprocessor_config.json), if it names one."""
    try:
        config = json.loads((Path(directory) / "preprocessor_config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    size = size if isinstance(size := config.get("size"), dict) else {}
    value = config.get("max_pixels") or size.get("longest_edge") or size.get("max_pixels")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def profile_for(
    directory: str | Path | None = None, max_tokens: int = DEFAULT_MAX_TOKENS, max_screenshots: int = 5
) -> ModelProfile:
    """How OpenAIPolicy talks to an HF VLM checkpoint served by our server or by vLLM."""
    return ModelProfile(
        prompt="computer",
        convention=Convention.ABSOLUTE_RESIZED,
        smart_resize=True,
        include_elements=False,
        max_screenshots=max_screenshots,
        max_pixels=image_max_pixels(directory) if directory is not None else None,
        max_tokens=max_tokens,
        extra_body={"return_tokens_as_token_ids": True},
    )
