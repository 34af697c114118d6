"""Supervised fine-tuning of a policy checkpoint on `Thought: ...\\nAction: ...` targets: the one SFT
path. `sft_train` trains the embedded model here and hands a Qwen2.5-VL-family checkpoint (by its
config.json) to `workers.policy.hf_vlm.sft.sft_train_vlm`, which builds the VLM's own chat prompt
from the same examples.

Loss: mean negative log-likelihood of the target's thought + action tokens (prompt tokens carry no
loss), under the grammar-constrained distribution that decoding samples from. Runs in resumable
chunks: `out_dir` holds the HF checkpoint plus `trainer_state.pt` (optimizer, step); calling again
with a larger `steps` continues where the last call stopped. Batches are drawn from a generator
seeded with (seed, step), so a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from workers.envs.base import Observation, TaskSpec
from workers.policy.base import HistoryItem, PolicyError
from workers.policy.embedded.generation import PromptBatch, score
from workers.policy.embedded.grammar import Grammar, GrammarError
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint, load_image
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.policy.hf_vlm import checkpoint_kind
from workers.policy.prompts import EmbeddedInputs, build_embedded_prompt, format_elements

STATE_FILE = "trainer_state.pt"
VERSION_FILE = "flywheel_version.json"


@dataclass(frozen=True)
class SFTExample:
    """One training pair: what the embedded model reads (prompt text + screenshot) and the target
    response; `observation` and `history` are the step itself, from which an HF VLM builds its own
    prompt (None / empty for examples made from an embedded rollout's stored prompt)."""

    inputs: EmbeddedInputs
    target: str
    observation: Observation | None = None
    history: tuple[HistoryItem, ...] = ()


def example_from_step(
    observation: Observation, history: list[HistoryItem], target: str, task: TaskSpec | None = None
) -> SFTExample:
    """Build the prompt exactly as `EmbeddedPolicy.inputs_for` does at inference time."""
    instruction = task.instruction if task is not None and task.instruction else observation.instruction
    text = build_embedded_prompt(
        instruction, format_elements(observation.elements), [h.action for h in history]
    )
    return SFTExample(EmbeddedInputs(text, observation.screenshot), target, observation, tuple(history))


def screen_text(thought: str, action_text: str, convention: str, width: int, height: int) -> str:
    """A stored step's `Thought: …\\nAction: …` with its coordinates in screen pixels. Annotated steps
    keep the annotating profile's convention (`Step.coord_convention`, model image sizes from the
    default smart_resize as decisions store them); SFT targets are screen pixels, which each model
    kind rewrites into its own convention. Text that does not parse is returned as it is."""
    from workers.actions.coords import action_to_screen
    from workers.actions.parse import parse_response
    from workers.actions.serialize import format_response
    from workers.actions.types import Convention

    text = f"Thought: {thought}\nAction: {action_text}"
    try:
        source = Convention(convention or "screen")
    except ValueError:
        return text
    if source == Convention.SCREEN or width <= 0 or height <= 0:
        return text
    parsed = parse_response(text, convention=source)
    if parsed.error is not None or not parsed.actions:
        return text
    try:
        return format_response(
            thought, [action_to_screen(a, source, width, height).action for a in parsed.actions]
        )
    except ValueError:
        return text


@dataclass
class _Encoded:
    pixels: torch.Tensor  # [3, H, W]
    prompt: list[int]
    response: list[int]


def _encode(
    examples: list[SFTExample], model: FlywheelPolicyModel, tokenizer: FlywheelTokenizer
) -> list[_Encoded]:
    grammar = Grammar(tokenizer, model.config.max_thought, model.config.max_text)
    cfg = model.config
    encoded = []
    for i, ex in enumerate(examples):
        try:
            response = grammar.encode_response(ex.target)
        except GrammarError as exc:
            raise PolicyError(f"example {i}: {exc}") from exc
        prompt = tokenizer.encode(ex.inputs.text)[: cfg.max_prompt_tokens]
        encoded.append(
            _Encoded(load_image(ex.inputs.image, cfg.image_width, cfg.image_height), prompt, response)
        )
    return encoded


def _batch(items: list[_Encoded], pad_id: int) -> tuple[PromptBatch, list[list[int]]]:
    longest = max(len(it.prompt) for it in items)
    ids = torch.full((len(items), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(items), longest, dtype=torch.bool)
    for row, it in enumerate(items):
        ids[row, : len(it.prompt)] = torch.tensor(it.prompt)
        mask[row, : len(it.prompt)] = True
    return PromptBatch(torch.stack([it.pixels for it in items]), ids, mask), [it.response for it in items]


def _load_start(
    model: FlywheelPolicyModel | str | Path, out: Path
) -> tuple[FlywheelPolicyModel, dict[str, Any] | None]:
    """Resume from out_dir when it holds a trainer state, else start from the given model / dir."""
    if (out / STATE_FILE).is_file() and (out / "config.json").is_file():
        resumed, _ = load_checkpoint(out)
        return resumed, torch.load(out / STATE_FILE, weights_only=False)
    if isinstance(model, FlywheelPolicyModel):
        return model, None
    loaded, _ = load_checkpoint(model)
    return loaded, None


def save_checkpoint(
    model: FlywheelPolicyModel, out: Path, version: str, parent: str, extra: dict[str, Any] | None = None
) -> None:
    """HF checkpoint dir + tokenizer + `flywheel_version.json` lineage record."""
    model.config.flywheel_version = version
    model.config.flywheel_parent = parent
    model.save_pretrained(out)
    FlywheelTokenizer().save_pretrained(out)
    record = {"version": version, "parent": parent, "created": time.time(), **(extra or {})}
    (out / VERSION_FILE).write_text(json.dumps(record, indent=2))


def sft_train(
    model: FlywheelPolicyModel | str | Path,
    examples: list[SFTExample],
    out_dir: str | Path,
    steps: int | None = None,
    epochs: float | None = None,
    lr: float = 1e-3,
    batch_size: int = 16,
    seed: int = 0,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
    version: str | None = None,
    progress_callback: Callable[[dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    log_every: int = 10,
) -> dict[str, Any]:
    """Train until `steps` total optimizer steps (or `epochs` passes over the examples).

    Returns JSON-serialisable metrics: steps, losses (every `log_every`), loss_first, loss_last,
    seconds, version, parent, out_dir, stopped (True when `should_stop` ended the chunk early),
    examples. A `FlywheelPolicyModel` passed in is trained in place (and also saved to `out_dir`);
    load the result with `policy_from_result`. Cosine LR decay over the planned steps.
    `progress_callback` gets {"step", "total", "loss", "lr"}.
    """
    if not examples:
        raise PolicyError("no SFT examples")
    steps = _planned_steps(steps, epochs, len(examples), batch_size)
    out = Path(out_dir)
    resuming = (out / STATE_FILE).is_file() and (out / "config.json").is_file()
    if not isinstance(model, FlywheelPolicyModel) and checkpoint_kind(out if resuming else model) == "hf_vlm":
        from workers.policy.hf_vlm.sft import sft_train_vlm

        return sft_train_vlm(
            model, examples, out, steps, lr=lr, batch_size=batch_size, seed=seed, version=version,
            progress_callback=progress_callback, should_stop=should_stop, log_every=log_every,
        )  # fmt: skip
    start_model, state = _load_start(model, out)
    tokenizer = FlywheelTokenizer()
    parent = str(start_model.config.flywheel_version) if state is None else str(state["parent"])
    version = version or (state["version"] if state else f"sft-{int(time.time())}-{seed}")
    encoded = _encode(examples, start_model, tokenizer)
    grammar = Grammar(tokenizer, start_model.config.max_thought, start_model.config.max_text)
    optimizer = torch.optim.AdamW(start_model.parameters(), lr=lr, weight_decay=weight_decay)
    first_step = 0
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        first_step = int(state["step"])
    start_model.train()
    losses: list[float] = []
    started = time.perf_counter()
    stopped = False
    step = first_step
    for step in range(first_step, steps):
        if should_stop is not None and should_stop():
            stopped = True
            break
        rng = torch.Generator().manual_seed(seed * 1_000_003 + step)
        picks = torch.randint(len(encoded), (min(batch_size, len(encoded)),), generator=rng).tolist()
        batch, responses = _batch([encoded[i] for i in picks], tokenizer.pad_id)
        current_lr = lr * 0.5 * (1 + math.cos(math.pi * step / max(1, steps)))  # cosine decay
        loss = _optimizer_step(start_model, grammar, optimizer, batch, responses, current_lr, grad_clip)
        if step % log_every == 0 or step == steps - 1:
            losses.append(loss)
            if progress_callback is not None:
                progress_callback({"step": step + 1, "total": steps, "loss": loss, "lr": current_lr})
    done_steps = step if stopped else steps
    start_model.train(False)
    _save(start_model, optimizer, out, version, parent, done_steps, len(examples))
    return sft_result(done_steps, losses, started, version, parent, out, stopped, len(examples))


def sft_result(
    steps: int,
    losses: list[float],
    started: float,
    version: str,
    parent: str | None,
    out: Path,
    stopped: bool,
    examples: int,
    **extra: Any,
) -> dict[str, Any]:
    """What an SFT run reports (the embedded model's and a VLM's alike); `started` is perf_counter's."""
    return {
        "steps": steps,
        "losses": losses,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "seconds": time.perf_counter() - started,
        "version": version,
        "parent": parent,
        "out_dir": str(out),
        "stopped": stopped,
        "examples": examples,
        **extra,
    }


def _planned_steps(steps: int | None, epochs: float | None, examples: int, batch_size: int) -> int:
    if steps is not None:
        return steps
    if epochs is None:
        raise PolicyError("give steps or epochs")
    return max(1, math.ceil(epochs * examples / batch_size))


def _optimizer_step(
    model: FlywheelPolicyModel, grammar: Grammar, optimizer: torch.optim.Optimizer, batch: PromptBatch,
    responses: list[list[int]], lr: float, grad_clip: float,
) -> float:  # fmt: skip
    """One step on the mean negative log-likelihood of the response tokens; the loss."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    scored = score(model, grammar, batch, responses, temperature=1.0)
    loss = -(scored.logprobs.sum() / scored.mask.sum())
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.item())


def _save(
    model: FlywheelPolicyModel, optimizer: torch.optim.Optimizer, out: Path, version: str, parent: str,
    steps: int, examples: int,
) -> None:  # fmt: skip
    """The checkpoint, and beside it the trainer state a later call resumes from."""
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, out, version, parent, {"steps": steps, "examples": examples})
    torch.save(
        {"optimizer": optimizer.state_dict(), "step": steps, "version": version, "parent": parent},
        out / STATE_FILE,
    )


def policy_from_result(result: dict[str, Any], seed: int | None = None) -> EmbeddedPolicy:
    """An `EmbeddedPolicy` over the checkpoint `sft_train` wrote (`result["out_dir"]`)."""
    return EmbeddedPolicy.from_pretrained(result["out_dir"], seed=seed)
