"""The trainer's batch layout: one `Row` per policy call, padded tensors over rows, running means.

A row holds a step's prompt, its sampled tokens and everything scored before the update (old
log-probs, entropies, values, reference log-probs, advantages, returns); minibatches pad rows to
[S, T] (S = steps, T = longest response)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from workers.rl.losses import masked_mean, truncated_is_weight
from workers.rl.samples import StepSample, TrajectorySample

Tensor = torch.Tensor


@dataclass
class Row:
    """One step as the trainer batches it, with everything computed before the update."""

    traj: int  # index into the batch's trajectories
    step: StepSample
    pixels: Tensor  # [3, H, W]
    prompt: list[int]
    old_logprobs: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    entropies: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    old_values: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    ref_logprobs: Tensor | None = None  # [T]
    advantages: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    returns: Tensor = field(default_factory=lambda: torch.zeros(0))  # [T]
    keep: bool = True
    trained: Tensor | None = None  # [T] 1 = the token carries policy loss, 0 = context (None: all carry it)
    ratio: float = math.nan
    clipped: bool = False


def length_buckets(lengths: Sequence[int], max_rows: int, max_waste: float = 0.15) -> list[list[int]]:
    """Indices of rows grouped into padded batches of similar prompt length: sorted by length, a
    bucket closes at `max_rows` or when padding it to its longest row would spend more than
    `max_waste` of its tokens on padding. The model's cost grows with the padded area (linearly in
    the layers, quadratically in attention), and MiniWoB++ prompts range from ~200 to ~800 tokens."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    buckets: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        n = lengths[i]  # the longest so far (ascending order)
        if current and (len(current) >= max_rows or (len(current) + 1) * n > (1 + max_waste) * (total + n)):
            buckets.append(current)
            current, total = [], 0
        current.append(i)
        total += n
    if current:
        buckets.append(current)
    return buckets


def pad(rows: Sequence[Tensor], width: int) -> Tensor:
    """Right-pad 1-D tensors to [len(rows), width] with zeros."""
    out = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out


class Meter:
    """Weighted running means of named figures over minibatches."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weights: dict[str, float] = {}

    def add(self, name: str, value: float, weight: float = 1.0) -> None:
        if math.isfinite(value) and weight > 0:
            self.sums[name] = self.sums.get(name, 0.0) + value * weight
            self.weights[name] = self.weights.get(name, 0.0) + weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.weights[k] for k in self.sums}


def rows_tensors(rows: Sequence[Row]) -> dict[str, Tensor]:
    """The padded [S, T] tensors of a minibatch; "mask" is 0 on padding and on steps not kept."""
    width = max(len(r.step.token_ids) for r in rows)
    out = {
        "old": pad([r.old_logprobs for r in rows], width),
        "rollout": pad([torch.tensor(r.step.rollout_logprobs) for r in rows], width),
        "adv": pad([r.advantages for r in rows], width),
        "ret": pad([r.returns for r in rows], width),
        "old_values": pad([r.old_values for r in rows], width),
        "mask": pad([_trained(r) * float(r.keep) for r in rows], width),
    }
    if all(r.ref_logprobs is not None for r in rows):
        out["ref"] = pad([r.ref_logprobs for r in rows], width)  # type: ignore[misc]
    return out


def _trained(row: Row) -> Tensor:
    return row.trained if row.trained is not None else torch.ones(len(row.step.token_ids))


def by_trajectory(trajectories: Sequence[TrajectorySample], rows: Sequence[Row]) -> list[list[Row]]:
    """The rows of each trajectory, in step order."""
    grouped: list[list[Row]] = [[] for _ in trajectories]
    for r in rows:
        grouped[r.traj].append(r)
    return grouped


def token_episodes(
    trajectories: Sequence[TrajectorySample], grouped: Sequence[Sequence[Row]]
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Each trajectory's steps as one token-level episode [N, L]: rewards (a step's shaped reward on
    its last token, the trajectory reward on the last token of the last step), old values, mask,
    and the lengths [N]."""
    lengths = torch.tensor([sum(r.old_logprobs.numel() for r in rs) for rs in grouped])
    width = int(lengths.max())
    rewards = torch.zeros(len(trajectories), width)
    for i, (traj, rs) in enumerate(zip(trajectories, grouped, strict=True)):
        end = 0
        for r in rs:
            end += r.old_logprobs.numel()
            rewards[i, end - 1] += r.step.reward
        rewards[i, end - 1] += traj.reward
    values = pad([torch.cat([r.old_values for r in rs]) for rs in grouped], width)
    mask = pad([torch.ones(int(n)) for n in lengths], width)
    return rewards, values, mask, lengths


def scatter_tokens(grouped: Sequence[Sequence[Row]], episodes: Tensor) -> list[Tensor]:
    """Per-row slices of a token-level [N, L] tensor, in the order of the rows of `grouped`."""
    out = []
    for i, rs in enumerate(grouped):
        pos = 0
        for r in rs:
            n = r.old_logprobs.numel()
            out.append(episodes[i, pos : pos + n].clone())
            pos += n
    return out


def record_ratio(
    rows: Sequence[Row], logprobs: Tensor, old: Tensor, adv: Tensor, mask: Tensor, lo: float, hi: float
) -> None:
    """Per-step ratio (token mean) and clip flag of this pass, for episode replay."""
    with torch.no_grad():
        ratio = torch.exp(torch.clamp(logprobs.detach() - old, -20.0, 20.0))
        clipped = ((ratio < 1 - lo) & (adv < 0)) | ((ratio > 1 + hi) & (adv > 0))
        valid = mask > 0
        for i, r in enumerate(rows):
            if not bool(valid[i].any()):  # filtered out: not trained on
                continue
            r.ratio = float(masked_mean(ratio[i], valid[i].to(ratio.dtype)))
            r.clipped = bool((clipped[i] & valid[i]).any())


def is_stats(rows: Sequence[Row], cap: float | None, level: str, meter: Meter) -> None:
    """IS-weight figures over all rows: mean of the truncated weights, max before truncation."""
    old = torch.cat([r.old_logprobs for r in rows])
    rollout = torch.tensor([x for r in rows for x in r.step.rollout_logprobs])
    raw = torch.exp(torch.clamp(old - rollout, max=20.0))
    if cap is None:
        meter.add("policy/is_weight_mean", float(raw.mean()))
        meter.add("policy/is_weight_max", float(raw.max()))
        return
    width = max(r.old_logprobs.numel() for r in rows)
    o = pad([r.old_logprobs for r in rows], width)
    ro = pad([torch.tensor(r.step.rollout_logprobs) for r in rows], width)
    m = pad([torch.ones(r.old_logprobs.numel()) for r in rows], width)
    w = truncated_is_weight(o, ro, cap, m, level)  # type: ignore[arg-type]
    if level == "sequence":
        raw_seq = torch.exp(torch.clamp(((o - ro) * m).sum(-1), max=20.0))
        meter.add("policy/is_weight_max", float(raw_seq.max()))
    else:
        meter.add("policy/is_weight_max", float(raw.max()))
    meter.add("policy/is_weight_mean", float(masked_mean(w, m)))
    meter.add("policy/is_truncated_frac", float(masked_mean((w >= cap * (1 - 1e-6)).float(), m)))
