"""Load Flywheel exports with their consumers' own code (run in the scratch venv of `make test-interop`).

    python scripts/interop/check.py EXPORT_DIR

EXPORT_DIR holds the unzipped archives: `verl/train.parquet` + `verl/sft.parquet`, `sharegpt/` (sharegpt.json,
dataset_info.json, images), `osworld/` (OSWorld's results tree). Checks, each with the consumer's
classes, on a Qwen2-VL-style tokenizer + processor built here from scratch (nothing downloaded):

- verl 0.9 `RLHFDataset`: every row survives its prompt filter (which tokenizes the prompt with the
  processor and its image), `__getitem__` gives the raw chat with the image and `index` from
  `extra_info`;
- verl 0.9 `MultiTurnSFTDataset` on `sft.parquet` (`messages` / `images`): every row tokenizes
  with a non-empty loss mask on the assistant turns;
- LLaMA-Factory 0.9.5 `get_dataset` (sharegpt, template `qwen2_vl`): every sample is tokenized with
  its images;
- OSWorld: its result reader's walk (`show_result.get_result`) and its `traj.jsonl` fields;
- HF `datasets.load_dataset` over every format's files (native JSONL, sharegpt, verl parquet).

Prints one line per check and a JSON summary; exits 1 on the first failure.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

QWEN2_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>",
]  # fmt: skip


def build_model_dir(root: Path, corpus: list[str]) -> Path:
    """A tiny Qwen2.5-VL model directory (config, tokenizer, processor; no weights), nothing
    downloaded: a byte-level BPE trained here on the export's own text with Qwen2-VL's special
    tokens and chat template, Qwen2-VL's image and video processors with their defaults."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator([*corpus, "Thought: Action: click(start_box='(1,2)')"], trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:], chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )  # fmt: skip
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(), tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(),
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )  # fmt: skip
    out = root / "tiny-qwen2_5-vl"
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # Flat keyword arguments as the interop venv's transformers (verl 0.9.1's pin) takes them; the project's
    # own transformers nests them under text_config, so they go through a dict here.
    flat: dict[str, Any] = dict(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
    )  # fmt: skip
    Qwen2_5_VLConfig(**flat).save_pretrained(out)
    return out


def load_processor(model_dir: Path) -> tuple[object, object]:
    """As verl loads them (verl.utils.hf_tokenizer / hf_processor)."""
    from verl.utils import hf_processor, hf_tokenizer

    return hf_tokenizer(str(model_dir)), hf_processor(str(model_dir))


def check_verl_rl(parquet: Path, tokenizer: object, processor: object) -> dict[str, int]:
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    rows = pq.read_table(parquet).num_rows
    config = OmegaConf.create(
        {"prompt_key": "prompt", "image_key": "images", "max_prompt_length": 200_000,
         "filter_overlong_prompts": True, "truncation": "error", "cache_dir": str(parquet.parent / "cache")}
    )  # fmt: skip
    dataset = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=config, processor=processor)
    # Its filter tokenizes each prompt with the processor (images included); a failing row is dropped.
    assert len(dataset) == rows, f"RLHFDataset kept {len(dataset)} of {rows} rows"
    indices, images = [], 0
    for i in range(len(dataset)):
        item = dataset[i]
        indices.append(item["index"])
        assert isinstance(item["extra_info"], dict) and item["index"] == item["extra_info"]["index"]
        truth = json.loads(item["reward_model"]["ground_truth"])
        assert "seed" in truth and truth["instruction"], truth
        content = item["raw_prompt"][0]["content"]
        if isinstance(content, list):
            images += sum(1 for c in content if c.get("type") == "image")
    assert sorted(indices) == list(range(rows)), f"indices {indices}"
    return {"rows": rows, "images": images}


def check_verl_sft(parquet: Path, tokenizer: object, processor: object) -> dict[str, int]:
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    config = OmegaConf.create(
        {"messages_key": "messages", "image_key": "images", "max_length": 200_000, "truncation": "error"}
    )  # fmt: skip
    dataset = MultiTurnSFTDataset(str(parquet), tokenizer=tokenizer, config=config, processor=processor)
    tokens = 0
    for i in range(len(dataset)):
        item = dataset[i]
        assert int(item["loss_mask"].sum()) > 0, f"row {i} has nothing to learn"
        tokens += int(item["attention_mask"].sum())
    return {"rows": len(dataset), "tokens": tokens}


