"""verl dataset rows: the one builder the export and `verl_submit` write with, and the one reader the
agent loop (flywheel_verl.agent_loop) takes its task from; plus the escaping every chat-template text
goes through.

A verl RL row (`RLHFDataset` of verl 0.9): `data_source`, `prompt` (chat messages), `images`,
`ability`, `reward_model` {style, ground_truth}, `agent_name`, and `extra_info` — a struct (read back
as a dict; verl calls `extra_info.get(...)`), never a JSON string. `extra_info.flywheel_task` is the
task on Flywheel's wire as a JSON string (tasks of different kinds have different shapes, which one
parquet struct cannot hold) and `extra_info.seed` the environment seed that re-creates the episode.
"""

from __future__ import annotations

import json
import re
from typing import Any

AGENT_NAME = "flywheel_gui"

# Text that a chat template or a multimodal loader reads as markup: image/video/audio placeholders
# (LLaMA-Factory and verl count `<image>` in a message against the sample's images) and special
# tokens of the Qwen / ChatML family (`<|im_start|>`, `<|vision_start|>`, `<|image_pad|>`, ...).
_MARKUP = re.compile(r"<(?=/?(?:image|video|audio)>)|<(?=\|[^|<>\s]{1,64}\|>)", re.IGNORECASE)
_ZWSP = "\u200b"


def escape_chat_text(text: str | None) -> str:
    """`text` with every placeholder or template token defused by a zero-width space after its `<`
    (`<image>` → `<\u200bimage>`): it reads the same to a person and no tokenizer or loader takes it
    for markup. Apply to every free text that reaches a chat template (instructions, thoughts,
    typed text, transcripts); never to the placeholders the writer itself inserts."""
    return _MARKUP.sub("<" + _ZWSP, text or "")


def rl_row(
    *,
    index: int,
    data_source: str,
    instruction: str,
    task: dict[str, Any],
    seed: int | None,
    env_kind: str,
    images: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One verl RL row. `images`: the prompt's screenshots ({bytes, path}); the prompt carries one
    `<image>` per image before the (escaped) instruction; None: the row has no `images` column (the
    agent loop takes its screens from the environment). `extra`: more `extra_info` fields."""
    content = "<image>" * len(images or []) + escape_chat_text(instruction)
    ground_truth = {"task": task, "seed": seed, "env_kind": env_kind, "instruction": instruction}
    row: dict[str, Any] = {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": content}],
        **({"images": images} if images is not None else {}),
        "ability": env_kind,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(ground_truth, ensure_ascii=False)},
        "agent_name": AGENT_NAME,
        "extra_info": {
            "index": index,
            "split": "train",
            "flywheel_task": json.dumps(task, ensure_ascii=False),
            "seed": seed,
            **(extra or {}),
        },
    }
    return row


def task_from_extra(extra: Any) -> tuple[dict[str, Any], int]:
    """The (task, seed) an RL row's `extra_info` names; ValueError with the reason when it names none.
    Accepts what `rl_row` writes (the task as a JSON string) and a task given as a dict."""
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError as exc:
            raise ValueError(f"extra_info is not a struct or JSON object: {exc}") from None
    if not isinstance(extra, dict):
        raise ValueError(
            "each row needs extra_info.flywheel_task (the task as Flywheel sends it to env hosts)"
        )
    task = extra.get("flywheel_task")
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            task = None
    if not isinstance(task, dict) or not task.get("kind"):
        raise ValueError(
            "each row needs extra_info.flywheel_task (the task as Flywheel sends it to env hosts)"
        )
    seed = extra.get("seed")
    if seed is None:
        raise ValueError("extra_info.seed is missing: the row cannot re-create its episode")
    return task, int(seed)
