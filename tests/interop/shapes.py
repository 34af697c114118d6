"""The row shapes the field's trainers read, written from their code, checked without their packages
(the light half of `make test-interop`; the heavy half loads the same files with the consumers
themselves in scripts/interop/check.py). Each checker raises ShapeError naming the file, the row and
what the consumer would do with it.

- verl 0.9 `RLHFDataset` (verl/utils/dataset/rl_dataset.py): `prompt` a list of chat messages whose
  string content is split on `<image>|<video>|<audio>`, each placeholder taking the next entry of
  `images` / `videos` / `audios` and asserting the counts match (`_build_messages`); `extra_info`
  read with `.get("index")`, `.get("tools_kwargs")` (`__getitem__`: a str fails); `reward_model`
  indexed `["ground_truth"]` by the reward manager; `data_source` passed to the scorer. The columns
  of verl's own preprocessors (examples/data_preprocess): data_source, prompt, ability,
  reward_model {style, ground_truth}, extra_info {split, index, ...}.
- verl 0.9 `MultiTurnSFTDataset` (multiturn_sft_dataset.py): `messages` (chat messages, loss on the
  assistant turns) and `images`, placeholders counted the same way.
- LLaMA-Factory 0.9.5 (data/parser.py, converter.py, mm_plugin.py): `dataset_info.json` names the
  file, `formatting: sharegpt`, `columns` and `tags`; `SharegptDatasetConverter` accepts the user /
  observation tag at even positions and the assistant / function tag at odd ones and an even count,
  else it drops the sample; image paths are joined to the dataset dir; `_validate_input` fails the
  whole dataset when a sample's `<image>` count differs from its images.
- OSWorld (lib_run_single.py, show_result.py): results/<action_space>/<observation_type>/<model>/
  <domain>/<example>/ with `traj.jsonl` lines {step_num, action_timestamp %Y%m%d@%H%M%S, action
  (pyautogui code, or WAIT / DONE / FAIL), response, reward, done, info, screenshot_file} and
  `result.txt` holding one float.

Every chat-template text must also hold no special token of the Qwen / ChatML family (`<|...|>`):
a tokenizer reads it as the token itself (workers.rl.verl_rows.escape_chat_text).
"""

from __future__ import annotations

import ast
import io
import json
import re
from datetime import datetime
from typing import Any

PLACEHOLDER = re.compile(r"<(image|video|audio)>")
SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,64}\|>")
CHAT_ROLES = {"system", "user", "assistant", "tool"}
OSWORLD_TERMINAL = {"", "WAIT", "DONE", "FAIL"}
OSWORLD_FIELDS = {
    "step_num",
    "action_timestamp",
    "action",
    "response",
    "reward",
    "done",
    "info",
    "screenshot_file",
}


class ShapeError(AssertionError):
    pass


def _fail(where: str, what: str) -> None:
    raise ShapeError(f"{where}: {what}")


def check_chat_text(where: str, text: Any, images: int) -> None:
    """A message's content as a chat template and a multimodal loader read it: a string, exactly
    `images` image placeholders, no video / audio placeholder, no special token."""
    if not isinstance(text, str):
        _fail(where, f"content is {type(text).__name__}, not a string")
    kinds = PLACEHOLDER.findall(text)
    if kinds.count("image") != images:
        _fail(
            where,
            f"{kinds.count('image')} <image> placeholders for {images} images (verl asserts, LLaMA-Factory fails)",
        )
    if set(kinds) - {"image"}:
        _fail(where, f"a <{sorted(set(kinds) - {'image'})[0]}> placeholder with no such media")
    if token := SPECIAL_TOKEN.search(text):
        _fail(where, f"special token {token.group()!r} in free text")


