"""`EmbeddedPolicy`: the in-process torch policy behind the `Policy` protocol and the policy server.

A checkpoint directory holds config.json + model.safetensors (transformers' `save_pretrained`) and
vocab.json + tokenizer_config.json. The model emits screen-pixel coordinates (`Convention.SCREEN`)
copied from the element list, so no resizing is involved.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError

from workers.actions.types import Convention
from workers.envs.base import Observation, TaskSpec
from workers.policy.base import (
    Candidate,
    HistoryItem,
    PolicyError,
    instruction_of,
    parse_text,
    split_response,
)
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.generation import Generated, PromptBatch, generate
from workers.policy.embedded.grammar import Grammar
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.policy.prompts import EmbeddedInputs, build_embedded_prompt, format_elements


def load_image(image: bytes | None, width: int, height: int) -> torch.Tensor:
    """Encoded screenshot -> [3, height, width] float in [-1, 1]; zeros when there is none.

    JPEG `draft` decodes at a reduced scale first (a 1280×800 JPEG in ~3 ms instead of ~12 ms)."""
    if not image:
        return torch.zeros(3, height, width)
    try:
        img: Image.Image = Image.open(io.BytesIO(image))
        img.draft("RGB", (width * 2, height * 2))
        img = img.convert("RGB").resize((width, height), Image.Resampling.BILINEAR)
    except (UnidentifiedImageError, OSError) as exc:
        raise PolicyError(f"screenshot is not a readable image: {exc}") from exc
    data = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(height, width, 3)
    return data.permute(2, 0, 1).float() / 127.5 - 1.0


def load_checkpoint(directory: str | Path) -> tuple[FlywheelPolicyModel, FlywheelTokenizer]:
    """Model + tokenizer from a checkpoint directory; PolicyError if it is missing or broken."""
    path = Path(directory)
    if not (path / "config.json").is_file():
        raise PolicyError(f"no checkpoint at {path} (config.json missing)")
    try:
        model = FlywheelPolicyModel.from_pretrained(path)
        tokenizer = FlywheelTokenizer.from_pretrained(path)
    except (OSError, ValueError, RuntimeError) as exc:
        raise PolicyError(f"cannot load checkpoint {path}: {exc}") from exc
    # Loaded weights are views into one file buffer at arbitrary byte offsets; some CPU kernels
    # round differently on unaligned data, so a resumed trainer's next update would differ in the
    # last bits from the one that saved it. Fresh (aligned) copies make loading exact.
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.clone()
    model.train(False)
    return model, tokenizer


def new_model(config: FlywheelPolicyConfig | None = None, seed: int = 0) -> FlywheelPolicyModel:
    """A freshly initialised (untrained) model; deterministic for a seed."""
    torch.manual_seed(seed)
    model = FlywheelPolicyModel(config or FlywheelPolicyConfig())
    model.train(False)
    return model


class EmbeddedPolicy:
    """Proposes candidates with the embedded model; thread-safe (one lock around the model)."""

    convention = Convention.SCREEN

    def __init__(
        self,
        model: FlywheelPolicyModel,
        tokenizer: FlywheelTokenizer | None = None,
        seed: int | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        """`max_new_tokens` caps every proposed response (an untrained model otherwise writes to its
        full thought + text budget at every step; a capped response does not parse)."""
        self.tokenizer = tokenizer or FlywheelTokenizer()
        self.max_new_tokens = max_new_tokens
        self.lock = threading.Lock()
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.set_model(model)

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, seed: int | None = None, max_new_tokens: int | None = None
    ) -> EmbeddedPolicy:
        model, tokenizer = load_checkpoint(directory)
        return cls(model, tokenizer, seed=seed, max_new_tokens=max_new_tokens)

    def set_model(self, model: FlywheelPolicyModel) -> None:
        """Swap weights (hot reload); the grammar follows the new config's caps."""
        if model.config.vocab_size != self.tokenizer.vocab_size:
            raise PolicyError("checkpoint vocabulary does not match the tokenizer")
        grammar = Grammar(self.tokenizer, model.config.max_thought, model.config.max_text)
        with self.lock:
            self.model, self.grammar = model.train(False), grammar

    @property
    def model_version(self) -> str:
        return str(self.model.config.flywheel_version)

    # inputs ---------------------------------------------------------------------------------
    def inputs_for(
        self, observation: Observation, history: list[HistoryItem], task: TaskSpec | None
    ) -> EmbeddedInputs:
        text = build_embedded_prompt(
            instruction_of(observation, task),
            format_elements(observation.elements),
            [h.action for h in history],
        )
        return EmbeddedInputs(text, observation.screenshot)

    def encode_prompt(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text)
        limit = self.model.config.max_prompt_tokens
        # The history sits at the end of the prompt: cutting the tail drops the oldest context last.
        return ids[:limit]

    def batch(self, inputs: list[EmbeddedInputs]) -> PromptBatch:
        """Tokenise and pad prompts, load screenshots: [B, ...] tensors for the model."""
        cfg = self.model.config
        prompts = [self.encode_prompt(item.text) for item in inputs]
        longest = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), longest), self.tokenizer.pad_id, dtype=torch.long)
        mask = torch.zeros(len(prompts), longest, dtype=torch.bool)
        for row, prompt in enumerate(prompts):
            ids[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.long)
            mask[row, : len(prompt)] = True
        pixels = torch.stack([load_image(item.image, cfg.image_width, cfg.image_height) for item in inputs])
        return PromptBatch(pixels, ids, mask)

    # sampling -------------------------------------------------------------------------------
    def generate(
        self,
        inputs: list[EmbeddedInputs],
        n: int = 1,
        temperature: float = 1.0,
        top_logprobs: int = 0,
        max_new_tokens: int | None = None,
        thought_temperature: float | None = None,
    ) -> tuple[list[list[Generated]], str]:
        """n samples per input (batched across inputs) and the model version that made them;
        `thought_temperature` samples the thought at its own temperature (generation.py)."""
        if n < 1 or not inputs:
            raise PolicyError("need n >= 1 and at least one input")
        with self.lock, torch.inference_mode():
            batch = self.batch(inputs)
            out = generate(
                self.model, self.grammar, batch, n, temperature, max_new_tokens, top_logprobs, self.generator,
                thought_temperature,
            )  # fmt: skip
            return out, self.model_version

    def to_candidate(
        self, generated: Generated, version: str, image_size: tuple[int, int] | None = None
    ) -> Candidate:
        ids = [t for t in generated.token_ids if t != self.tokenizer.eos_id]
        text = self.tokenizer.decode(ids)
        thought, action = split_response(text)
        return Candidate(
            thought=thought,
            action_text=action,
            parsed=parse_text(text, self.convention),
            logprob_sum=float(sum(generated.logprobs)),
            token_logprobs=list(generated.logprobs),
            model_version=version,
            raw_text=text,
            convention=self.convention,
            image_size=image_size,
            token_ids=list(generated.token_ids),
            value=generated.value,
        )

    def propose(
        self,
        observation: Observation,
        history: list[HistoryItem],
        task: TaskSpec | None = None,
        n: int = 4,
        temperature: float = 1.0,
        thought_temperature: float | None = None,
    ) -> list[Candidate]:
        return self.propose_batch([(observation, history, task)], n, temperature, thought_temperature)[0]

    def propose_batch(
        self,
        items: list[tuple[Observation, list[HistoryItem], TaskSpec | None]],
        n: int = 4,
        temperature: float = 1.0,
        thought_temperature: float | None = None,
    ) -> list[list[Candidate]]:
        """Candidates for several observations in one batched decode (rollouts across envs)."""
        inputs = [self.inputs_for(obs, hist, task) for obs, hist, task in items]
        out, version = self.generate(
            inputs,
            n,
            temperature,
            max_new_tokens=self.max_new_tokens,
            thought_temperature=thought_temperature,
        )
        # Screen-pixel coordinates: the image the coordinates refer to is the screen itself.
        return [
            [self.to_candidate(g, version, (obs.width, obs.height)) for g in row]
            for (obs, _, _), row in zip(items, out, strict=True)
        ]
