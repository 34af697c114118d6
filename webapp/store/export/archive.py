"""Archive exports (zip with images) in the formats trainers read (SPEC §6).

Each writer consumes trajectory records one at a time and writes into an open ZipFile, so memory
stays bounded by one trajectory plus its images.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.core.files.storage import default_storage
from PIL import Image

from webapp.store.export.records import json_line
from workers.actions.coords import screen_actions
from workers.actions.pyautogui_code import to_pyautogui
from workers.actions.types import Action
from workers.rl.verl_rows import escape_chat_text, rl_row

ProgressFn = Callable[[int], bool]  # called with trajectories done; returns False to stop


def _image_bytes(name: str) -> bytes | None:
    try:
        with default_storage.open(name, "rb") as fh:
            return fh.read()
    except (FileNotFoundError, OSError):
        return None


def _as_png(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as img:
        out = io.BytesIO()
        img.save(out, format="PNG")
        return out.getvalue()


def _ext(name: str) -> str:
    """The stored file's extension, reduced to letters and digits (it becomes part of a member name)."""
    ext = re.sub(r"[^a-z0-9]", "", name.rsplit(".", 1)[-1].lower())[:8] if "." in name else ""
    return ext or "bin"


def _copy_images(zf: zipfile.ZipFile, record: dict[str, Any], folder: str) -> list[str | None]:
    """Copy each step's screenshot into the archive; returns archive paths (None if missing)."""
    paths: list[str | None] = []
    for step in record["steps"]:
        name = step["screenshot"]
        data = _image_bytes(name) if name else None
        if data is None:
            paths.append(None)
            continue
        path = f"{folder}/step_{step['index']:04d}.{_ext(name)}"
        zf.writestr(path, data)
        paths.append(path)
    return paths


@contextmanager
def _member_later(zf: zipfile.ZipFile, name: str):
    """A file to write an index member into while images are added to the zip; the zip allows only
    one open writer, so the index goes to a temporary file and joins the archive at the end."""
    with tempfile.TemporaryFile() as tmp:
        yield tmp
        tmp.seek(0)
        with zf.open(name, "w", force_zip64=True) as member:
            shutil.copyfileobj(tmp, member, 1024 * 1024)


def _assistant_text(step: dict[str, Any]) -> str:
    """`Thought: … Action: …`, escaped for a chat template (workers.rl.verl_rows.escape_chat_text)."""
    thought = escape_chat_text(step.get("human_thought_refined") or step.get("thought") or "")
    action = escape_chat_text(step.get("action_text") or "")
    return f"Thought: {thought}\nAction: {action}" if thought else f"Action: {action}"


