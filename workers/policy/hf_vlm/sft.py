"""Supervised fine-tuning of an HF vision-language policy (Qwen2.5-VL family): the VLM half of the
one SFT path (`workers.policy.sft.sft_train` hands a Qwen2.5-VL checkpoint to `sft_train_vlm`).

Examples are the same `SFTExample`s the embedded model trains on (a stored step's observation,
history and `Thought: …\\nAction: …` target with screen coordinates); `chat_example` turns one into
what the VLM reads and writes at inference time: the UI-TARS chat of `chat_messages` with the
checkpoint's profile (template, the last K screenshots, history as assistant turns) and the target
with its coordinates in the profile's convention (UI-TARS-1.5: pixels of the smart-resized image).
Loss: mean negative log-likelihood of the response tokens (+ end of turn) at temperature 1 —
`score`, the function the RL trainer and the server's log-probs agree with.

`train_pairs` is the loop itself (shared with the VLM trainer's Entropulse phases, which train on
the token ids their rollouts sampled); `sft_train_vlm` loads a checkpoint, trains full weights, and
writes a servable HF directory plus `trainer_state.pt` (optimizer, step), so a later call with more
`steps` resumes where the last stopped, with the batches an uninterrupted run would have drawn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from workers.policy.base import HistoryItem, PolicyError
from workers.policy.hf_vlm.model import PromptInputs, encode_prompt, eos_ids, load_vlm, score
from workers.policy.sft import sft_result  # policy.sft imports this module lazily, inside sft_train

STATE_FILE = "trainer_state.pt"
STATE_KIND = "hf_vlm_sft"


@dataclass
class EncodedPair:
    """One training pair: the encoded prompt and the response token ids (ending in end of turn)."""

    prompt: PromptInputs
    response: list[int]


def to_model_text(text: str, screen: tuple[int, int], model: tuple[int, int], convention: Any) -> str:
    """`Thought: …\\nAction: …` with screen coordinates rewritten in `convention` for a model image of
    `model` (width, height); PolicyError when the text does not parse as actions."""
    from workers.actions.coords import action_from_screen
    from workers.actions.parse import parse_response
    from workers.actions.serialize import format_response
    from workers.actions.types import Convention

    parsed = parse_response(text, convention=Convention.SCREEN)
    if parsed.error is not None or not parsed.actions:
        raise PolicyError(f"target is not an action response: {text[:80]!r}")
    w, h = screen
    actions = [action_from_screen(a, convention, w, h, model[0], model[1]).action for a in parsed.actions]
    return format_response(parsed.thought, actions)


def chat_example(example: Any, profile: Any) -> tuple[list[dict[str, Any]], str]:
    """(chat messages, target text) of an `SFTExample` as this profile's model reads and writes it."""
    from workers.policy.openai_client import chat_messages

    obs = example.observation
    if obs is None:
        raise PolicyError("an HF VLM needs the example's observation (workers.policy.sft.example_from_step)")
    _, size = chat_messages(profile, obs, [], None)
    screen = (obs.width, obs.height)
    convention = profile.convention
    history = [
        HistoryItem(h.thought, _history_action(h, screen, size, convention), h.screenshot, h.image_format)
        for h in example.history
    ]
    messages, _ = chat_messages(profile, obs, history, None)
    return messages, to_model_text(example.target, screen, size, profile.convention)


def _history_action(
    item: HistoryItem, screen: tuple[int, int], model: tuple[int, int], convention: Any
) -> str:
    """An earlier step's action in the model's convention; kept as stored when it is no action text."""
    try:
        return to_model_text(item.text, screen, model, convention).partition("Action:")[2].strip()
    except (PolicyError, ValueError):
        return item.action


def encode_examples(
    examples: Sequence[Any], tokenizer: Any, image_processor: Any, eos: int, profile: Any
) -> tuple[list[EncodedPair], int]:
    """The pairs of the examples that encode, and how many did not (a target that is no action, a
    prompt over the limits): one such step is left out instead of failing the SFT."""
    pairs, skipped = [], 0
    for example in examples:
        try:
            messages, target = chat_example(example, profile)
            prompt = encode_prompt(tokenizer, image_processor, messages)
        except (PolicyError, ValueError):
            skipped += 1
            continue
        response = [*tokenizer(target, add_special_tokens=False)["input_ids"], eos]
        pairs.append(EncodedPair(prompt, response))
    return pairs, skipped


