"""Hugging Face vision-language policies (Qwen2.5-VL family: UI-TARS-1.5, Qwen2.5-VL, the tiny one).

One prompt encoder for the server and the trainer: `encode_prompt(messages)` renders the chat
messages (UI-TARS layout, workers.policy.prompts: the template, the last K screenshots, the history
as assistant turns) with the checkpoint's own chat template, runs the checkpoint's image processor
on the screenshots in order, and expands every `<|image_pad|>` to the visual tokens of its image —
what `Qwen2_5_VLProcessor` does, without its video processor (torchvision is not installed here).

Log-probs. `generate` samples with `model.generate` (no top-k / top-p: the full distribution at
`temperature`) and reports log π_T(token) = log_softmax(logits / T) — under the sampling
distribution, as the embedded server does and as vLLM does with `--logprobs-mode processed_logprobs`.
`score` computes the same quantity with one forward pass over prompt + response, so the trainer's
log-probs equal the server's for the same tokens (tests/policy/test_hf_vlm.py, tolerance 1e-4 in
float32; `bench vlm` reports the measured maximum). Temperature 0 is greedy; its log-probs are
under T = 1. The embedded model's `thought_temperature` has no counterpart here: the whole response
is sampled at `temperature`.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import Generated
from workers.policy.hf_vlm import checkpoint_kind
from workers.policy.prompts import decode_data_url

IMAGE_PAD = "<|image_pad|>"
# Vision markers are the template's to place: in text (a person's instruction, or a sampled answer
# fed back as history — a random model writes them) they are removed, so text cannot add or shift
# image slots.
VISION_MARKERS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")


def _plain(text: str) -> str:
    for marker in VISION_MARKERS:
        text = text.replace(marker, "")
    return text


MAX_IMAGES = 16
MAX_PROMPT_TOKENS = 32_768
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class PromptInputs:
    """One encoded prompt: token ids [L] and the images' patches (None without images)."""

    ids: list[int]
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None

    def model_kwargs(self, device: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.pixel_values is not None:
            out["pixel_values"] = self.pixel_values.to(device) if device is not None else self.pixel_values
            out["image_grid_thw"] = self.image_grid_thw
        return out


def _image(url: Any) -> Image.Image:
    if not isinstance(url, str):
        raise ValueError("image_url part without a url")
    data = decode_data_url(url)
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"image is not readable: {exc}") from exc
    return img.convert("RGB")


