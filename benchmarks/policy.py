"""`bench policy`: the annotation proposal of the model a fresh install proposes with (SPEC §10,
issue 4 §8, issue 34 item 2).

The model is the starter (workers.policy.starter, trained once per machine and cached under
FLYWHEEL_CACHE_DIR), unless `FLYWHEEL_BENCH_POLICY_CHECKPOINT` names another checkpoint.

- Latency: one proposal = `propose_executable(observation, history, k=4)` (the greedy answer and
  the most probable answers from one batched decode, then rounds of samples while fewer than 4
  distinct executable actions are found, within the budget) for a 1280×800 JPEG screenshot with a
  24-element list and two history steps, on the policy server's torch threads (1 by default),
  in-process (`EmbeddedPolicy`) and over real HTTP through the policy server (`OpenAIPolicy` →
  `workers.policy.server`), which adds JSON, base64 and the prompt rebuild. Goal: HTTP p50 ≤ 300 ms.
  `*_cpu_p50_ms`: the process's CPU time of one proposal (the figure a loaded machine does not move).
- `executable_share`: of the candidates shown on live MiniWoB++ pages (the starter's tasks, the
  validation seeds), the share the page executes (each is stepped on a fresh reset of the same
  seed); goal ≥ 0.95. `drawn_executable_share` is the share of everything the model answered that
  could have been shown (what showing raw samples gave).
- `top1_success`: greedy episodes of the model on the validation seeds (workers.policy.evaluate);
  goal: the starter's own measured success (`starter_success`).

The settings are `benchmarks.harness.platform_config.PolicyBenchConfig` (threads, checkpoint, k,
repeats, validation seeds).
"""

from __future__ import annotations

import io
import os
import statistics
import time
from dataclasses import asdict
from typing import Any

from benchmarks.harness.platform_config import PolicyBenchConfig
from benchmarks.harness.stats import percentile
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


def _policy_checkpoint(configured: str | None) -> tuple[str, dict[str, Any]]:
    """The checkpoint directory to measure and the starter's own figures ({} for another model)."""
    if configured:
        return configured, {}
    from pathlib import Path

    from workers.asr.models import cache_dir
    from workers.policy.starter import cached_starter

    directory, figures = cached_starter(Path(cache_dir()))
    return str(directory), figures


def _proposal_figures(propose: Any, repeats: int) -> dict[str, float]:
    """Latency of `propose()` (a Proposal), its CPU time (this process: the client and, over HTTP,
    the in-process server; what the load does not change) and what it showed."""
    propose()  # warm-up (allocations, first-call paths)
    latencies, cpu, shown, drawn, rounds = [], [], 0, 0, 0
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        proposal = propose()
        latencies.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
        shown, drawn, rounds = (
            shown + len(proposal.candidates),
            drawn + proposal.drawn,
            rounds + proposal.rounds,
        )
    return {
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "cpu_p50_ms": round(statistics.median(cpu), 1),
        "candidates_mean": round(shown / repeats, 2),
        "drawn_mean": round(drawn / repeats, 2),
        "rounds_mean": round(rounds / repeats, 2),
    }


def executable_figures(policy: Any, tasks: list[str], seeds: list[int], k: int) -> dict[str, Any]:
    """Candidates shown on live MiniWoB++ pages, each stepped on a fresh reset of its seed: the share
    the page executes, and the share of all drawn answers that could be shown."""
    from workers.envs.base import EnvError, TaskSpec
    from workers.envs.browser.miniwob import MiniWoBEnv
    from workers.policy.proposals import DUPLICATE, propose_executable

    env = MiniWoBEnv(wait_s=0.0)
    shown = accepted = drawn = refused_drawn = greedy_first = 0
    refusals: list[str] = []
    try:
        for task in tasks:
            spec = TaskSpec(task_id=task, instruction="", kind="browser", source="miniwob")
            for seed in seeds:
                proposal = propose_executable(policy, env.reset(spec, seed=seed), [], k=k)
                drawn += proposal.drawn
                refused_drawn += sum(n for reason, n in proposal.rejected.items() if reason != DUPLICATE)
                greedy_first += proposal.greedy_first
                for candidate in proposal.candidates:
                    shown += 1
                    env.reset(spec, seed=seed)
                    try:
                        for action in candidate.parsed.actions:
                            env.step(action)
                        accepted += 1
                    except EnvError as exc:
                        refusals.append(f"{task}/{seed} {candidate.action_text[:60]}: {str(exc)[:120]}")
    finally:
        env.close()
    observations = len(tasks) * len(seeds)
    return {
        "executable_share": round(accepted / shown, 4) if shown else None,
        "candidates_shown": shown,
        "candidates_per_observation": round(shown / observations, 2),
        "greedy_first_share": round(greedy_first / observations, 4),
        "drawn_executable_share": round(1 - refused_drawn / drawn, 4) if drawn else None,
        "refusals": refusals[:10],
    }


def run_policy(quick: bool) -> dict[str, Any]:
    import torch

    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.policy.evaluate import evaluate
    from workers.policy.openai_client import EMBEDDED, OpenAIPolicy
    from workers.policy.proposals import propose_executable
    from workers.policy.server import start_server
    from workers.policy.starter import STARTER_RECIPE

    config = PolicyBenchConfig.for_run(quick)
    k, threads = config.candidates, config.threads
    torch.set_num_threads(threads)
    checkpoint, starter = _policy_checkpoint(config.checkpoint)
    policy = EmbeddedPolicy.from_pretrained(checkpoint, seed=0)
    obs = bench_observation(config.width, config.height, config.elements)
    history = [
        HistoryItem("Look at the page.", "wait()", obs.screenshot),
        HistoryItem(
            "Scroll to the buttons.", "scroll(start_box='(640,400)', direction='down')", obs.screenshot
        ),
    ]
    figures: dict[str, Any] = {
        "n": k,
        "threads": threads,
        "screenshot": f"{config.width}x{config.height} jpeg",
        "checkpoint": "starter" if starter else checkpoint,
        "model_version": policy.model_version,
        "repeats": config.repeats,
    }
    local = _proposal_figures(lambda: propose_executable(policy, obs, history, k=k), config.repeats)
    figures.update({f"inproc_{key}": v for key, v in local.items()})
    server, _ = start_server(policy, checkpoint=checkpoint)
    client = OpenAIPolicy(server.url, "flywheel-embedded", profile=EMBEDDED)
    try:
        remote = _proposal_figures(lambda: propose_executable(client, obs, history, k=k), config.repeats)
    finally:
        client.client.close()
        server.shutdown()
        server.server_close()
    figures.update({f"http_{key}": v for key, v in remote.items()})
    figures["propose_p50_ms"] = remote["p50_ms"]  # SPEC §10: through the policy server, over HTTP
    figures["goal_p50_ms"] = config.goal_p50_ms
    figures["goal_met"] = bool(remote["p50_ms"] <= config.goal_p50_ms)
    tasks, seeds = (
        list(STARTER_RECIPE["tasks"]),
        list(STARTER_RECIPE["eval_seeds"])[: config.validation_seeds],
    )
    figures.update(executable_figures(policy, tasks, seeds, k))
    report = evaluate(policy, tasks, seeds)
    figures["top1_success"] = round(report.mean, 4)
    figures["top1_episodes"] = len(report.episodes)
    figures["validation_seeds"] = seeds
    figures["starter_success"] = starter.get("success_mean")
    figures["goal_executable_share"] = 0.95
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    figures["config"] = asdict(config)
    return figures
