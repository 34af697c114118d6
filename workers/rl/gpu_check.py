"""Issue 23's GPU check (scripts/gpu_check.sh runs it; docs/scale.md says how to read it): the HF
vision-language path on one GPU in bf16, with UI-TARS-1.5's architecture (Qwen2.5-VL) scaled to
~0.5B parameters from a config (random weights; nothing downloaded).

    python3 -m workers.rl.gpu_check [--out FILE] [--quick]

Measured (one JSON line printed last, also written to --out):
- `proposals_per_s`: candidates per second from `HFVLMPolicy.generate` (n candidates per call, at
  most `max_new_tokens` each, T = 1) on a 1280×800 screenshot with one earlier screenshot in context;
  `propose_ms_p50` the latency of one call; random weights rarely stop early, so every candidate
  runs to the token cap (the upper bound of the cost).
- `update_s`: one step-wise GRPO update of `VLMPolicyTrainer` with LoRA (rank 16) over the sampled
  candidates (median over updates); `full_ft_update_s` the same without LoRA.
- `sync_lora_s` / `sync_full_s`: the new version to a serving copy as its adapter on the loaded base
  vs a full reload of the merged directory (save time apart: `save_s`).
- `logprob_max_abs_diff_bf16`: trainer vs sampler log-probs of the same tokens in bf16 (float32 on
  the CPU meets 1e-3; bf16 is expected to be looser — this says by how much).
Needs torch with CUDA, transformers, peft, pillow, safetensors (the device image has them); no
Django, no database, no browser.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

MAX_PIXELS = 16384 * 28 * 28  # UI-TARS-1.5's image processor cap


def scaled_config(tokenizer: Any) -> Any:
    """Qwen2.5-VL at ~0.5B: a Qwen2.5-0.5B-shaped language model (hidden 896, 14 heads, 2 KV heads,
    MLP 4864, Qwen's 151,936-token vocabulary) with 16 layers, and Qwen2.5-VL's vision tower
    (hidden 1280, 16 heads, MLP 3420, window attention) cut to 8 blocks."""
    from workers.policy.hf_vlm.tiny import tiny_config

    rope = {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [16, 24, 24]}
    text = {"vocab_size": 151_936, "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
            "rope_parameters": rope, "max_position_embeddings": 32_768}  # fmt: skip
    vision = {"depth": 8, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 896,
              "fullatt_block_indexes": [3, 7]}  # fmt: skip
    return tiny_config(tokenizer, hidden=896, layers=16, text=text, vision=vision)


def build(directory: Path, tiny: bool = False) -> tuple[Path, int]:
    """Write the ~0.5B checkpoint (bf16) with the tiny model's tokenizer and a UI-TARS pixel cap
    (`tiny`: the tiny model's config instead, for a dry run of this check on a CPU)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from workers.policy.hf_vlm.tiny import TINY_MAX_PIXELS, TINY_MIN_PIXELS, build_tokenizer, tiny_config

    tokenizer = build_tokenizer()
    config = tiny_config(tokenizer) if tiny else scaled_config(tokenizer)
    config.flywheel_version = "0"
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.bfloat16)  # type: ignore[arg-type]
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    cap = TINY_MAX_PIXELS if tiny else MAX_PIXELS
    Qwen2VLImageProcessorPil(size={"shortest_edge": TINY_MIN_PIXELS, "longest_edge": cap}).save_pretrained(
        directory
    )
    return directory, sum(p.numel() for p in model.parameters())


def _screenshot(shade: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1280, 800), (235, 235, 235))
    draw = ImageDraw.Draw(img)
    for i in range(12):
        draw.rectangle(
            (40 + 100 * i, 80 + 40 * (i % 5), 120 + 100 * i, 110 + 40 * (i % 5)), fill=(shade, 90, 180)
        )
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def run(quick: bool = False, out: Path | None = None, device: str = "cuda") -> dict[str, Any]:
    """The check on `device`; "cpu" is a dry run with the tiny model (the code path, no figures)."""
    import torch

    from workers.envs.base import Observation
    from workers.policy.base import HistoryItem
    from workers.policy.hf_vlm import profile_for
    from workers.policy.hf_vlm.model import HFVLMPolicy, load_vlm, score
    from workers.policy.openai_client import chat_messages
    from workers.rl.config import RLConfig
    from workers.rl.samples import TrajectorySample, chat_step_sample_from
    from workers.rl.trainer.vlm import VLMPolicyTrainer

    cuda = device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check needs a GPU")

    def sync() -> None:
        if cuda:
            sync()

    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    checkpoint, params = build(work / "v0", tiny=not cuda)
    n, max_new, calls, updates = (4, 32, 3, 1) if quick else (8, 64, 6, 3)
    if not cuda:
        n, max_new, calls, updates = 2, 8, 2, 1  # a dry run: the code path, not figures
    dtype = torch.bfloat16 if cuda else torch.float32
    profile = profile_for(checkpoint, max_tokens=max_new, max_screenshots=2)
    model, tokenizer, image_processor = load_vlm(checkpoint, dtype=dtype, device=device)
    policy = HFVLMPolicy(model, tokenizer, image_processor, seed=0)
    rows, call_ms = [], []
    for i in range(calls + 1):  # the first call warms CUDA up and is not counted
        obs = Observation(screenshot=_screenshot(20 * i), width=1280, height=800, instruction="Open the settings.",
                          image_format="png")  # fmt: skip
        history = [HistoryItem("Look first.", "wait()", _screenshot(200), "png")]
        messages, _ = chat_messages(profile, obs, history, None)
        prompt = policy.encode(messages)
        sync()
        started = time.perf_counter()
        generated, _ = policy.generate(prompt, n=n, temperature=1.0, max_new_tokens=max_new)
        sync()
        if i:
            call_ms.append((time.perf_counter() - started) * 1e3)
        rows.append((obs, history, prompt, generated))
    proposals = n * calls
    diffs = []
    with torch.no_grad():
        for _, _, prompt, generated in rows[1:]:
            g = generated[0]
            s = score(model, prompt, g.token_ids, 1.0)
            diffs.append(float((s.logprobs - torch.tensor(g.logprobs)).abs().max()))
    samples = []
    for i, (obs, history, _, generated) in enumerate(rows[1:]):
        for j, g in enumerate(generated):
            step = chat_step_sample_from(
                profile=profile, instruction=obs.instruction, screenshot=obs.screenshot, width=1280, height=800,
                image_format="png", history=history, token_ids=g.token_ids, rollout_logprobs=g.logprobs,
                policy_version=0,
            )  # fmt: skip
            samples.append(TrajectorySample(f"{i}-{j}", f"t{i}", f"g{i}", [step], float(j % 2), bool(j % 2)))
    del policy, model
    if cuda:
        torch.cuda.empty_cache()
    config = RLConfig.model_validate(
        {"algorithm": "grpo", "grpo": {"lr": 1e-5, "entropy_keep_fraction": 1.0}}
    )
    trainer = VLMPolicyTrainer(checkpoint, config, vlm={"lora_rank": 16, "lora_alpha": 32, "device": device,
                                                         "dtype": str(dtype).removeprefix("torch.")})  # fmt: skip
    update_s, save_s = [], []
    for u in range(updates):
        sync()
        started = time.perf_counter()
        trainer.update(samples)
        sync()
        update_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        trainer.save(work / f"u{u + 1}", trainer.version)
        save_s.append(time.perf_counter() - started)
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    serving = HFVLMPolicy(*load_vlm(checkpoint, dtype=dtype, device=device))
    last = work / f"u{updates}"
    sync()
    started = time.perf_counter()
    serving.load_adapter(last / "adapter", "v-lora")
    sync()
    sync_lora = time.perf_counter() - started
    started = time.perf_counter()
    serving.set_model(load_vlm(last, dtype=dtype, device=device)[0])
    sync()
    sync_full = time.perf_counter() - started
    del serving
    if cuda:
        torch.cuda.empty_cache()
    full_trainer = VLMPolicyTrainer(
        checkpoint, config, vlm={"lora_rank": 0, "device": device, "dtype": str(dtype).removeprefix("torch.")}
    )
    sync()
    started = time.perf_counter()
    full_trainer.update(samples)
    sync()
    full_ft = time.perf_counter() - started
    result = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu (dry run, tiny model)",
        "torch": torch.__version__,
        "model": "Qwen2.5-VL architecture at ~0.5B (random weights, built from a config), bf16",
        "params": params,
        "screenshot": "1280x800, max_pixels 16384*28*28, 2 screenshots in context",
        "prompt_tokens": len(rows[1][2].ids),
        "candidates_per_call": n,
        "max_new_tokens": max_new,
        "proposals": proposals,
        "proposals_per_s": round(proposals / (sum(call_ms) / 1e3), 2),
        "propose_ms_p50": round(statistics.median(call_ms), 1),
        "logprob_max_abs_diff_bf16": max(diffs),
        "update_samples": len(samples),
        "update_s": round(statistics.median(update_s), 3),
        "full_ft_update_s": round(full_ft, 3),
        "save_s": round(statistics.median(save_s), 3),
        "sync_lora_s": round(sync_lora, 3),
        "sync_full_s": round(sync_full, 3),
        "peak_gpu_gib": round(peak_gib, 2),
        "quick": quick,
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Issue 23's GPU check of the HF VLM path")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--quick", action="store_true", help="fewer calls and one update")
    parser.add_argument(
        "--device", default="cuda", help="'cpu': a dry run of the code path with the tiny model"
    )
    args = parser.parse_args(argv)
    print(json.dumps(run(quick=args.quick, out=args.out, device=args.device)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