def _normalise(messages: Any) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """Validated messages for the chat template (image parts kept as markers) and their images in
    order; ValueError on anything malformed."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    out, images = [], []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise ValueError("each message needs a role of system, user or assistant")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": message["role"], "content": _plain(content)})
            continue
        if not isinstance(content, list):
            raise ValueError("message content must be a string or a list of parts")
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
                raise ValueError("each content part must be a text or image_url part")
            if part["type"] == "text":
                parts.append({"type": "text", "text": _plain(str(part.get("text", "")))})
            else:
                ref = part.get("image_url")
                images.append(_image(ref.get("url") if isinstance(ref, dict) else ref))
                parts.append({"type": "image"})
        out.append({"role": message["role"], "content": parts})
    if len(images) > MAX_IMAGES:
        raise ValueError(f"at most {MAX_IMAGES} images per request")
    return out, images


def encode_prompt(tokenizer: Any, image_processor: Any, messages: Any) -> PromptInputs:
    """Chat messages -> PromptInputs, exactly as the server and the trainer both read them."""
    template_messages, images = _normalise(messages)
    text = tokenizer.apply_chat_template(template_messages, tokenize=False, add_generation_prompt=True)
    pieces = text.split(IMAGE_PAD)
    if len(pieces) - 1 != len(images):
        raise ValueError("the chat template and the images disagree (image placeholders in the text?)")
    pixel_values = grid = None
    if images:
        processed = image_processor(images=images, return_tensors="pt")
        pixel_values, grid = processed["pixel_values"].float(), processed["image_grid_thw"]
        merge = int(getattr(image_processor, "merge_size", 2)) ** 2
        counts = [int(g.prod()) // merge for g in grid]
        text = pieces[0] + "".join(IMAGE_PAD * n + rest for n, rest in zip(counts, pieces[1:], strict=True))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"prompt of {len(ids)} tokens exceeds {MAX_PROMPT_TOKENS}")
    return PromptInputs(list(ids), pixel_values, grid)


def load_vlm(
    directory: str | Path, dtype: torch.dtype = torch.float32, device: str | None = None
) -> tuple[Any, Any, Any]:
    """(model, tokenizer, image processor) of a Qwen2.5-VL-family checkpoint directory; the model in
    `dtype` on `device` (default: the CPU)."""
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    path = Path(directory)
    if checkpoint_kind(path) != "hf_vlm":
        raise PolicyError(f"{path} is not a Qwen2.5-VL-family checkpoint")
    try:
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path)
        try:
            image_processor = AutoImageProcessor.from_pretrained(path, backend="pil")
        except ImportError:  # older transformers gate AutoImageProcessor on torchvision
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

            image_processor = Qwen2VLImageProcessorPil.from_pretrained(path)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise PolicyError(f"cannot load checkpoint {path}: {exc}") from exc
    if device is not None:
        model.to(device)  # type: ignore[arg-type]
    model.eval()
    return model, tokenizer, image_processor


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = model.generation_config.eos_token_id
    ids = ids if isinstance(ids, list) else [ids]
    out = {int(i) for i in ids if i is not None}
    if tokenizer.eos_token_id is not None:
        out.add(int(tokenizer.eos_token_id))
    return out


def effective_temperature(temperature: float) -> float:
    return 1.0 if temperature <= 0 else float(temperature)


@dataclass
class ScoredTokens:
    """Per-token log-probs / entropies [T] of a response under the policy, and the last hidden
    state before each token [T, H] (the value head reads it)."""

    logprobs: torch.Tensor
    entropies: torch.Tensor
    hidden: torch.Tensor


def score(model: Any, prompt: PromptInputs, response: list[int], temperature: float) -> ScoredTokens:
    """log π_T of `response` after `prompt`: one forward pass over prompt + response (differentiable
    unless called under no_grad). The model may sit on an accelerator; the results come back on the
    CPU in float32 (the trainer's math runs there; the copy is differentiable)."""
    device = model.device
    ids = torch.tensor([prompt.ids + list(response)], dtype=torch.long, device=device)
    out = model(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        output_hidden_states=True,
        use_cache=False,
        **prompt.model_kwargs(device),
    )
    start = len(prompt.ids) - 1
    logits = out.logits[0, start : start + len(response)].float() / effective_temperature(temperature)
    logp = F.log_softmax(logits, dim=-1)
    target = torch.tensor(response, dtype=torch.long, device=device)
    chosen = logp.gather(-1, target[:, None])[:, 0]
    entropy = -(logp.exp() * logp).sum(-1)
    hidden = out.hidden_states[-1][0, start : start + len(response)].float()
    return ScoredTokens(chosen.cpu(), entropy.cpu(), hidden.cpu())


class HFVLMPolicy:
    """A loaded HF VLM behind one lock: encode, sample with log-probs, hot-swap weights."""

    kind = "hf_vlm"

    def __init__(self, model: Any, tokenizer: Any, image_processor: Any, seed: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.lock = threading.Lock()
        self.seed = seed
        self.calls = 0
        self._adapters = 0
        self.set_model(model)

    @classmethod
    def from_pretrained(cls, directory: str | Path, seed: int | None = None) -> HFVLMPolicy:
        model, tokenizer, image_processor = load_vlm(directory)
        return cls(model, tokenizer, image_processor, seed=seed)

    def set_model(self, model: Any) -> None:
        if model.config.get_text_config().vocab_size < len(self.tokenizer):
            raise PolicyError("checkpoint vocabulary is smaller than the tokenizer's")
        with self.lock:
            self.model = model.eval()
            self.eos = eos_ids(model, self.tokenizer)

    def load_adapter(self, adapter: str | Path, label: str) -> None:
        """Serve the base with this LoRA adapter (peft format) from now on, reported as `label`: the
        base stays loaded and the previous adapter is dropped (runtime LoRA loading, as vLLM's
        `/v1/load_lora_adapter`). PolicyError when the adapter does not fit the base."""
        from peft import PeftModel

        from workers.policy.hf_vlm.lora import is_peft

        with self.lock:
            current = self.model
            self._adapters += 1
            name = f"a{self._adapters}"  # internal: a label may hold characters peft keys cannot
            try:
                if is_peft(current):
                    previous = current.active_adapter
                    current.load_adapter(str(adapter), adapter_name=name)
                    current.set_adapter(name)
                    current.delete_adapter(previous)
                    model = current
                else:
                    model = PeftModel.from_pretrained(current, str(adapter), adapter_name=name)
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                raise PolicyError(f"cannot load adapter {adapter}: {exc}") from exc
            model.eval()
            model.config.flywheel_version = label
            self.model = model

    @property
    def model_version(self) -> str:
        return str(getattr(self.model.config, "flywheel_version", "0"))

    def encode(self, messages: Any) -> PromptInputs:
        return encode_prompt(self.tokenizer, self.image_processor, messages)

    def decode(self, ids: list[int]) -> str:
        text: str = self.tokenizer.decode([t for t in ids if t not in self.eos], skip_special_tokens=False)
        return text

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.convert_ids_to_tokens(int(token_id)) or ""

    def generate(
        self,
        prompt: PromptInputs,
        n: int = 1,
        temperature: float = 1.0,
        top_logprobs: int = 0,
        max_new_tokens: int | None = None,
    ) -> tuple[list[Generated], str]:
        """n samples of the response to `prompt` and the version that made them."""
        from transformers import GenerationConfig

        if n < 1:
            raise PolicyError("need n >= 1")
        budget = max_new_tokens or DEFAULT_MAX_NEW_TOKENS
        with self.lock, torch.inference_mode():
            if self.seed is not None:
                torch.manual_seed(self.seed + self.calls)
            self.calls += 1
            device = self.model.device
            ids = torch.tensor([prompt.ids], dtype=torch.long, device=device)
            kwargs = prompt.model_kwargs(device)
            config = GenerationConfig(
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_k=0 if temperature > 0 else None,
                top_p=1.0 if temperature > 0 else None,
                max_new_tokens=budget,
                num_return_sequences=n,
                eos_token_id=sorted(self.eos),
                pad_token_id=self.tokenizer.pad_token_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config, **kwargs
            )
            new = out.sequences[:, ids.shape[1] :].cpu()
            # `scores` are the processed logits: divided by T when sampling, raw when greedy
            logp = torch.stack([F.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1).cpu()
            rows = []
            for i in range(new.shape[0]):
                tokens, lps, tops, finished = [], [], [], False
                for t in range(new.shape[1]):
                    tok = int(new[i, t])
                    tokens.append(tok)
                    lps.append(float(logp[i, t, tok]))
                    if top_logprobs:
                        values, index = logp[i, t].topk(top_logprobs)
                        tops.append([(int(j), float(v)) for j, v in zip(index, values, strict=True)])
                    if tok in self.eos:
                        finished = True
                        break
                rows.append(Generated(tokens, lps, tops, 0.0, finished))
            return rows, self.model_version
