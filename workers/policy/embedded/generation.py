"""Sampling and scoring under one distribution: grammar-masked, temperature-scaled pointer-generator.

`generate` and `score` both compute  log π_T(v) = log_softmax(log p(v) / T  over grammar-allowed v),
so the log-probs recorded at sampling time equal what `score` returns for the same tokens (RL
importance ratios start at exactly 1). Temperature 0 means greedy choice; its log-probs are then
reported under T = 1.

`thought_temperature` (optional, > 0) gives the free text of the thought its own temperature; the
action keeps `temperature`. A weak model samples noise as soon as its thought is sampled (measured
on a 120-step SFT model at T = 0.5: empty greedy thoughts, 20-90 random bytes when sampled), so RL
rollouts then train the action under contexts greedy decoding never produces; a near-greedy thought
(e.g. 0.05) keeps exploration on the action. Both functions apply the same per-position choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workers.policy.embedded.grammar import THOUGHT_TEXT, Grammar, GrammarState
from workers.policy.embedded.modeling import FlywheelPolicyModel


@dataclass
class PromptBatch:
    """pixel_values: [B, 3, H, W] float; prompt_ids / prompt_mask: [B, Lp] (right-padded)."""

    pixel_values: torch.Tensor
    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor

    def __len__(self) -> int:
        return int(self.prompt_ids.shape[0])


@dataclass
class Generated:
    """One sampled response: ids (ending in <eos> unless cut), per-token log-probs, V(s)."""

    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    value: float
    finished: bool


@dataclass
class Scored:
    """Per-token log-probs / entropies / values [B, T] of given responses; mask [B, T] marks real
    tokens. values[:, t] is V before emitting token t (values[:, 0] is V(s))."""

    logprobs: torch.Tensor
    entropies: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor


def effective_temperature(temperature: float) -> float:
    return temperature if temperature > 0 else 1.0


def constrained_logp(
    logp: torch.Tensor, allowed: torch.Tensor, temperature: float | torch.Tensor
) -> torch.Tensor:
    """logp: [..., V] mixture log-probs; allowed: [..., V] bool -> tempered, masked log-softmax.
    `temperature` is a number or a tensor of per-position temperatures shaped [..., 1]."""
    scaled = logp / (
        temperature if isinstance(temperature, torch.Tensor) else effective_temperature(temperature)
    )
    return F.log_softmax(scaled.masked_fill(~allowed, float("-inf")), dim=-1)


def position_temperatures(
    keys: torch.Tensor, temperature: float, thought_temperature: float | None
) -> float | torch.Tensor:
    """Grammar mask keys [...] -> the temperature of each position [..., 1] (thought free text gets
    `thought_temperature`), or the plain number when there is no separate thought temperature or
    decoding is greedy (temperature 0)."""
    if thought_temperature is None or temperature <= 0:
        return temperature
    if not thought_temperature > 0:
        raise ValueError(f"thought_temperature must be > 0, got {thought_temperature}")
    return torch.where(keys == THOUGHT_TEXT, thought_temperature, temperature).unsqueeze(-1).float()


@torch.no_grad()
def generate(
    model: FlywheelPolicyModel,
    grammar: Grammar,
    batch: PromptBatch,
    n: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int | None = None,
    top_logprobs: int = 0,
    generator: torch.Generator | None = None,
    thought_temperature: float | None = None,
) -> list[list[Generated]]:
    """n responses for each of the B prompts (one prefix pass per prompt); returns [B][n]."""
    model.train(False)
    if max_new_tokens is None:
        max_new_tokens = grammar.max_thought + grammar.max_text + 16
    prefix = model.encode_prefix(batch.pixel_values, batch.prompt_ids, batch.prompt_mask).repeat(n)
    rows = len(batch) * n
    states = [GrammarState() for _ in range(rows)]
    out = [Generated([], [], [], 0.0, False) for _ in range(rows)]
    ids = torch.full((rows, 1), grammar.tok.bos_id, dtype=torch.long)
    past = None
    for step in range(max_new_tokens):
        logp, values, past = model.decode(prefix, ids, offset=step, past=past)
        if step == 0:
            for row, value in enumerate(values[:, 0].tolist()):
                out[row].value = value
        keys = torch.tensor([grammar.mask_key(s) for s in states])
        temps = position_temperatures(keys, temperature, thought_temperature)
        lp = constrained_logp(logp[:, -1], grammar.masks[keys], temps)
        if temperature > 0:
            chosen = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(1)
        else:
            chosen = lp.argmax(dim=-1)
        chosen_lp = lp.gather(1, chosen[:, None]).squeeze(1).tolist()
        top = lp.topk(top_logprobs, dim=-1) if top_logprobs else None
        for row, token_id in enumerate(chosen.tolist()):
            if out[row].finished:
                continue
            out[row].token_ids.append(token_id)
            out[row].logprobs.append(chosen_lp[row])
            if top is not None:
                pairs = zip(top.indices[row].tolist(), top.values[row].tolist(), strict=True)
                out[row].top_logprobs.append(list(pairs))
            grammar.advance(states[row], token_id)
            out[row].finished = token_id == grammar.tok.eos_id
        if all(g.finished for g in out):
            break
        # Finished rows keep decoding <pad> so the batch stays rectangular; their output is frozen.
        chosen = torch.tensor(
            [grammar.tok.pad_id if g.finished else t for g, t in zip(out, chosen.tolist(), strict=True)]
        )
        ids = chosen[:, None]
    return [out[i * n : (i + 1) * n] for i in range(len(batch))]


def response_tensor(
    responses: list[list[int]], bos_id: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """responses (without <bos>) -> (inputs [B, T] = <bos> + tokens[:-1] padded, targets mask)."""
    longest = max(len(r) for r in responses)
    inputs = torch.full((len(responses), longest), pad_id, dtype=torch.long)
    mask = torch.zeros(len(responses), longest, dtype=torch.bool)
    for row, tokens in enumerate(responses):
        seq = [bos_id, *tokens[:-1]]
        inputs[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(tokens)] = True
    return inputs, mask


def grammar_keys(grammar: Grammar, responses: list[list[int]], length: int) -> torch.Tensor:
    """[B, length] mask keys obtained by replaying the grammar over each response."""
    keys = torch.full((len(responses), length), 0, dtype=torch.long)
    for row, tokens in enumerate(responses):
        state = GrammarState()
        for t, token_id in enumerate(tokens):
            keys[row, t] = grammar.mask_key(state)
            grammar.advance(state, token_id)
    return keys


def score(
    model: FlywheelPolicyModel,
    grammar: Grammar,
    batch: PromptBatch,
    responses: list[list[int]],
    temperature: float = 1.0,
    thought_temperature: float | None = None,
) -> Scored:
    """Log-probs, entropies and values of given responses (ids without <bos>); differentiable.

    A token the grammar forbids gets log-prob -inf; targets should come from `generate` or
    `Grammar.encode_response`.
    """
    inputs, mask = response_tensor(responses, grammar.tok.bos_id, grammar.tok.pad_id)
    targets = torch.full_like(inputs, grammar.tok.pad_id)
    for row, tokens in enumerate(responses):
        targets[row, : len(tokens)] = torch.tensor(tokens)
    logp, values = model(batch.pixel_values, batch.prompt_ids, batch.prompt_mask, inputs)
    keys = grammar_keys(grammar, responses, inputs.shape[1])
    allowed = grammar.masks[keys]
    lp = constrained_logp(logp, allowed, position_temperatures(keys, temperature, thought_temperature))
    token_lp = lp.gather(2, targets[:, :, None]).squeeze(2)
    probs = lp.exp()
    # masked_fill before the product: 0 · (−inf) would put NaN into the entropy's gradient
    entropies = -(probs * lp.masked_fill(~allowed, 0.0)).sum(dim=-1)
    zeros = torch.zeros_like(token_lp)
    return Scored(
        logprobs=torch.where(mask, token_lp, zeros),
        entropies=torch.where(mask, entropies, zeros),
        values=torch.where(mask, values, zeros),
        mask=mask,
    )