def write_native_jsonl(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    done = 0
    with _member_later(zf, "trajectories.jsonl") as out:
        for record in records:
            paths = _copy_images(zf, record, f"images/t{record['id']}")
            for step, path in zip(record["steps"], paths, strict=True):
                step["screenshot"] = path
            final = record.get("final_screenshot")
            data = _image_bytes(final) if final else None
            record["final_screenshot"] = None
            if data is not None:
                record["final_screenshot"] = f"images/t{int(record['id'])}/final.{_ext(str(final))}"
                zf.writestr(record["final_screenshot"], data)
            out.write((json_line(json.dumps(record, ensure_ascii=False)) + "\n").encode())
            done += 1
            if not progress(done):
                break
    return done


def write_sharegpt(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    """LLaMA-Factory sharegpt multimodal: one sample per trajectory, a user turn with one <image> per
    screenshot and an assistant turn with `Thought: … Action: …` per step."""
    done = 0
    with _member_later(zf, "sharegpt.json") as out:
        out.write(b"[\n")
        first = True
        for record in records:
            paths = _copy_images(zf, record, f"images/t{record['id']}")
            messages: list[dict[str, str]] = []
            images: list[str] = []
            for i, (step, path) in enumerate(zip(record["steps"], paths, strict=True)):
                prefix = f"{escape_chat_text(record['instruction'])}\n" if i == 0 else ""
                if path is not None:
                    messages.append({"role": "user", "content": f"{prefix}<image>"})
                    images.append(path)
                else:
                    messages.append({"role": "user", "content": prefix or "(no screenshot)"})
                messages.append({"role": "assistant", "content": _assistant_text(step)})
            if messages:
                sample = {"messages": messages, "images": images, "trajectory_id": record["id"]}
                out.write((b"" if first else b",\n") + json.dumps(sample, ensure_ascii=False).encode())
                first = False
            done += 1
            if not progress(done):
                break
        out.write(b"\n]\n")
    dataset_info = {
        "flywheel": {
            "file_name": "sharegpt.json",
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
            },
        }
    }
    zf.writestr("dataset_info.json", json.dumps(dataset_info, indent=2))
    return done


def _verl_rows(
    record: dict[str, Any], index: int, step_images: list[dict[str, Any]], task: dict[str, Any]
) -> tuple[dict, dict | None]:
    """The trajectory's verl RL row (workers.rl.verl_rows.rl_row, as `verl_submit` writes them: the
    instruction with its first screen, `extra_info.flywheel_task` = `task` on the wire and the seed
    that re-create the episode), and its multi-turn SFT row (None without steps): every step a user
    turn with its screen and an assistant turn `Thought: … Action: …` (`MultiTurnSFTDataset`'s
    default keys `messages` / `images`)."""
    seed = (record.get("metadata") or {}).get("seed")
    extra = {
        "trajectory_id": record["id"],
        "task_id": record["task_id"],
        "final_reward": record["final_reward"],
        "validation": record["validation"],
        "actions": [s["action_text"] for s in record["steps"]],
    }
    rl = rl_row(
        index=index, data_source=f"flywheel/{record['pool']}", instruction=record["instruction"], task=task,
        seed=seed, env_kind=record["env_kind"], images=step_images[:1], extra=extra,
    )  # fmt: skip
    if not record["steps"]:
        return rl, None
    shown = {image["path"] for image in step_images}
    messages: list[dict[str, str]] = []
    for i, step in enumerate(record["steps"]):
        screen = "<image>" if step["screenshot"] in shown else ""
        text = escape_chat_text(record["instruction"]) if i == 0 else ""
        messages.append({"role": "user", "content": f"{screen}{text}" or "(no screenshot)"})
        messages.append({"role": "assistant", "content": _assistant_text(step)})
    return rl, {"messages": messages, "images": step_images, "extra_info": rl["extra_info"]}


def _wire_tasks() -> Callable[[int], dict[str, Any]]:
    """task pk → the task on the wire (webapp.store.taskspec), each task read once per export."""
    from webapp.store.models import Task
    from webapp.store.taskspec import task_spec_wire

    cache: dict[int, dict[str, Any]] = {}

    def wire(task_id: int) -> dict[str, Any]:
        if task_id not in cache:
            cache[task_id] = task_spec_wire(Task.objects.get(pk=task_id))
        return cache[task_id]

    return wire


def _verl_schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    extra = pa.struct(
        [("index", pa.int64()), ("split", pa.string()), ("flywheel_task", pa.string()), ("seed", pa.int64()),
         ("trajectory_id", pa.int64()), ("task_id", pa.int64()), ("final_reward", pa.float64()),
         ("validation", pa.int64()), ("actions", pa.list_(pa.string()))]
    )  # fmt: skip
    rl = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(message)),
            ("images", pa.list_(image)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("agent_name", pa.string()),
            ("extra_info", extra),
        ]
    )
    sft = pa.schema([("messages", pa.list_(message)), ("images", pa.list_(image)), ("extra_info", extra)])
    return rl, sft


def write_verl_parquet(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    """verl data: `train.parquet`, one RL row per trajectory as verl 0.9's `RLHFDataset` reads it,
    and `sft.parquet`, one row per trajectory with steps for its `MultiTurnSFTDataset` (see
    `_verl_rows`). A row's task is the one its episode was reset with (`metadata.episode.task`),
    the stored task's only for trajectories recorded before that was kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rl_schema, sft_schema = _verl_schemas()
    wire_task = _wire_tasks()
    sinks = {"train.parquet": io.BytesIO(), "sft.parquet": io.BytesIO()}
    writers = {
        "train.parquet": pq.ParquetWriter(sinks["train.parquet"], rl_schema),
        "sft.parquet": pq.ParquetWriter(sinks["sft.parquet"], sft_schema),
    }
    batches: dict[str, list[dict[str, Any]]] = {"train.parquet": [], "sft.parquet": []}
    schemas = {"train.parquet": rl_schema, "sft.parquet": sft_schema}

    def flush() -> None:
        for name, batch in batches.items():
            if batch:
                writers[name].write_table(pa.Table.from_pylist(batch, schema=schemas[name]))
                batch.clear()

    done = 0
    for record in records:
        step_images = []
        for step in record["steps"]:
            data = _image_bytes(step["screenshot"]) if step["screenshot"] else None
            if data is not None:
                step_images.append({"bytes": data, "path": step["screenshot"]})
        episode = (record.get("metadata") or {}).get("episode") or {}
        task = episode.get("task")
        rl, sft = _verl_rows(
            record, done, step_images, task if isinstance(task, dict) else wire_task(record["task_id"])
        )
        batches["train.parquet"].append(rl)
        if sft is not None:
            batches["sft.parquet"].append(sft)
        if len(batches["sft.parquet"]) >= 32 or len(batches["train.parquet"]) >= 64:
            flush()
        done += 1
        if not progress(done):
            break
    flush()
    for name, writer in writers.items():
        writer.close()
        zf.writestr(name, sinks[name].getvalue())
    return done


OSWORLD_ROOT = "pyautogui/screenshot/flywheel"  # results/<action_space>/<observation_type>/<model>


def safe_segment(name: Any, *, fallback: str = "_") -> str:
    """One archive path segment from a stored name (pool, task id): only letters, digits, '.', '-'
    and '_' survive, no leading dot (so never '.' or '..'), at most 100 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).lstrip(".")[:100]
    return cleaned or fallback


