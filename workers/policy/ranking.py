"""The greedy answer and the most probable answers of the embedded model in one batched decode (issue
34 item 2: proposals an annotator can accept, HTTP p50 <= 300 ms for 4 candidates).

`greedy_and_beams` encodes the screenshot and prompt once, then decodes 1 + width rows together
over one KV cache: row 0 greedily, the others as a beam search, so the candidates are distinct by
construction and come ranked by their exact log-probability under the model's own distribution
(T = 1, grammar-masked: what `generation.score` returns). `rank` / `propose_ranked` run it for an
`EmbeddedPolicy` (under its lock); the policy server serves it as vLLM's `use_beam_search` with
this platform's `greedy_first` (workers.policy.server), and `workers.policy.proposals` asks for it.

It lives beside the embedded package, not in it: the starter's cache key hashes that package
(workers.policy.starter.recipe_hash), and a decoding strategy does not change what the model is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from workers.envs.base import Observation, TaskSpec
from workers.policy.base import Candidate, HistoryItem, PolicyError
from workers.policy.embedded.generation import Generated, PromptBatch, constrained_logp
from workers.policy.embedded.grammar import (
    END,
    FIRST_TOKEN_KEY,
    START,
    TEXT_CAP,
    THOUGHT_CAP,
    Grammar,
    GrammarState,
)
from workers.policy.embedded.modeling import DecodeState, FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.prompts import EmbeddedInputs

# Beams of one proposal still open after this much CPU time of the decoding thread are dropped (the
# greedy answer is always finished). CPU time, not wall time: on a loaded machine a wall-clock budget
# cut the beams to 2 at load 42 without making the answer much sooner (the starter's 4-candidate
# proposal takes ~220 ms of CPU on the policy server's one torch thread, which computes in the
# calling thread; with more threads this undercounts).
RANK_BUDGET_S = 1.0


@dataclass
class Ranked:
    """What `greedy_and_beams` returns: the greedy answer and the most probable answers, best first
    (log-probs under T = 1, the model's own distribution)."""

    greedy: Generated
    beams: list[Generated]
    prompt_tokens: int = 0


def _forced(grammar: Grammar, state: GrammarState) -> int | None:
    """The one token the grammar allows next, or None when the model has a choice."""
    key = grammar.mask_key(state)
    if key >= FIRST_TOKEN_KEY:
        return key - FIRST_TOKEN_KEY
    return {START: grammar.thought_id, THOUGHT_CAP: grammar.action_id, TEXT_CAP: grammar.text_close_id,
            END: grammar.tok.eos_id}.get(key)  # fmt: skip


def _copy_state(state: GrammarState) -> GrammarState:
    return GrammarState(state.phase, list(state.slots), state.count)


def _forced_run(grammar: Grammar, state: GrammarState) -> list[int]:
    """The tokens the grammar forces from `state` on, up to the next choice or <eos> (included)."""
    probe, run = _copy_state(state), []
    while (token_id := _forced(grammar, probe)) is not None:
        run.append(token_id)
        grammar.advance(probe, token_id)
        if token_id == grammar.tok.eos_id:
            break
    return run


def _take(grammar: Grammar, state: GrammarState, out: Generated, tokens: list[int]) -> None:
    """Append forced `tokens` (log-prob 0 each under the masked softmax) and move `state` past them."""
    for token_id in tokens:
        grammar.advance(state, token_id)
        out.token_ids.append(token_id)
        out.logprobs.append(0.0)
        out.finished = token_id == grammar.tok.eos_id


def _reorder(past: DecodeState, rows: torch.Tensor) -> DecodeState:
    """The decode state of rows `rows` [R] long of `past` (a beam continues its source's state)."""
    return DecodeState(
        [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in past.kv],
        None if past.last_attn is None else past.last_attn.index_select(0, rows),
        None if past.prior is None else past.prior.index_select(0, rows),
    )


@torch.inference_mode()
def greedy_and_beams(
    model: FlywheelPolicyModel,
    grammar: Grammar,
    batch: PromptBatch,
    width: int,
    max_new_tokens: int | None = None,
    budget_s: float | None = None,
) -> Ranked:
    """The greedy answer and the `width` most probable distinct answers (beam search) for one prompt,
    in one batched decode over one prefix pass: row 0 decodes greedily, rows 1..width hold the
    beams, all sharing the screenshot's and prompt's encoding and one KV cache.

    Every log-prob is under T = 1 and the grammar mask (what `score` returns at T = 1). Beams are
    distinct token sequences, best first; the search stops once no live beam can beat the
    `width`-th finished one (log-probs only fall). Tokens the grammar forces cost no choice: a run
    of them up to <eos> ends the answer without a model pass, and a run every live row has goes into
    the same model pass as the token before it. After `budget_s` seconds of this thread's CPU time
    the live beams are dropped (those finished stay) and only the greedy answer is completed.
    Precondition: one prompt, width >= 1."""
    if len(batch) != 1 or width < 1:
        raise ValueError("greedy_and_beams takes one prompt and width >= 1")
    deadline = None if budget_s is None else time.thread_time() + budget_s
    model.train(False)
    if max_new_tokens is None:
        max_new_tokens = grammar.max_thought + grammar.max_text + 16
    eos, pad = grammar.tok.eos_id, grammar.tok.pad_id
    rows = 1 + width
    one = model.encode_prefix(batch.pixel_values, batch.prompt_ids, batch.prompt_mask)
    states = [GrammarState() for _ in range(rows)]
    out = [Generated([], [], [], 0.0, False) for _ in range(rows)]
    # one live beam at first (the others would repeat it); -inf marks an empty beam slot
    scores = torch.full((width,), float("-inf"))
    scores[0] = 0.0
    finished: list[tuple[float, Generated]] = []
    lead = [t for t in _forced_run(grammar, states[0]) if t != eos]
    for row in range(rows):
        _take(grammar, states[row], out[row], lead)
    # Every row starts alike: the first pass runs once and its cache is copied to the rows. Every
    # row reads the one prefix cache in place (`PrefixState.share`), so the cache the rows carry,
    # copied when beams are reordered, holds their response tokens only.
    logp, values, past = model.decode(one.share(1), torch.tensor([[grammar.tok.bos_id, *lead]]), offset=0)
    past = _reorder(past, torch.zeros(rows, dtype=torch.long))
    prefix = one.share(rows)
    logp, fed = logp.expand(rows, -1, -1), 1 + len(lead)
    for row in range(rows):
        out[row].value = float(values[0, 0])
    while True:
        keys = torch.tensor([grammar.mask_key(s) for s in states])
        lp = constrained_logp(logp[:, -1], grammar.masks[keys], 1.0)
        next_ids = [pad] * rows
        greedy = out[0]
        if not greedy.finished:
            token_id = int(lp[0].argmax())
            greedy.token_ids.append(token_id)
            greedy.logprobs.append(float(lp[0, token_id]))
            grammar.advance(states[0], token_id)
            greedy.finished = token_id == eos
            next_ids[0] = token_id
        # the beams: the best `width` continuations of the live ones
        flat = (scores[:, None] + lp[1:]).flatten()
        live = int(torch.isfinite(flat).sum())
        kept: list[tuple[int, int, float]] = []  # (source beam, token, score)
        for index in flat.topk(min(width, live)).indices.tolist() if live else []:
            beam, token_id = divmod(index, lp.shape[1])
            kept.append((beam, token_id, float(flat[index])))
        source = [0] + [1 + beam for beam, _, _ in kept] + [1] * (width - len(kept))
        new_states, new_out = [states[0]], [out[0]]
        scores = torch.full((width,), float("-inf"))
        for slot, (beam, token_id, score) in enumerate(kept):
            state, was = _copy_state(states[1 + beam]), out[1 + beam]
            grammar.advance(state, token_id)
            gen = Generated([*was.token_ids, token_id], [*was.logprobs, float(lp[1 + beam, token_id])], [],
                            was.value, token_id == eos)  # fmt: skip
            if gen.finished:
                finished.append((score, gen))
            else:
                scores[slot], next_ids[1 + slot] = score, token_id
            new_states.append(state)
            new_out.append(gen)
        for _ in range(width - len(kept)):
            new_states.append(GrammarState("done"))
            new_out.append(Generated([], [], [], 0.0, True))
        states, out = new_states, new_out
        # forced runs: one up to <eos> ends its answer here; the common part of the others is fed now
        runs: dict[int, list[int]] = {}
        for row in range(rows):
            if out[row].finished or (row > 0 and not torch.isfinite(scores[row - 1])):
                continue
            run = _forced_run(grammar, states[row])
            if run and run[-1] == eos:
                _take(grammar, states[row], out[row], run)
                if row > 0:
                    finished.append((float(scores[row - 1]), out[row]))
                    scores[row - 1] = float("-inf")
            else:
                runs[row] = run
        finished.sort(key=lambda item: item[0], reverse=True)
        best_live = float(scores.max())
        late = deadline is not None and time.thread_time() > deadline
        if late or (len(finished) >= width and best_live <= finished[width - 1][0]):
            scores[:] = float("-inf")  # no live beam can enter the best `width` (or no time is left)
            runs = {row: run for row, run in runs.items() if row == 0}
        if not runs:
            break
        common = min(len(run) for run in runs.values())
        for row, run in runs.items():
            _take(grammar, states[row], out[row], run[:common])
        ids = torch.tensor(
            [
                [next_ids[row], *runs[row][:common]] if row in runs else [pad] * (1 + common)
                for row in range(rows)
            ]
        )
        past = _reorder(past, torch.tensor(source))
        if fed >= max_new_tokens:
            break
        logp, _, past = model.decode(prefix, ids, offset=fed, past=past)
        fed += ids.shape[1]
    finished.sort(key=lambda item: item[0], reverse=True)
    return Ranked(out[0], [gen for _, gen in finished[:width]], int(batch.prompt_mask.sum()))


def rank(
    policy: EmbeddedPolicy,
    inputs: EmbeddedInputs,
    width: int,
    max_new_tokens: int | None = None,
    budget_s: float | None = RANK_BUDGET_S,
) -> tuple[Ranked, str]:
    """`greedy_and_beams` for one prompt of `policy` (under its lock) and the model version."""
    if width < 1:
        raise PolicyError("need width >= 1")
    with policy.lock, torch.inference_mode():
        batch = policy.batch([inputs])
        ranked = greedy_and_beams(
            policy.model, policy.grammar, batch, width, max_new_tokens or policy.max_new_tokens, budget_s
        )
        return ranked, policy.model_version


def propose_ranked(
    policy: EmbeddedPolicy,
    observation: Observation,
    history: list[HistoryItem],
    task: TaskSpec | None = None,
    width: int = 8,
    budget_s: float | None = RANK_BUDGET_S,
) -> tuple[Candidate, list[Candidate]]:
    """The greedy candidate and the `width` most probable candidates, best first."""
    ranked, version = rank(policy, policy.inputs_for(observation, history, task), width, budget_s=budget_s)
    size = (observation.width, observation.height)
    return policy.to_candidate(ranked.greedy, version, size), [
        policy.to_candidate(g, version, size) for g in ranked.beams
    ]