def check_llamafactory(dataset_dir: Path, model_dir: Path, work: Path) -> dict[str, int]:
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    samples = json.loads((dataset_dir / "sharegpt.json").read_text())
    model_args, data_args, training_args, _, _ = get_train_args(
        {"model_name_or_path": str(model_dir), "stage": "sft", "do_train": True, "finetuning_type": "full",
         "dataset": "flywheel", "dataset_dir": str(dataset_dir), "template": "qwen2_vl", "cutoff_len": 200_000,
         "output_dir": str(work / "lf-out"), "overwrite_cache": True, "preprocessing_num_workers": 1,
         "report_to": "none", "image_max_pixels": 1_000_000}
    )  # fmt: skip
    module = load_tokenizer(model_args)
    assert module["processor"] is not None, "LLaMA-Factory did not load the processor"
    template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
    os.chdir(dataset_dir)  # image paths in sharegpt.json are relative to the archive root
    data = get_dataset(template, model_args, data_args, training_args, stage="sft", **module)
    train = data["train_dataset"]
    assert len(train) == len(samples), f"LLaMA-Factory kept {len(train)} of {len(samples)} samples"
    image_id = module["tokenizer"].convert_tokens_to_ids("<|image_pad|>")
    with_images = sum(1 for row in train if image_id in row["input_ids"])
    assert with_images == sum(1 for s in samples if s["images"]), "an image was not tokenized"
    return {"samples": len(train), "with_images": with_images}


def check_osworld(results: Path) -> dict[str, float]:
    """OSWorld's `show_result.get_result` walk (<model>/<domain>/<example>/result.txt) and the
    fields of `traj.jsonl` as `lib_run_single` writes them."""
    target = results / "pyautogui" / "screenshot" / "flywheel"
    scores, examples, lines = [], 0, 0
    for domain in os.listdir(target):
        for example in os.listdir(target / domain):
            path = target / domain / example
            examples += 1
            for raw in (path / "traj.jsonl").read_text().splitlines():
                line = json.loads(raw)
                lines += 1
                datetime.strptime(line["action_timestamp"], "%Y%m%d@%H%M%S")
                assert (path / line["screenshot_file"]).is_file(), line["screenshot_file"]
                if line["action"] not in ("", "WAIT", "DONE", "FAIL"):
                    ast.parse(line["action"])  # pyautogui code OSWorld can exec
                assert set(line) >= {"step_num", "action", "response", "reward", "done", "info"}
            if "result.txt" in os.listdir(path):
                scores.append(float((path / "result.txt").read_text()))
    assert scores, "no finished example"
    return {
        "examples": examples,
        "lines": lines,
        "results": len(scores),
        "success_rate": sum(scores) / len(scores),
    }


def check_hf_datasets(root: Path) -> dict[str, int]:
    """Every format through HF `datasets.load_dataset`, as trainers' loaders read them: the native
    JSONL, the sharegpt JSON, both verl parquet files (rows as written)."""
    from datasets import load_dataset

    files = {
        "jsonl": ("json", root / "jsonl" / "trajectories.jsonl"),
        "sharegpt": ("json", root / "sharegpt" / "sharegpt.json"),
        "verl train": ("parquet", root / "verl" / "train.parquet"),
        "verl sft": ("parquet", root / "verl" / "sft.parquet"),
    }
    rows: dict[str, int] = {}
    for name, (builder, path) in files.items():
        if not path.exists():
            continue
        data = load_dataset(builder, data_files=[str(path)], split="train", cache_dir=str(root / ".hf-cache"))
        assert len(data) > 0, f"{name}: no rows"
        rows[name] = len(data)
    return rows


def main(export_dir: str) -> int:
    root = Path(export_dir).resolve()
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = [m["content"] for s in json.loads((root / "sharegpt" / "sharegpt.json").read_text())
                  for m in s["messages"]]  # fmt: skip
        model_dir = build_model_dir(work, corpus)
        tok, proc = load_processor(model_dir)
        checks = [
            ("verl RLHFDataset", lambda: check_verl_rl(root / "verl" / "train.parquet", tok, proc)),
            ("verl MultiTurnSFTDataset", lambda: check_verl_sft(root / "verl" / "sft.parquet", tok, proc)),
            ("LLaMA-Factory get_dataset sharegpt/qwen2_vl",
             lambda: check_llamafactory(root / "sharegpt", model_dir, work)),
            ("OSWorld result reader + traj.jsonl", lambda: check_osworld(root / "osworld")),
            ("HF datasets.load_dataset", lambda: check_hf_datasets(root)),
        ]  # fmt: skip
        for name, run in checks:
            try:
                result = run()
            except Exception as exc:  # report which consumer refused the export, and why
                print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
                raise
            summary[name] = result
            print(f"ok   {name}: {json.dumps(result)}", flush=True)
    import llamafactory
    import transformers
    import verl

    versions = {"verl": verl.__version__, "llamafactory": llamafactory.__version__,
                "transformers": transformers.__version__}  # fmt: skip
    print(json.dumps({"interop": "ok", "versions": versions, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
