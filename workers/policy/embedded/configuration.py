"""`FlywheelPolicyConfig`: the hyper-parameters of the embedded policy, saved as config.json."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from workers.policy.embedded.tokenizer import FlywheelTokenizer


class FlywheelPolicyConfig(PretrainedConfig):
    """Sizes of the embedded pointer-generator policy.

    Fields (all ints unless noted):
    - vocab_size: tokenizer vocabulary (specials + bytes + numbers 0..1280 + literals)
    - d_model / n_layers / n_heads / d_ff: transformer width, depth, heads, MLP width
    - max_positions: text positions (prompt + response) the model can address
    - image_width / image_height / patch_size: the screenshot is resized to width×height and cut into
      (height/patch)×(width/patch) patch tokens
    - max_thought / max_text: grammar caps on free-text tokens (thought, type/finished content)
    - max_prompt_tokens: prompts longer than this are cut (history first, see prompts.py)
    - next_number_pointer (bool): the copy head may point at "the number after the one just
      copied" (modeling.py, `FlywheelPolicyModel.heads`); checkpoints saved before it existed load
      with it off and behave exactly as they did
    - instruction_match (bool): element-list tokens carry how far their element's text occurs in the
      instruction (matching.py, `instruction_match_features`), as an input embedding and a copy-score
      bias; checkpoints saved before it existed load with it off
    - flywheel_version / flywheel_parent (str): checkpoint lineage written by SFT and RL
    """

    model_type = "flywheel_policy"

    def __init__(
        self,
        vocab_size: int | None = None,
        d_model: int = 128,
        n_layers: int = 4,
        n_heads: int = 4,
        d_ff: int = 384,
        max_positions: int = 1024,
        image_width: int = 80,
        image_height: int = 48,
        patch_size: int = 8,
        max_thought: int = 96,
        max_text: int = 48,
        max_prompt_tokens: int = 800,
        next_number_pointer: bool = True,
        instruction_match: bool = True,
        flywheel_version: str = "init",
        flywheel_parent: str = "",
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size if vocab_size is not None else FlywheelTokenizer().vocab_size
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.d_ff = d_ff
        self.max_positions = max_positions
        self.image_width = image_width
        self.image_height = image_height
        self.patch_size = patch_size
        self.max_thought = max_thought
        self.max_text = max_text
        self.max_prompt_tokens = max_prompt_tokens
        self.next_number_pointer = bool(next_number_pointer)
        self.instruction_match = bool(instruction_match)
        self.flywheel_version = flywheel_version
        self.flywheel_parent = flywheel_parent
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        if image_width % patch_size or image_height % patch_size:
            raise ValueError("image_width and image_height must be multiples of patch_size")
        super().__init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        # A config.json written before a feature existed describes a model without it.
        defaults = {"next_number_pointer": False, "instruction_match": False}
        return super().from_dict({**defaults, **config_dict}, **kwargs)

    @property
    def n_patches(self) -> int:
        return (self.image_width // self.patch_size) * (self.image_height // self.patch_size)
