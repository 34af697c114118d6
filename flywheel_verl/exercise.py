"""Exercise the agent loop with verl's own classes on a CPU (issue 23: "as far as a CPU allows").

    <verl venv>/bin/python -m flywheel_verl.exercise CHECKPOINT [--episodes 2] [--max-turns 3] [--rows PARQUET]

The episodes' tasks and seeds come from dataset rows as Flywheel writes them (`--rows`: a
`verl_submit` job's tasks.parquet or an export's train.parquet; default: a job written by
`job_files`), read with HF `datasets` as verl's RLHFDataset reads them.

What is verl's here: `FlywheelGUIAgentLoop` is built as verl's AgentLoopWorker builds it (the job's
agent_loop.yaml through `hydra.utils.instantiate`), by verl's `AgentLoopBase.__init__` with verl's
`DictConfigWrap` config, `RLHFDataset` class and verl's Qwen2.5-VL Continuous Token builder
(prompt rendering, assistant / observation merging, response masks and log-prob alignment), and
returns verl's `AgentLoopOutput` (`as_dict()` gives the tensors verl's trainer batches).

What stands in for a GPU: verl's rollout server manager (`LLMServerClient`, Ray actors of vLLM or
SGLang replicas) needs a GPU; `TransformersServer` answers the same `generate(prompt_ids,
sampling_params, image_data) -> TokenOutput` with the tiny Qwen2.5-VL on CPU through
workers.policy.hf_vlm (the same sampling code as Flywheel's policy server). The environment is a
real MiniWoB++ page in Chromium (`LocalEnvs`); with a Flywheel install, `FleetEnvs` leases env
hosts instead. The tiny model's processor is assembled without its video processor (torchvision is
not installed on this machine). Not exercised here: verl's trainer (FSDP / Megatron actor update),
its vLLM replicas, Ray placement — they need GPUs.

Prints one JSON line per episode: turns, response tokens, masked (observation) tokens, reward, and
the largest |log-prob| difference between the rollout's and a recomputation by the model over verl's
final token stream (the actor's view), which must be ~0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def _processor(directory: Path) -> Any:
    """The checkpoint's processor as verl loads it; without torchvision (no video processor can be
    built) an image-only processor assembled from the same parts."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(directory)
    from transformers import AutoTokenizer, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer = AutoTokenizer.from_pretrained(directory)
    processor = object.__new__(Qwen2_5_VLProcessor)  # no video processor: torchvision is absent
    processor.image_processor = Qwen2VLImageProcessorPil.from_pretrained(directory)
    processor.tokenizer, processor.video_processor, processor.chat_template = (
        tokenizer,
        None,
        tokenizer.chat_template,
    )
    processor.image_token, processor.video_token = "<|image_pad|>", "<|video_pad|>"
    processor.image_token_id = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    processor.video_token_id = tokenizer.convert_tokens_to_ids("<|video_pad|>")
    return processor


class TransformersServer:
    """verl's server-manager interface, answered by transformers on CPU (stands in for vLLM)."""

    def __init__(self, directory: Path, processor: Any) -> None:
        from workers.policy.hf_vlm.model import HFVLMPolicy

        self.policy = HFVLMPolicy.from_pretrained(directory, seed=0)
        self.processor = processor

    def inputs(self, prompt_ids: list[int], image_data: list[Any] | None) -> Any:
        from workers.policy.hf_vlm.model import PromptInputs

        if not image_data:
            return PromptInputs(list(prompt_ids), None, None)
        out = self.processor.image_processor(images=image_data, return_tensors="pt")
        return PromptInputs(list(prompt_ids), out["pixel_values"].float(), out["image_grid_thw"])

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: list[Any] | None = None, **_: Any) -> Any:  # fmt: skip
        from verl.workers.rollout.replica import TokenOutput

        prompt = self.inputs(prompt_ids, image_data)
        rows, _stop = await asyncio.to_thread(
            self.policy.generate, prompt, 1, float(sampling_params.get("temperature", 1.0)), 0,
            int(sampling_params.get("max_tokens", 16)),
        )  # fmt: skip
        return TokenOutput(token_ids=rows[0].token_ids, log_probs=rows[0].logprobs, stop_reason="completed")