def pair_nll(model: Any, pairs: Sequence[EncodedPair]) -> torch.Tensor:
    """Mean negative log-likelihood per response token over `pairs` (one forward pass each)."""
    total = torch.zeros(())
    tokens = 0
    for pair in pairs:
        total = total - score(model, pair.prompt, pair.response, 1.0).logprobs.sum()
        tokens += len(pair.response)
    return total / max(tokens, 1)


def train_pairs(
    model: Any,
    pairs: Sequence[EncodedPair],
    steps: int,
    *,
    lr: float,
    batch_size: int,
    seed: int,
    first_step: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
    grad_clip: float = 1.0,
    progress_callback: Callable[[dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    log_every: int = 10,
) -> tuple[list[float], int, bool, torch.optim.Optimizer]:
    """Train the model's trainable parameters on `pairs` until `steps` total optimizer steps
    (cosine LR decay); returns (logged losses, steps done, stopped early, optimizer)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optimizer or torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    model.train()
    losses: list[float] = []
    step, stopped = first_step, False
    for step in range(first_step, steps):
        if should_stop is not None and should_stop():
            stopped = True
            break
        rng = torch.Generator().manual_seed(seed * 1_000_003 + step)
        picks = torch.randint(len(pairs), (min(batch_size, len(pairs)),), generator=rng).tolist()
        current_lr = lr * 0.5 * (1 + math.cos(math.pi * step / max(1, steps)))
        for group in optimizer.param_groups:
            group["lr"] = current_lr
        loss = pair_nll(model, [pairs[i] for i in picks])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        if step % log_every == 0 or step == steps - 1:
            losses.append(loss.item())
            if progress_callback is not None:
                progress_callback({"step": step + 1, "total": steps, "loss": losses[-1], "lr": current_lr})
    else:
        step = steps
    model.eval()
    return losses, (step if stopped else steps), stopped, optimizer


def sft_train_vlm(
    start: str | Path,
    examples: Sequence[Any],
    out_dir: str | Path,
    steps: int,
    lr: float = 1e-4,
    batch_size: int = 8,
    seed: int = 0,
    version: str | None = None,
    progress_callback: Callable[[dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    log_every: int = 10,
) -> dict[str, Any]:
    """Full fine-tuning of the checkpoint at `start` on `examples`; the same result dict as
    `workers.policy.sft.sft_train` plus `skipped_examples`."""
    from workers.policy.hf_vlm import profile_for
    from workers.policy.hf_vlm.lora import save_hf

    out = Path(out_dir)
    state = None
    if (out / STATE_FILE).is_file() and (out / "config.json").is_file():
        state = torch.load(out / STATE_FILE, weights_only=False)
        if state.get("kind") != STATE_KIND:
            raise PolicyError(f"{out} holds another trainer's state")
    model, tokenizer, image_processor = load_vlm(out if state else start)
    parent = str(state["parent"]) if state else str(getattr(model.config, "flywheel_version", ""))
    version = version or (state["version"] if state else f"sft-{int(time.time())}-{seed}")
    eos = sorted(eos_ids(model, tokenizer))[0]
    pairs, skipped = encode_examples(examples, tokenizer, image_processor, eos, profile_for(start))
    if not pairs:
        raise PolicyError(f"none of the {len(examples)} examples can be written by this model")
    started = time.perf_counter()
    optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
    losses, done, stopped, optimizer = train_pairs(
        model, pairs, steps, lr=lr, batch_size=batch_size, seed=seed,
        first_step=int(state["step"]) if state else 0, optimizer=optimizer,
        progress_callback=progress_callback, should_stop=should_stop, log_every=log_every,
    )  # fmt: skip
    extra = {"kind": "sft", "steps": done, "examples": len(pairs)}
    save_hf(model, out, tokenizer, image_processor, version, parent, extra)
    record = {"kind": STATE_KIND, "optimizer": optimizer.state_dict(), "step": done, "version": version,
              "parent": parent}  # fmt: skip
    torch.save(record, out / STATE_FILE)
    return sft_result(
        done, losses, started, version, parent, out, stopped, len(pairs), skipped_examples=skipped
    )
