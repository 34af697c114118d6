"""`python manage.py bench vlm [--quick]`: the HF vision-language path with the tiny Qwen2.5-VL.

1. A tiny Qwen2.5-VL is built here (workers.policy.hf_vlm.tiny) and served by the policy server's
   HF backend over real HTTP; `OpenAIPolicy` with the checkpoint's profile proposes on live
   MiniWoB++ screenshots (Chromium) with a short history: `propose_p50_ms` (one candidate,
   `max_tokens` 16, T = 1, 2 screenshots in context).
2. The trainer rebuilds each prompt and scores the returned tokens: `logprob_max_abs_diff` is the
   largest |trainer − server| log-prob over every token (goal ≤ 1e-3 in float32).
3. `update_s`: one step-wise GRPO update with LoRA (rank 8) over the proposals grouped as rollouts
   (median over updates).
4. `sync_s`: the new weights to the serving side as the engine sends a LoRA version — the
   trainer's save (merged HF directory + adapter) and the server's runtime LoRA load
   (`/v1/load_lora_adapter`: the base stays loaded); `sync_full_reload_s` the same with a full
   reload of the merged directory (`/v1/load_weights`) instead, which is what every version cost
   before runtime LoRA loading (`sync_save_s`, `sync_lora_load_s`, `sync_load_s` apart);
   `adapter_bytes` vs `merged_bytes` is what moves in each case.

The settings are `benchmarks.harness.platform_config.VlmBenchConfig`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.harness.platform_config import VlmBenchConfig
from benchmarks.harness.stats import percentile


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_vlm(quick: bool = False) -> dict[str, Any]:
    import torch

    from workers.envs.base import TaskSpec
    from workers.envs.browser.miniwob import MiniWoBEnv
    from workers.policy.base import HistoryItem
    from workers.policy.hf_vlm import profile_for
    from workers.policy.hf_vlm.model import HFVLMPolicy, encode_prompt, load_vlm, score
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint
    from workers.policy.openai_client import OpenAIClient, OpenAIPolicy
    from workers.policy.server import start_server
    from workers.rl.config import RLConfig
    from workers.rl.samples import TrajectorySample, chat_step_sample_from
    from workers.rl.trainer.vlm import VLMPolicyTrainer

    config = VlmBenchConfig.for_run(quick)
    torch.set_num_threads(min(config.threads, os.cpu_count() or 1))
    work = Path(tempfile.mkdtemp(prefix="bench-vlm-"))
    checkpoint = build_tiny_checkpoint(work / "v0", seed=0)
    proposals, updates, tasks = config.proposals, config.updates, config.tasks
    profile = profile_for(checkpoint, max_tokens=config.max_tokens, max_screenshots=config.max_screenshots)
    secret = "bench-vlm"
    server, _ = start_server(
        HFVLMPolicy.from_pretrained(checkpoint, seed=0), checkpoint=str(checkpoint), weights_secret=secret
    )
    policy = OpenAIPolicy(server.url, "tiny-vlm", profile=profile, api_key=secret)
    env = MiniWoBEnv(wait_s=0.0)
    propose_ms: list[float] = []
    rows: list[tuple[Any, list[HistoryItem], Any]] = []
    try:
        for i in range(proposals):
            obs = env.reset(
                TaskSpec(task_id=tasks[i % len(tasks)], instruction="", kind="browser", source="miniwob"),
                seed=i,
            )
            history = [HistoryItem("", "wait()", obs.screenshot)] if i % 2 else []
            started = time.perf_counter()
            candidate = policy.propose(obs, history, n=1, temperature=1.0)[0]
            propose_ms.append((time.perf_counter() - started) * 1e3)
            rows.append((obs, history, candidate))
    finally:
        env.close()
    # 2. trainer-side log-probs of the same tokens
    model, tokenizer, image_processor = load_vlm(checkpoint)
    diffs = []
    for obs, history, c in rows:
        messages, _ = policy.build_messages(obs, history, None)
        with torch.no_grad():
            s = score(model, encode_prompt(tokenizer, image_processor, messages), c.token_ids, 1.0)
        diffs.append(float((s.logprobs - torch.tensor(c.token_logprobs)).abs().max()))
    # 3. GRPO + LoRA updates over the proposals as one-step rollouts in groups of the same task
    samples = []
    for i, (obs, history, c) in enumerate(rows):
        step = chat_step_sample_from(
            profile=profile, instruction=obs.instruction, screenshot=obs.screenshot, width=obs.width,
            height=obs.height, image_format=obs.image_format, history=history, token_ids=c.token_ids,
            rollout_logprobs=c.token_logprobs, policy_version=0,
        )  # fmt: skip
        samples.append(
            TrajectorySample(
                str(i), f"t{i % len(tasks)}", f"g{i % len(tasks)}", [step], float(i % 2), bool(i % 2)
            )
        )
    rl = RLConfig.model_validate(
        {"algorithm": "grpo", "grpo": {"lr": config.lr, "entropy_keep_fraction": 1.0}}
    )
    trainer = VLMPolicyTrainer(
        checkpoint, rl, seed=0, vlm={"lora_rank": config.lora_rank, "lora_alpha": config.lora_alpha}
    )
    update_s, save_s, load_s, lora_s = [], [], [], []
    client = OpenAIClient(server.url, api_key=secret)
    try:
        for u in range(updates):
            started = time.perf_counter()
            trainer.update(samples)
            update_s.append(time.perf_counter() - started)
            out = work / f"u{u + 1}"
            started = time.perf_counter()
            trainer.save(out, trainer.version)
            save_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.load_lora_adapter(f"v{u + 1}", str(out / "adapter"))
            lora_s.append(time.perf_counter() - started)
            served = client.models()[0]["model_version"]
            started = time.perf_counter()
            client.load_weights(str(out))
            load_s.append(time.perf_counter() - started)
            client.load_weights(str(checkpoint))  # back to the base the next adapter applies to
    finally:
        client.close()
        policy.client.close()
        server.shutdown()
        server.server_close()
    last = work / f"u{updates}"
    params = sum(p.numel() for p in model.parameters())
    return {
        "quick": quick,
        "model": "tiny Qwen2.5-VL (random weights, built here)",
        "params": params,
        "proposals": proposals,
        "propose_p50_ms": round(statistics.median(propose_ms), 1),
        "propose_p90_ms": round(percentile(propose_ms, 0.9), 1),
        "logprob_max_abs_diff": max(diffs),
        "logprob_goal": config.logprob_goal,
        "updates": updates,
        "update_s": round(statistics.median(update_s), 2),
        "update_samples": len(samples),
        "sync_s": round(statistics.median(s + ld for s, ld in zip(save_s, lora_s, strict=True)), 3),
        "sync_full_reload_s": round(
            statistics.median(s + ld for s, ld in zip(save_s, load_s, strict=True)), 3
        ),
        "sync_save_s": round(statistics.median(save_s), 3),
        "sync_lora_load_s": round(statistics.median(lora_s), 3),
        "sync_load_s": round(statistics.median(load_s), 3),
        "served_version_after": served,
        "merged_bytes": _dir_bytes(last)
        - _dir_bytes(last / "adapter")
        - (last / "trainer_state.pt").stat().st_size,
        "adapter_bytes": _dir_bytes(last / "adapter"),
        "gpu": "none available to this session (CPU only)",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "config": asdict(config),
    }
