"""A tiny Qwen2.5-VL checkpoint built on this machine: config with random weights, a byte-level BPE
tokenizer trained here on the UI-TARS prompt templates and action grammar, the Qwen2-VL image
processor and chat template. Nothing is downloaded.

    python -m workers.policy.hf_vlm.tiny DIR [--seed 0]

The directory is a regular Hugging Face checkpoint (`config.json`, `model.safetensors`,
`tokenizer.json`, `preprocessor_config.json`, `chat_template.jinja`): `AutoModelForImageTextToText`
and `AutoProcessor` load it, our policy server serves it, vLLM could serve it. It is the same
architecture as UI-TARS-1.5-7B (`Qwen2_5_VLForConditionalGeneration`) at ~0.5M parameters, for
tests, benches and demos on CPU; its output is noise until trained.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase
    from transformers.image_processing_utils import BaseImageProcessor

# Qwen2-VL's special tokens (ids follow the vocabulary built here, not Qwen's 151643...).
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Qwen2-VL's chat template (as shipped with Qwen2-VL / Qwen2.5-VL / UI-TARS-1.5 checkpoints).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Screenshots of the tiny model: at most this many pixels after smart_resize (a 160×210 MiniWoB++
# page stays as it is; a 1280×800 desktop is scaled to ~448×280, 160 visual tokens).
TINY_MIN_PIXELS = 4 * 28 * 28
TINY_MAX_PIXELS = 160 * 28 * 28
TINY_VOCAB = 1024


def _corpus() -> list[str]:
    from workers.policy.prompts import TEMPLATES

    actions = [
        "Thought: I click the button.\nAction: click(start_box='<|box_start|>(123,456)<|box_end|>')",
        "Action: left_double(start_box='(10,20)')",
        "Action: right_single(start_box='(30,40)')",
        "Action: drag(start_box='(1,2)', end_box='(3,4)')",
        "Action: hotkey(key='ctrl c')",
        "Action: type(content='hello world\\n')",
        "Action: scroll(start_box='(5,6)', direction='down')",
        "Action: wait()",
        "Action: finished(content='done')",
        "Action: call_user()",
        " ".join(str(i) for i in range(0, 1400)),
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
    ]
    return [*TEMPLATES.values(), *actions]


def build_tokenizer(vocab_size: int = TINY_VOCAB) -> PreTrainedTokenizerBase:
    """A Qwen2 fast tokenizer (byte-level BPE, Qwen's special tokens, Qwen2-VL chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast  # type: ignore[attr-defined]  # a lazy export

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer: PreTrainedTokenizerBase = Qwen2TokenizerFast(
        tokenizer_object=tok,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    return tokenizer


def _token_id(tokenizer: PreTrainedTokenizerBase, token: str) -> int:
    tid = tokenizer.convert_tokens_to_ids(token)
    assert isinstance(tid, int), token
    return tid


def build_image_processor() -> BaseImageProcessor:
    """Qwen2-VL's image processor (the PIL backend: no torchvision needed)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(size={"shortest_edge": TINY_MIN_PIXELS, "longest_edge": TINY_MAX_PIXELS})


def tiny_config(
    tokenizer: PreTrainedTokenizerBase,
    hidden: int = 64,
    layers: int = 2,
    text: dict[str, Any] | None = None,
    vision: dict[str, Any] | None = None,
) -> PretrainedConfig:
    """The tiny model's Qwen2_5_VLConfig; `text` / `vision` override fields of the language model's
    and the vision tower's config (a larger model of the same architecture: workers.rl.gpu_check)."""
    from transformers import Qwen2_5_VLConfig

    ids = {t: _token_id(tokenizer, t) for t in SPECIAL_TOKENS}
    heads = 4
    head_dim = hidden // heads
    quarter = head_dim // 2
    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": hidden * 2,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1_000_000.0,
                # t/h/w sections of the head's rotary half (Qwen2.5-VL: 16/24/24 of 64)
                "mrope_section": [quarter - 2 * (quarter // 3), quarter // 3, quarter // 3],
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": True,
        }
        | (text or {}),
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": hidden,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
        }
        | (vision or {}),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


def build_tiny_checkpoint(directory: str | Path, seed: int = 0, version: str = "0") -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint (model + processor) to `directory`."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = tiny_config(tokenizer)
    config.flywheel_version = version
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32)  # type: ignore[arg-type]
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    build_image_processor().save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("directory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_tiny_checkpoint(args.directory, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
