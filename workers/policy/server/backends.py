"""The two model backends behind the policy server, chosen by the checkpoint's config.json: the
embedded model and a Hugging Face vision-language checkpoint (workers.policy.hf_vlm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import Generated
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint
from workers.policy.hf_vlm import checkpoint_kind
from workers.policy.hf_vlm.model import HFVLMPolicy, load_vlm
from workers.policy.prompts import embedded_prompt_from_messages


class BadRequest(ValueError):
    """The request is malformed: answered with 400 and this message."""


class NotFound(BadRequest):
    """The request names something this server does not have: answered with 404."""


class EmbeddedBackend:
    """The embedded model behind the service: flat prompt from the messages, grammar-masked sampling."""

    kind = "embedded"

    def __init__(self, policy: EmbeddedPolicy) -> None:
        self.policy = policy

    @property
    def version(self) -> str:
        return self.policy.model_version

    def load(self, path: str, label: str | None) -> None:
        try:
            model, _ = load_checkpoint(path)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        if label is not None:
            model.config.flywheel_version = label  # swapped together with the weights it names
        self.policy.set_model(model)

    def load_adapter(self, path: str, label: str, base: str) -> None:
        raise BadRequest("the embedded model takes no LoRA adapters (use /v1/load_weights)")

    def complete(
        self, messages: Any, n: int, temperature: float, top: int, max_tokens: int | None,
        thought_temperature: float | None,
    ) -> tuple[list[Generated], str, int]:  # fmt: skip
        try:
            inputs = embedded_prompt_from_messages(messages)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            rows, version = self.policy.generate(
                [inputs], n, temperature, top, max_tokens, thought_temperature
            )
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        return rows[0], version, len(self.policy.encode_prompt(inputs.text))

    def rank(self, messages: Any, width: int, max_tokens: int | None) -> tuple[list[Generated], str, int]:
        """[greedy, *the `width` most probable answers, best first] for the messages' prompt."""
        try:
            inputs = embedded_prompt_from_messages(messages)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        from workers.policy.ranking import rank

        try:
            ranked, version = rank(self.policy, inputs, width, max_tokens)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        return [ranked.greedy, *ranked.beams], version, ranked.prompt_tokens

    def text(self, token_ids: list[int]) -> str:
        tok = self.policy.tokenizer
        return tok.decode([t for t in token_ids if t != tok.eos_id])

    def token_text(self, token_id: int) -> str:
        return self.policy.tokenizer.token_text(token_id)

    def token_bytes(self, token_id: int) -> list[int]:
        return list(self.policy.tokenizer.decode([token_id]).encode())


class HFVLMBackend:
    """A Hugging Face vision-language checkpoint (workers.policy.hf_vlm): the messages through the
    checkpoint's chat template and image processor; `thought_temperature` does not apply. LoRA
    adapters load on top of the loaded base without reloading it (`load_adapter`)."""

    kind = "hf_vlm"

    def __init__(self, policy: HFVLMPolicy) -> None:
        self.policy = policy

    @property
    def version(self) -> str:
        return self.policy.model_version

    def load(self, path: str, label: str | None) -> None:
        try:
            model, _, _ = load_vlm(path)
            if label is not None:
                model.config.flywheel_version = label
            self.policy.set_model(model)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc

    def load_adapter(self, path: str, label: str, base: str) -> None:
        """`base`: the directory this server loaded its base weights from; an adapter trained on
        another base is refused (applied to this one it would serve weights nobody trained)."""
        from workers.policy.hf_vlm.lora import adapter_base

        if not (Path(path) / "adapter_config.json").is_file():
            raise BadRequest(f"no LoRA adapter at {path} (adapter_config.json missing)")
        trained_on = adapter_base(path)
        if trained_on and base and Path(trained_on).resolve() != Path(base).resolve():
            raise BadRequest(
                f"the adapter was trained on {trained_on}, this server's base is {base}: "
                "load the version's merged directory with /v1/load_weights instead"
            )
        try:
            self.policy.load_adapter(path, label)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc

    def complete(
        self, messages: Any, n: int, temperature: float, top: int, max_tokens: int | None,
        thought_temperature: float | None,
    ) -> tuple[list[Generated], str, int]:  # fmt: skip
        try:
            prompt = self.policy.encode(messages)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            rows, version = self.policy.generate(prompt, n, temperature, top, max_tokens)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        return rows, version, len(prompt.ids)

    def rank(self, messages: Any, width: int, max_tokens: int | None) -> tuple[list[Generated], str, int]:
        raise BadRequest("'use_beam_search' is served for the embedded model only")

    def text(self, token_ids: list[int]) -> str:
        return self.policy.decode(token_ids)

    def token_text(self, token_id: int) -> str:
        return self.policy.token_text(token_id)

    def token_bytes(self, token_id: int) -> list[int]:
        return list(self.policy.tokenizer.decode([token_id]).encode())


def backend_for(policy: EmbeddedPolicy | HFVLMPolicy) -> EmbeddedBackend | HFVLMBackend:
    return HFVLMBackend(policy) if isinstance(policy, HFVLMPolicy) else EmbeddedBackend(policy)


def policy_from_checkpoint(directory: str | Path, seed: int | None = None) -> EmbeddedPolicy | HFVLMPolicy:
    """The policy a checkpoint directory holds: the embedded model or an HF VLM (by config.json)."""
    if checkpoint_kind(directory) == "hf_vlm":
        return HFVLMPolicy.from_pretrained(directory, seed=seed)
    return EmbeddedPolicy.from_pretrained(directory, seed=seed)
