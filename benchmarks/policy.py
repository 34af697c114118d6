"""`bench policy`: proposal latency and throughput of the embedded policy (SPEC §10, issue 4 §8).

One proposal = `propose(observation, history, n=4, temperature=1.0)` for a 1280×800 JPEG screenshot
with a 24-element list and two history steps, on 2 torch threads (the target machine). Measured
twice: in-process (`EmbeddedPolicy.propose`) and over real HTTP through the policy server
(`OpenAIPolicy` → `workers.policy.server`), which adds JSON, base64 and the prompt rebuild. Goal:
p50 < 500 ms for the annotation experience.

The settings are `benchmarks.harness.platform_config.PolicyBenchConfig` (threads, checkpoint, n,
repeats). Without a checkpoint the bench builds an untrained model from the default config; it
writes the longest answers the grammar allows (the thought and text caps), so its latency is the
worst case; `tokens_mean` reports how long the measured answers were.
"""

from __future__ import annotations

import io
import os
import statistics
import time
from dataclasses import asdict
from typing import Any

from benchmarks.harness.platform_config import PolicyBenchConfig
from workers.envs.base import Element, Observation
from workers.policy.base import HistoryItem


def bench_observation(width: int, height: int, widgets: int) -> Observation:
    """A width×height JPEG with `widgets` drawn buttons (4 a row) and their element list
    (deterministic)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (236, 239, 244))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, width, 40), fill=(40, 44, 52))
    elements = []
    for i in range(widgets):
        x, y = 40 + (i % 4) * 300, 80 + (i // 4) * 110
        draw.rectangle((x, y, x + 240, y + 60), fill=(255, 255, 255), outline=(120, 120, 120))
        draw.text((x + 12, y + 22), f"Button {i}", fill=(0, 0, 0))
        elements.append(Element(i, "button", f"Button {i}", float(x), float(y), 240.0, 60.0))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return Observation(
        screenshot=out.getvalue(),
        width=width,
        height=height,
        instruction="Click the button labelled Button 13.",
        elements=tuple(elements),
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _measure(propose: Any, repeats: int, n: int) -> dict[str, float]:
    propose()  # warm-up (allocations, first-call paths)
    latencies, tokens = [], []
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        candidates = propose()
        latencies.append((time.perf_counter() - t0) * 1e3)
        tokens += [len(c.token_ids or []) for c in candidates]
    total = time.perf_counter() - started
    return {
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(_percentile(latencies, 0.95), 1),
        "proposals_per_s": round(repeats / total, 2),
        "candidates_per_s": round(repeats * n / total, 2),
        "tokens_mean": round(statistics.fmean(tokens), 1),
    }


def run_policy(quick: bool) -> dict[str, Any]:
    import torch

    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.openai_client import EMBEDDED, OpenAIPolicy
    from workers.policy.server import start_server

    config = PolicyBenchConfig.for_run(quick)
    n, threads, checkpoint, temperature = (
        config.candidates,
        config.threads,
        config.checkpoint,
        config.temperature,
    )
    torch.set_num_threads(threads)
    policy = (
        EmbeddedPolicy.from_pretrained(checkpoint, seed=0)
        if checkpoint
        else EmbeddedPolicy(new_model(seed=0), seed=0)
    )
    obs = bench_observation(config.width, config.height, config.elements)
    history = [
        HistoryItem("Look at the page.", "wait()", obs.screenshot),
        HistoryItem(
            "Scroll to the buttons.", "scroll(start_box='(640,400)', direction='down')", obs.screenshot
        ),
    ]
    repeats = config.repeats
    figures: dict[str, Any] = {
        "n": n,
        "threads": threads,
        "screenshot": f"{config.width}x{config.height} jpeg",
        "model_version": policy.model_version,
        "repeats": repeats,
    }
    local = _measure(lambda: policy.propose(obs, history, n=n, temperature=temperature), repeats, n)
    figures.update({f"inproc_{k}": v for k, v in local.items()})
    server, _ = start_server(policy, checkpoint=checkpoint or "")
    client = OpenAIPolicy(server.url, "flywheel-embedded", profile=EMBEDDED)
    try:
        remote = _measure(lambda: client.propose(obs, history, n=n, temperature=temperature), repeats, n)
    finally:
        client.client.close()
        server.shutdown()
        server.server_close()
    figures.update({f"http_{k}": v for k, v in remote.items()})
    figures["propose_p50_ms"] = remote["p50_ms"]  # SPEC §10: through the policy server, over HTTP
    figures["goal_p50_ms"] = config.goal_p50_ms
    figures["goal_met"] = bool(remote["p50_ms"] < config.goal_p50_ms and local["p50_ms"] < config.goal_p50_ms)
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    figures["config"] = asdict(config)
    return figures
