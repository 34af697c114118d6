"""`FlywheelPolicyModel`: a small pointer-generator transformer over screenshot patches and text.

Sequence layout (one example): [image patches | prompt tokens | <bos> response tokens].
- image patches and prompt form a prefix that attends bidirectionally (prefix-LM), so element
  tokens can "see" the instruction that comes first in the prompt;
- response tokens attend to the whole valid prefix and causally to earlier response tokens;
- the output distribution mixes the vocabulary head with a copy distribution over prompt tokens
  (pointer-generator, See et al. 2017):  p(v) = g·softmax(W h)_v + (1-g)·Σ_{j: prompt_j = v} a_j,
  g = σ(w·h). Coordinates are single number tokens in the prompt's element list, so copying one is
  one pointer step;
- a value head reads every response position (V before emitting that token) for PPO;
- next-number pointer (`config.next_number_pointer`): a point is two copied numbers, and the second
  is the number that follows the first in the element list. Content attention alone confuses the
  two (measured on a 120-step SFT model: "(122,122)" for a button at (122,140), the x copied again
  for y), so the copy distribution also mixes in a positional prior: where the copy attention put the
  number just emitted, moved on to the next number token of the prompt,
      copy_t = (1 - m_t)·softmax(scores_t) + m_t·next(posterior of the last emitted number),
  m_t = σ(w·h_t), and m_t = 0 while no number has been emitted yet.
- instruction match (`config.instruction_match`, matching.py): each prompt token carries two
  features — its word occurs in the instruction, and the share of its element line's text that
  does — added to its embedding through a learned projection; the line feature also biases the copy
  scores, scaled by a learned function of the query (c_t = w·h_t):  scores_tj += c_t·line_j.

Prompts in a batch are right-padded to a common length; `prefix_mask` marks real tokens, and
positions of response tokens continue from each example's own prompt length, so padding changes
nothing numerically. The same code path serves training (`forward_full`) and incremental decoding
(`encode_prefix` + `decode` with a KV cache and the copy pointer); see generation.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.matching import N_FEATURES, instruction_match_features
from workers.policy.embedded.tokenizer import FlywheelTokenizer

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class DecodeState:
    """What incremental decoding carries between `decode` calls.

    kv: per layer (K, V) with the prefix (unless the prefix is `shared`) and every response token
      so far
    last_attn: [B, Lp] content copy attention of the last position (the one that chose the token
      fed next), or None before any response token
    prior: [B, Lp] the next-number prior in force (zeros while no number has been emitted)
    """

    kv: KVCache
    last_attn: torch.Tensor | None
    prior: torch.Tensor | None


@dataclass
class PrefixState:
    """What decoding needs after the prefix pass.

    cache: per layer (K, V), each [B, H, P, dh] with P = n_patches + prompt length (padded)
    key_mask: [B, P] bool, True for real prefix entries
    copy_keys: [B, Lp, d] projected prompt hidden states; copy_ids: [B, Lp] their token ids
    copy_mask: [B, Lp] bool; prompt_lengths: [B] long
    next_number: [B, Lp] long, position of the prompt's first number token after j (Lp when there
      is none); used by the next-number pointer
    match_line: [B, Lp] float, the instruction-match line feature (zeros when the model has none)
    shared: `cache` holds G prefixes that the B = G·r rows read in place (`share`), so decoding
      never copies them into its own cache; else cache has the B rows' own prefixes
    """

    cache: KVCache
    key_mask: torch.Tensor
    copy_keys: torch.Tensor
    copy_ids: torch.Tensor
    copy_mask: torch.Tensor
    prompt_lengths: torch.Tensor
    next_number: torch.Tensor
    match_line: torch.Tensor
    shared: bool = False

    def repeat(self, n: int) -> PrefixState:
        """Each example repeated n times along the batch (n candidates share one prefix pass)."""

        def rep(t: torch.Tensor) -> torch.Tensor:
            return t.repeat_interleave(n, dim=0)

        return PrefixState(
            cache=[(rep(k), rep(v)) for k, v in self.cache],
            key_mask=rep(self.key_mask),
            copy_keys=rep(self.copy_keys),
            copy_ids=rep(self.copy_ids),
            copy_mask=rep(self.copy_mask),
            prompt_lengths=rep(self.prompt_lengths),
            next_number=rep(self.next_number),
            match_line=rep(self.match_line),
        )

    def share(self, n: int) -> PrefixState:
        """Each example's rows repeated n times, its prefix cache read in place by those n rows
        (`shared_prefix_attention`): n decoding rows without n copies of the prefix's keys and
        values at every step. Precondition: the cache is not shared already."""
        if self.shared:
            raise ValueError("the prefix is shared already")
        return replace(replace(self, cache=[]).repeat(n), cache=self.cache, shared=True)


def shared_prefix_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    shared: tuple[torch.Tensor, torch.Tensor],
    mask: torch.Tensor,
) -> torch.Tensor:
    """Scaled dot-product attention of q [B, H, T, dh] over [shared prefix | k, v [B, H, S, dh]],
    the prefix (K, V) [G, H, P, dh] read in place by the B = G·r rows (row i, group i // r) instead
    of a copy per row; mask [B, T, P + S] bool. Returns [B, H, T, dh]: the same softmax as
    `F.scaled_dot_product_attention` over each row's concatenated keys (equal up to rounding)."""
    shared_k, shared_v = shared
    b, h, t, dh = q.shape
    g, p = shared_k.shape[0], shared_k.shape[2]
    r = b // g

    def by_group(z: torch.Tensor) -> torch.Tensor:  # [B, H, T, n] -> [G, H, r·T, n]
        return z.reshape(g, r, h, t, z.shape[-1]).transpose(1, 2).reshape(g, h, r * t, z.shape[-1])

    def by_row(z: torch.Tensor) -> torch.Tensor:  # [G, H, r·T, n] -> [B, H, T, n]
        return z.view(g, h, r, t, z.shape[-1]).transpose(1, 2).reshape(b, h, t, z.shape[-1])

    # a group's r rows are r·T queries of one matmul against its prefix (a broadcast matmul would
    # copy the prefix for every row)
    on_prefix = by_row(torch.matmul(by_group(q), shared_k.transpose(-1, -2)))
    scores = torch.cat([on_prefix, torch.matmul(q, k.transpose(-1, -2))], dim=-1) / math.sqrt(dh)
    weights = torch.softmax(scores.masked_fill(~mask[:, None], float("-inf")), dim=-1)
    from_prefix = by_row(torch.matmul(by_group(weights[..., :p]), shared_v))
    return from_prefix + torch.matmul(weights[..., p:], v)


class Block(nn.Module):
    """Pre-LN transformer block; `attend` optionally appends to / reads a KV cache."""

    def __init__(self, config: FlywheelPolicyConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.ln1 = nn.LayerNorm(config.d_model)
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model)
        )

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
        shared: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: [B, T, d]; mask: [B, T, K_total] bool (True = may attend) over [shared | past | x],
        or None when every position may attend to every key (`shared` needs one);
        `shared`: (K, V) [G, H, P, dh] of a prefix that B = G·r rows read in place (row i reads
        group i // r), not part of the returned cache. Returns (x, (K, V) of past + x)."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        if shared is None:
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask[:, None])
        elif mask is not None:
            attn = shared_prefix_attention(q, k, v, shared, mask)
        else:
            raise ValueError("a shared prefix needs a mask")
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class FlywheelPolicyModel(PreTrainedModel):
    """The embedded policy network (see module docstring)."""

    config_class = FlywheelPolicyConfig
    base_model_prefix = "flywheel"
    main_input_name = "prompt_ids"

    def __init__(self, config: FlywheelPolicyConfig) -> None:
        super().__init__(config)
        d = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.pos_emb = nn.Embedding(config.max_positions, d)
        self.seg_emb = nn.Embedding(3, d)  # 0 image, 1 prompt, 2 response
        self.patch_stem = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1),
            nn.GELU(),
            nn.Conv2d(32, d, kernel_size=config.patch_size, stride=config.patch_size),
        )
        self.patch_pos = nn.Parameter(torch.zeros(config.n_patches, d))
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        self.copy_query = nn.Linear(d, d)
        self.copy_key = nn.Linear(d, d)
        self.copy_gate = nn.Linear(d, 1)
        self.value_head = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))
        if config.next_number_pointer:
            self.pointer_gate = nn.Linear(d, 1)
        if config.instruction_match:
            self.match_emb = nn.Linear(N_FEATURES, d, bias=False)
            self.match_scale = nn.Linear(d, 1)
        tok = FlywheelTokenizer()
        self._tokenizer = tok
        self._number_ids = (tok.number_offset, tok.literal_offset)
        self.post_init()  # type: ignore[no-untyped-call]  # transformers leaves it untyped

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Conv2d):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, FlywheelPolicyModel):
            nn.init.normal_(module.patch_pos, std=0.02)

    # pieces ---------------------------------------------------------------------------------
    def embed_image(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """pixel_values: [B, 3, H, W] in [-1, 1] -> [B, n_patches, d]."""
        patches = self.patch_stem(pixel_values).flatten(2).transpose(1, 2)
        embedded: torch.Tensor = patches + self.patch_pos + self.seg_emb.weight[0]
        return embedded

    def embed_text(self, ids: torch.Tensor, positions: torch.Tensor, segment: int) -> torch.Tensor:
        """ids, positions: [B, T] long -> [B, T, d]."""
        positions = positions.clamp(max=self.config.max_positions - 1)
        embedded: torch.Tensor = self.tok_emb(ids) + self.pos_emb(positions) + self.seg_emb.weight[segment]
        return embedded

    def _run(
        self, x: torch.Tensor, mask: torch.Tensor | None, past: KVCache | None, shared: KVCache | None = None
    ) -> tuple[torch.Tensor, KVCache]:
        cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask, None if past is None else past[i], None if shared is None else shared[i])
            cache.append(kv)
        return self.ln_f(x), cache

    def is_number(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [...] long -> bool [...]: number tokens (0..MAX_NUMBER) of the vocabulary."""
        return (ids >= self._number_ids[0]) & (ids < self._number_ids[1])

    def next_number_map(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
        """prompt_ids / prompt_mask [B, Lp] -> [B, Lp] long: position of the first number token after
        position j (Lp when there is none)."""
        b, lp = prompt_ids.shape
        numbers = self.is_number(prompt_ids) & prompt_mask.bool()
        positions = torch.arange(lp, device=prompt_ids.device).expand(b, lp)
        # the nearest number at or after k, scanning right to left; lp = none
        at_or_after = torch.where(numbers, positions, torch.full_like(positions, lp))
        at_or_after = at_or_after.flip(1).cummin(1).values.flip(1)
        return torch.cat([at_or_after[:, 1:], torch.full_like(at_or_after[:, :1], lp)], dim=1)

    def _copy_distribution(
        self, hidden: torch.Tensor, ids: torch.Tensor, prefix: PrefixState, state: DecodeState | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden [B, T, d] of input ids [B, T] -> (copy distribution over prompt positions
        [B, T, Lp], the last position's content attention [B, Lp], the prior in force after it [B, Lp])."""
        scores = torch.einsum("btd,bld->btl", self.copy_query(hidden), prefix.copy_keys)
        scores = scores / math.sqrt(hidden.shape[-1])
        if self.config.instruction_match:
            scores = scores + self.match_scale(hidden) * prefix.match_line[:, None, :]
        scores = scores.masked_fill(~prefix.copy_mask[:, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        b, t, lp = attn.shape
        zeros = attn.new_zeros(b, lp)
        last_attn = zeros if state is None or state.last_attn is None else state.last_attn
        prior_in = zeros if state is None or state.prior is None else state.prior
        if not self.config.next_number_pointer:
            return attn, attn[:, -1], prior_in
        # Posterior of each input token that is a number: where the attention that chose it pointed
        # (the previous position's attention, restricted to the prompt positions holding that number).
        chooser = torch.cat([last_attn[:, None], attn[:, :-1]], dim=1)  # [B, T, Lp]
        holds = (prefix.copy_ids[:, None, :] == ids[:, :, None]) & prefix.copy_mask[:, None, :]
        posterior = chooser * holds
        posterior = posterior / posterior.sum(-1, keepdim=True).clamp_min(1e-9)
        # moved[b, t, next_number[b, j]] += posterior[b, t, j]; the extra column collects "none"
        moved = posterior.new_zeros(b, t, lp + 1)
        moved = moved.scatter_add(2, prefix.next_number[:, None, :].expand(-1, t, -1), posterior)[..., :lp]
        # forward fill: the prior at t comes from the last number among inputs[..t], else prior_in
        steps = torch.arange(t, device=ids.device).expand(b, t)
        last = torch.where(self.is_number(ids), steps, torch.full_like(steps, -1)).cummax(1).values
        filled = moved.gather(1, last.clamp_min(0)[:, :, None].expand(-1, -1, lp))
        prior = torch.where((last >= 0)[:, :, None], filled, prior_in[:, None, :])
        has = (prior.sum(-1, keepdim=True) > 0.5).float()
        m = torch.sigmoid(self.pointer_gate(hidden).float()) * has
        return (1.0 - m) * attn + m * prior, attn[:, -1], prior[:, -1]

    def heads(
        self, hidden: torch.Tensor, prefix: PrefixState, ids: torch.Tensor, state: DecodeState | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden: [B, T, d] response states of input ids [B, T] -> (log p [B, T, V] of the mixture,
        values [B, T], last content attention [B, Lp], next-number prior after the last token [B, Lp])."""
        gen = F.log_softmax(self.lm_head(hidden).float(), dim=-1)
        attn, last_attn, prior = self._copy_distribution(hidden, ids, prefix, state)
        copy = torch.zeros_like(gen).scatter_add_(
            2, prefix.copy_ids[:, None, :].expand(-1, hidden.shape[1], -1), attn
        )
        gate = self.copy_gate(hidden).float()
        mixed = torch.logaddexp(F.logsigmoid(gate) + gen, F.logsigmoid(-gate) + torch.log(copy + 1e-9))
        values = self.value_head(hidden).squeeze(-1).float()
        return mixed, values, last_attn, prior

    # passes ---------------------------------------------------------------------------------
    def encode_prefix(
        self, pixel_values: torch.Tensor, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor
    ) -> PrefixState:
        """pixel_values: [B, 3, H, W]; prompt_ids / prompt_mask: [B, Lp] (right-padded)."""
        b, lp = prompt_ids.shape
        positions = torch.arange(lp, device=prompt_ids.device).expand(b, lp)
        text = self.embed_text(prompt_ids, positions, 1)
        if self.config.instruction_match:
            match = instruction_match_features(prompt_ids, prompt_mask, self._tokenizer).to(text.dtype)
            text = text + self.match_emb(match)
            match_line = match[..., 1]
        else:
            match_line = text.new_zeros(b, lp)
        x = torch.cat([self.embed_image(pixel_values), text], dim=1)
        image_mask = torch.ones(b, self.config.n_patches, dtype=torch.bool, device=x.device)
        key_mask = torch.cat([image_mask, prompt_mask.bool()], dim=1)
        # No mask when nothing is padded (one prompt): the same attention, without building and
        # reading an all-True [P, P] mask per head and layer.
        full = bool(key_mask.all())
        hidden, cache = self._run(x, None if full else key_mask[:, None, :].expand(b, x.shape[1], -1), None)
        prompt_hidden = hidden[:, self.config.n_patches :]
        return PrefixState(
            cache=cache,
            key_mask=key_mask,
            copy_keys=self.copy_key(prompt_hidden),
            copy_ids=prompt_ids,
            copy_mask=prompt_mask.bool(),
            prompt_lengths=prompt_mask.long().sum(dim=1),
            next_number=self.next_number_map(prompt_ids, prompt_mask),
            match_line=match_line,
        )

    def decode(
        self, prefix: PrefixState, ids: torch.Tensor, offset: int, past: DecodeState | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, DecodeState]:
        """Run response tokens `ids` [B, T] that start at response index `offset`.

        `past` is the state of earlier decode calls (KV cache with the prefix unless the prefix is
        `shared`, copy pointer); None means start from the prefix. Returns (log p [B, T, V], values [B, T], new state).
        """
        b, t = ids.shape
        steps = torch.arange(offset, offset + t, device=ids.device)
        positions = prefix.prompt_lengths[:, None] + steps[None, :]
        x = self.embed_text(ids, positions, 2)
        # Response tokens see the whole valid prefix and every response token up to themselves.
        causal = torch.ones(t, offset + t, dtype=torch.bool, device=ids.device).tril(diagonal=offset)
        mask = torch.cat([prefix.key_mask[:, None, :].expand(b, t, -1), causal.expand(b, t, -1)], dim=2)
        if prefix.shared:
            hidden, cache = self._run(x, mask, None if past is None else past.kv, prefix.cache)
        else:
            hidden, cache = self._run(x, mask, prefix.cache if past is None else past.kv)
        logp, values, last_attn, prior = self.heads(hidden, prefix, ids, past)
        return logp, values, DecodeState(cache, last_attn, prior)

    def forward(
        self,
        pixel_values: torch.Tensor,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        response_ids: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced pass: response_ids [B, Tr] start with <bos>; returns (log p [B, Tr, V],
        values [B, Tr]); position t predicts response_ids[:, t + 1] (or <eos>)."""
        prefix = self.encode_prefix(pixel_values, prompt_ids, prompt_mask)
        logp, values, _ = self.decode(prefix, response_ids, offset=0)
        return logp, values
