"""`FlywheelPolicyModel`: a small pointer-generator transformer over screenshot patches and text.

Sequence layout (one example): [image patches | prompt tokens | <bos> response tokens].
- image patches and prompt form a prefix that attends bidirectionally (prefix-LM), so element
  tokens can "see" the instruction that comes first in the prompt;
- response tokens attend to the whole valid prefix and causally to earlier response tokens;
- the output distribution mixes the vocabulary head with a copy distribution over prompt tokens
  (pointer-generator, See et al. 2017):  p(v) = g·softmax(W h)_v + (1-g)·Σ_{j: prompt_j = v} a_j,
  g = σ(w·h). Coordinates are single number tokens in the prompt's element list, so copying one is
  one pointer step;
- a value head reads every response position (V before emitting that token) for PPO.

Prompts in a batch are right-padded to a common length; `prefix_mask` marks real tokens, and
positions of response tokens continue from each example's own prompt length, so padding changes
nothing numerically. The same code path serves training (`forward_full`) and incremental decoding
(`encode_prefix` + `decode_step` with a KV cache); see generation.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from workers.policy.embedded.configuration import FlywheelPolicyConfig

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class PrefixState:
    """What decoding needs after the prefix pass.

    cache: per layer (K, V), each [B, H, P, dh] with P = n_patches + prompt length (padded)
    key_mask: [B, P] bool, True for real prefix entries
    copy_keys: [B, Lp, d] projected prompt hidden states; copy_ids: [B, Lp] their token ids
    copy_mask: [B, Lp] bool; prompt_lengths: [B] long
    """

    cache: KVCache
    key_mask: torch.Tensor
    copy_keys: torch.Tensor
    copy_ids: torch.Tensor
    copy_mask: torch.Tensor
    prompt_lengths: torch.Tensor

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
        )


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
        mask: torch.Tensor,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: [B, T, d]; mask: [B, T, K_total] bool (True = may attend); returns (x, (K, V))."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
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
        self.post_init()

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
        return patches + self.patch_pos + self.seg_emb.weight[0]

    def embed_text(self, ids: torch.Tensor, positions: torch.Tensor, segment: int) -> torch.Tensor:
        """ids, positions: [B, T] long -> [B, T, d]."""
        positions = positions.clamp(max=self.config.max_positions - 1)
        return self.tok_emb(ids) + self.pos_emb(positions) + self.seg_emb.weight[segment]

    def _run(self, x: torch.Tensor, mask: torch.Tensor, past: KVCache | None) -> tuple[torch.Tensor, KVCache]:
        cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, mask, None if past is None else past[i])
            cache.append(kv)
        return self.ln_f(x), cache

    def heads(self, hidden: torch.Tensor, prefix: PrefixState) -> tuple[torch.Tensor, torch.Tensor]:
        """hidden: [B, T, d] response states -> (log p [B, T, V] of the mixture, values [B, T])."""
        gen = F.log_softmax(self.lm_head(hidden).float(), dim=-1)
        scores = torch.einsum("btd,bld->btl", self.copy_query(hidden), prefix.copy_keys)
        scores = scores / math.sqrt(hidden.shape[-1])
        scores = scores.masked_fill(~prefix.copy_mask[:, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        copy = torch.zeros_like(gen).scatter_add_(
            2, prefix.copy_ids[:, None, :].expand(-1, hidden.shape[1], -1), attn
        )
        gate = self.copy_gate(hidden).float()
        mixed = torch.logaddexp(F.logsigmoid(gate) + gen, F.logsigmoid(-gate) + torch.log(copy + 1e-9))
        values = self.value_head(hidden).squeeze(-1).float()
        return mixed, values

    # passes ---------------------------------------------------------------------------------
    def encode_prefix(
        self, pixel_values: torch.Tensor, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor
    ) -> PrefixState:
        """pixel_values: [B, 3, H, W]; prompt_ids / prompt_mask: [B, Lp] (right-padded)."""
        b, lp = prompt_ids.shape
        positions = torch.arange(lp, device=prompt_ids.device).expand(b, lp)
        x = torch.cat([self.embed_image(pixel_values), self.embed_text(prompt_ids, positions, 1)], dim=1)
        image_mask = torch.ones(b, self.config.n_patches, dtype=torch.bool, device=x.device)
        key_mask = torch.cat([image_mask, prompt_mask.bool()], dim=1)
        mask = key_mask[:, None, :].expand(b, x.shape[1], -1)
        hidden, cache = self._run(x, mask, None)
        prompt_hidden = hidden[:, self.config.n_patches :]
        return PrefixState(
            cache=cache,
            key_mask=key_mask,
            copy_keys=self.copy_key(prompt_hidden),
            copy_ids=prompt_ids,
            copy_mask=prompt_mask.bool(),
            prompt_lengths=prompt_mask.long().sum(dim=1),
        )

    def decode(
        self, prefix: PrefixState, ids: torch.Tensor, offset: int, past: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, KVCache]:
        """Run response tokens `ids` [B, T] that start at response index `offset`.

        `past` is the cache from earlier decode calls (prefix included); None means start from the
        prefix cache. Returns (log p [B, T, V], values [B, T], new cache).
        """
        b, t = ids.shape
        steps = torch.arange(offset, offset + t, device=ids.device)
        positions = prefix.prompt_lengths[:, None] + steps[None, :]
        x = self.embed_text(ids, positions, 2)
        # Response tokens see the whole valid prefix and every response token up to themselves.
        causal = torch.ones(t, offset + t, dtype=torch.bool, device=ids.device).tril(diagonal=offset)
        mask = torch.cat([prefix.key_mask[:, None, :].expand(b, t, -1), causal.expand(b, t, -1)], dim=2)
        hidden, cache = self._run(x, mask, prefix.cache if past is None else past)
        logp, values = self.heads(hidden, prefix)
        return logp, values, cache

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