def _timestamp(iso: str | None) -> str | None:
    """OSWorld's action_timestamp format, %Y%m%d@%H%M%S (UTC)."""
    if not iso:
        return None
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y%m%d@%H%M%S")


def _pyautogui(step: dict[str, Any]) -> str:
    """The step's actions as the pyautogui code OSWorld replays (screen pixels), or an empty string
    when the step had none; actions pyautogui cannot express keep their UI-TARS text in `info`."""
    actions = [
        Action.from_json(a)
        for a in screen_actions(step["action"] or [], step["coord_convention"], step["screen_width"],
                                step["screen_height"], step["model_image_width"], step["model_image_height"])
    ]  # fmt: skip
    result = to_pyautogui(actions)
    return "\n".join(result.value) if result.ok else ""


def _after_screens(record: dict[str, Any]) -> list[str | None]:
    """The stored file of the screen after each step's action: the next step's observation, and
    the trajectory's final screen after the last one."""
    steps = record["steps"]
    if not steps:
        return []
    return [s["screenshot"] for s in steps[1:]] + [record.get("final_screenshot")]


def write_osworld(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    """OSWorld's result layout, as its `lib_run_single` writes it and `show_result.get_result`
    reads it: `pyautogui/screenshot/flywheel/<domain>/<example>/` with `traj.jsonl` (step_num,
    action_timestamp %Y%m%d@%H%M%S, action as pyautogui code, response, reward, done, info,
    screenshot_file = the screen after the action: `step_<N>_<timestamp>.png`) and `result.txt`
    (the verifier's score) only for completed trajectories with a score. Domain = the pool,
    example = `<task>.t<trajectory id>`; both sanitised."""
    done = 0
    for record in records:
        folder = f"{OSWORLD_ROOT}/{safe_segment(record['pool'])}/{safe_segment(record['task'])}.t{int(record['id'])}"
        lines: list[str] = []
        for step, after in zip(record["steps"], _after_screens(record), strict=True):
            number = int(step["index"]) + 1
            stamp = _timestamp(step.get("created_at"))
            png_name = None
            data = _image_bytes(after) if after else None
            if data is not None:
                png_name = f"step_{number}_{stamp}.png" if stamp else f"step_{number}.png"
                zf.writestr(f"{folder}/{png_name}", data if str(after).endswith(".png") else _as_png(data))
            lines.append(
                json_line(
                    json.dumps(
                        {
                            "step_num": number,
                            "action_timestamp": stamp,
                            "action": _pyautogui(step),
                            "response": step["raw_text"] or _assistant_text(step),
                            "reward": step["reward"],
                            "done": step["done"],
                            "info": {
                                "decision": step["decision"],
                                "action_text": step["action_text"],
                                "parse_error": step["parse_error"],
                            },
                            "screenshot_file": png_name,
                        },
                        ensure_ascii=False,
                    )
                )
            )
        zf.writestr(f"{folder}/traj.jsonl", "\n".join(lines) + ("\n" if lines else ""))
        if record["status"] == "completed" and record["final_reward"] is not None:
            zf.writestr(f"{folder}/result.txt", f"{float(record['final_reward'])}\n")
        done += 1
        if not progress(done):
            break
    return done


WRITERS: dict[str, Callable[[zipfile.ZipFile, Iterable[dict[str, Any]], ProgressFn], int]] = {
    "jsonl": write_native_jsonl,
    "sharegpt": write_sharegpt,
    "verl": write_verl_parquet,
    "osworld": write_osworld,
}
