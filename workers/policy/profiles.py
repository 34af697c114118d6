"""The named client profiles a registered model endpoint is spoken to with (`Checkpoint.profile`):
prompt template, coordinate convention and image sizing of each model family."""

from __future__ import annotations

from workers.actions.types import Convention
from workers.policy.base import PolicyError
from workers.policy.hf_vlm import profile_for as hf_vlm_profile
from workers.policy.openai_client import EMBEDDED, UI_TARS_15, ModelProfile

PROFILES: dict[str, ModelProfile] = {
    "embedded": EMBEDDED,
    "ui-tars-1.5": UI_TARS_15,
    "ui-tars-1.0": ModelProfile(convention=Convention.RELATIVE_1000, smart_resize=False),
    # an HF vision-language checkpoint (Qwen2.5-VL family) served by our server's HF backend or vLLM:
    # UI-TARS-1.5's template and coordinates, token ids back (workers.policy.hf_vlm)
    "hf-vlm": hf_vlm_profile(),
}


def profile_named(name: str) -> ModelProfile:
    """The profile called `name`; PolicyError naming the known ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise PolicyError(f"unknown policy profile {name!r}; known: {sorted(PROFILES)}") from None