def _messages(where: str, messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        _fail(where, "messages must be a non-empty list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            _fail(f"{where} message {i}", f"must be {{role, content}}, got {message!r:.80}")
        if message["role"] not in CHAT_ROLES:
            _fail(f"{where} message {i}", f"role {message['role']!r}")
    return messages


def _images_in(where: str, messages: list[dict[str, Any]], images: int) -> None:
    text = "".join(m["content"] if isinstance(m["content"], str) else "" for m in messages)
    check_chat_text(where, text, images)


def _verl_images(where: str, images: Any) -> int:
    if images is None:
        return 0
    if not isinstance(images, list):
        _fail(where, "images must be a list")
    for image in images:
        if not isinstance(image, dict) or not isinstance(image.get("bytes"), bytes) or not image["bytes"]:
            _fail(
                where, "each image must be {bytes, path} with the encoded image (verl opens image['bytes'])"
            )
    return len(images)


def check_verl_rl_row(where: str, row: dict[str, Any]) -> dict[str, Any]:
    """One row of train.parquet as RLHFDataset, its reward manager and Flywheel's agent loop read it;
    returns its `extra_info`."""
    for column in ("data_source", "prompt", "ability", "reward_model", "extra_info"):
        if column not in row:
            _fail(where, f"no {column!r} column")
    if not isinstance(row["data_source"], str) or not row["data_source"]:
        _fail(where, "data_source must be a non-empty string")
    if not isinstance(row["ability"], str):
        _fail(where, "ability must be a string")
    reward = row["reward_model"]
    if (
        not isinstance(reward, dict)
        or not isinstance(reward.get("style"), str)
        or "ground_truth" not in reward
    ):
        _fail(where, "reward_model must be a struct {style, ground_truth}")
    extra = row["extra_info"]
    if not isinstance(extra, dict):
        _fail(where, f"extra_info is {type(extra).__name__}: RLHFDataset calls extra_info.get(...)")
    if not isinstance(extra.get("index"), int):
        _fail(where, "extra_info.index must be an int (RLHFDataset's `index`)")
    task = json.loads(extra["flywheel_task"]) if isinstance(extra.get("flywheel_task"), str) else None
    if not isinstance(task, dict) or not task.get("kind"):
        _fail(where, "extra_info.flywheel_task must be the task on the wire (the agent loop's input)")
    if not isinstance(extra.get("seed"), int):
        _fail(where, "extra_info.seed must be an int: the row cannot re-create its episode")
    messages = _messages(where, row["prompt"])
    _images_in(f"{where} prompt", messages, _verl_images(where, row.get("images")))
    return extra


def check_verl_sft_row(where: str, row: dict[str, Any]) -> None:
    """One row of sft.parquet as MultiTurnSFTDataset reads it."""
    messages = _messages(where, row.get("messages"))
    if not any(m["role"] == "assistant" for m in messages):
        _fail(where, "no assistant turn: nothing to learn (empty loss mask)")
    _images_in(f"{where} messages", messages, _verl_images(where, row.get("images")))


def check_verl_parquet(train: bytes, sft: bytes) -> dict[str, int]:
    """Both verl files, read as verl reads them (pyarrow -> rows): column types first (a struct reads
    back as a dict, a string never does), then every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(train))
    for column in ("extra_info", "reward_model"):
        if not pa.types.is_struct(table.schema.field(column).type):
            _fail(f"train.parquet {column}", f"type {table.schema.field(column).type}, not a struct")
    prompt = table.schema.field("prompt").type
    if not (pa.types.is_list(prompt) and pa.types.is_struct(prompt.value_type)):
        _fail("train.parquet prompt", f"type {prompt}, not a list of {{role, content}}")
    indices = [
        check_verl_rl_row(f"train.parquet row {i}", row)["index"] for i, row in enumerate(table.to_pylist())
    ]
    if sorted(indices) != list(range(len(indices))):
        _fail("train.parquet", f"extra_info.index is not 0..{len(indices) - 1}")
    sft_rows = pq.read_table(io.BytesIO(sft)).to_pylist()
    for i, row in enumerate(sft_rows):
        check_verl_sft_row(f"sft.parquet row {i}", row)
    return {"train": len(indices), "sft": len(sft_rows)}


def check_sharegpt(files: dict[str, bytes]) -> dict[str, int]:
    """`dataset_info.json` and the file it names, as LLaMA-Factory's parser and sharegpt converter
    read them; `files` maps archive member names to their bytes (image paths resolve in it)."""
    info = json.loads(files["dataset_info.json"])
    if not isinstance(info, dict) or not info:
        _fail("dataset_info.json", "must map dataset names to their attributes")
    samples = 0
    for name, attr in info.items():
        where = f"dataset_info.json {name}"
        if attr.get("formatting") != "sharegpt" or attr.get("file_name") not in files:
            _fail(where, "needs formatting 'sharegpt' and a file_name in the archive")
        columns, tags = attr.get("columns") or {}, attr.get("tags") or {}
        key, image_key = columns.get("messages", "conversations"), columns.get("images")
        role, content = tags.get("role_tag", "from"), tags.get("content_tag", "value")
        odd = (tags.get("user_tag", "human"), tags.get("observation_tag", "observation"))
        even = (tags.get("assistant_tag", "gpt"), tags.get("function_tag", "function_call"))
        data = json.loads(files[attr["file_name"]])
        if not isinstance(data, list):
            _fail(attr["file_name"], "must be a JSON list of samples")
        for i, sample in enumerate(data):
            where = f"{attr['file_name']} sample {i}"
            turns = sample.get(key)
            if not isinstance(turns, list) or not turns or len(turns) % 2:
                _fail(where, "needs an even, non-zero number of turns (the converter drops it)")
            for t, turn in enumerate(turns):
                if turn.get(role) not in (odd, even)[t % 2]:
                    _fail(
                        f"{where} turn {t}", f"role {turn.get(role)!r} out of turn (the converter drops it)"
                    )
            images = sample.get(image_key) or [] if image_key else []
            for path in images:
                if not isinstance(path, str) or path not in files:
                    _fail(where, f"image {path!r} is not in the archive")
            check_chat_text(where, "".join(str(turn.get(content)) for turn in turns), len(images))
            for turn in turns:
                check_chat_text(where, turn.get(content), turn.get(content, "").count("<image>"))
            samples += 1
    return {"samples": samples}


def check_osworld(files: dict[str, bytes], root: str = "pyautogui/screenshot/flywheel") -> dict[str, int]:
    """OSWorld's results tree: every example folder under <root>/<domain>/ has a traj.jsonl of
    `lib_run_single`'s lines (screenshots present, actions OSWorld can exec) and, when scored, a
    result.txt with one float, as `show_result.get_result` reads it."""
    examples: dict[str, set[str]] = {}
    for name in files:
        parts = name.split("/")
        if name.startswith(root + "/") and len(parts) == root.count("/") + 4:
            examples.setdefault("/".join(parts[:-1]), set()).add(parts[-1])
    results = 0
    for folder, names in examples.items():
        if "traj.jsonl" not in names:
            _fail(folder, "no traj.jsonl")
        for n, raw in enumerate(files[f"{folder}/traj.jsonl"].decode().split("\n")):
            if not raw:
                continue
            line = json.loads(raw)
            where = f"{folder}/traj.jsonl line {n + 1}"
            if set(line) != OSWORLD_FIELDS:
                _fail(where, f"fields {sorted(line)}")
            if line["action_timestamp"] is not None:
                datetime.strptime(line["action_timestamp"], "%Y%m%d@%H%M%S")
            if line["screenshot_file"] is not None and line["screenshot_file"] not in names:
                _fail(where, f"screenshot {line['screenshot_file']!r} is missing")
            if line["action"] not in OSWORLD_TERMINAL:
                try:
                    ast.parse(line["action"])
                except SyntaxError as exc:
                    _fail(where, f"action is not Python OSWorld can exec: {exc}")
        if "result.txt" in names:
            float(files[f"{folder}/result.txt"].decode())
            results += 1
    return {"examples": len(examples), "results": results}


def check_jsonl(data: bytes) -> list[dict[str, Any]]:
    """The native JSONL: one JSON object per '\\n'-separated line, also when split by readers that
    break lines at every Unicode line boundary (str.splitlines)."""
    text = data.decode()
    lines = [x for x in text.split("\n") if x]
    if [x for x in text.splitlines() if x] != lines:
        _fail("trajectories.jsonl", "a record holds a raw Unicode line separator (U+2028, U+0085, ...)")
    return [json.loads(x) for x in lines]


def archive_files(zf: Any) -> dict[str, bytes]:
    return {name: zf.read(name) for name in zf.namelist()}