async def _main(args: argparse.Namespace) -> list[dict[str, Any]]:
    import hydra.utils
    import torch
    from datasets import load_dataset
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from flywheel_verl.agent_loop import FlywheelGUIAgentLoop
    from flywheel_verl.envs import LocalEnvs
    from workers.policy.hf_vlm.model import score
    from workers.rl.verl_rows import AGENT_NAME

    directory = Path(args.checkpoint)
    processor = _processor(directory)
    server = TransformersServer(directory, processor)
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 2048}},
        "data": {"apply_chat_template_kwargs": {}},
        "flywheel": {"envs": "local", "env_kind": "browser", "max_turns": args.max_turns},
    })  # fmt: skip
    envs = LocalEnvs("browser")
    job = _job(args)
    # as verl's AgentLoopWorker builds it: the job's agent-loop registration through hydra
    (registration,) = [c for c in OmegaConf.load(job["agent_loop"]) if c.name == AGENT_NAME]
    loop = hydra.utils.instantiate(
        config=registration, trainer_config=DictConfigWrap(config), server_manager=server,
        tokenizer=processor.tokenizer, processor=processor, dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data), hf_model_type="qwen2_5_vl", envs=_KeepOpen(envs),
    )  # fmt: skip
    assert isinstance(loop, FlywheelGUIAgentLoop)
    results = []
    try:
        rows = load_dataset("parquet", data_files=[str(args.rows or job["dataset"])], split="train")
        for episode, row in enumerate(list(rows)[: args.episodes]):
            # as verl's agent-loop worker does: the dataset row's non-tensor fields become run()'s kwargs
            out = await loop.run({"temperature": 1.0, "max_tokens": 12}, extra_info=row["extra_info"])
            batch = out.as_dict()
            # the actor's view: the whole token stream with every screenshot, scored in one pass
            ids = list(out.prompt_ids) + list(out.response_ids)
            prompt = server.inputs(out.prompt_ids, out.multi_modal_data["images"])
            with torch.no_grad():
                s = score(server.policy.model, prompt, list(out.response_ids), 1.0)
            generated = [i for i, m in enumerate(out.response_mask) if m == 1]
            rollout = torch.tensor([out.response_logprobs[i] for i in generated])
            diff = float((s.logprobs[generated] - rollout).abs().max()) if generated else 0.0
            results.append({
                "episode": episode, "turns": out.extra_fields["turns"], "prompt_tokens": len(out.prompt_ids),
                "response_tokens": len(out.response_ids), "model_tokens": len(generated),
                "observation_tokens": len(out.response_ids) - len(generated), "images": len(out.multi_modal_data["images"]),
                "reward": out.reward_score, "total_tokens": len(ids), "tensor_keys": sorted(batch),
                "logprob_max_abs_diff_vs_actor_view": diff,
            })  # fmt: skip
    finally:
        envs.close()
    return results


def _job(args: argparse.Namespace) -> dict[str, Path]:
    """A job written by flywheel_verl.submit.job_files (as `verl_submit` writes it) for two MiniWoB++
    tasks: its dataset (unless `--rows` names other rows) and its agent-loop registration."""
    import tempfile

    from flywheel_verl.submit import job_files

    tasks = [{"task_id": name, "instruction": "", "kind": "browser", "source": "miniwob",
              "setup": {"task": name}} for name in ("click-button", "click-test")]  # fmt: skip
    return job_files(Path(tempfile.mkdtemp(prefix="flywheel-verl-job-")), tasks=tasks, seeds=args.episodes,
                     model_path=args.checkpoint, run_id=0)  # fmt: skip


class _KeepOpen:
    """One browser for all episodes: the loop's close() ends an episode, not the page."""

    def __init__(self, envs: Any) -> None:
        self.envs = envs

    def open(self, task: dict[str, Any], seed: int) -> Any:
        return self.envs.open(task, seed)

    def step(self, action: dict[str, Any]) -> Any:
        return self.envs.step(action)

    def evaluate(self) -> float:
        return self.envs.evaluate()

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--rows", help="a verl_submit tasks.parquet or an export's train.parquet")
    args = parser.parse_args(argv)
    for row in asyncio.run(_main(args)):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
