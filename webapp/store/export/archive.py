"""Archive exports (zip with images) in the formats trainers read (SPEC §6).

Each writer consumes trajectory records one at a time and writes into an open ZipFile, so memory
stays bounded by one trajectory plus its images.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any

from django.core.files.storage import default_storage
from PIL import Image

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
    return name.rsplit(".", 1)[-1].lower() if "." in name else "bin"


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
    thought = step.get("human_thought_refined") or step.get("thought") or ""
    action = step.get("action_text") or ""
    return f"Thought: {thought}\nAction: {action}" if thought else f"Action: {action}"


def write_native_jsonl(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    done = 0
    with _member_later(zf, "trajectories.jsonl") as out:
        for record in records:
            paths = _copy_images(zf, record, f"images/t{record['id']}")
            for step, path in zip(record["steps"], paths, strict=True):
                step["screenshot"] = path
            out.write((json.dumps(record, ensure_ascii=False) + "\n").encode())
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
                prefix = f"{record['instruction']}\n" if i == 0 else ""
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


def write_verl_parquet(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    """verl RL data: one row per trajectory with the task prompt, its first screenshot, and the
    reward model spec; columns data_source, prompt, images, ability, reward_model, extra_info."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("extra_info", pa.string()),
        ]
    )
    sink = io.BytesIO()
    writer = pq.ParquetWriter(sink, schema)
    done = 0
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            batch.clear()

    for record in records:
        first = record["steps"][0]["screenshot"] if record["steps"] else None
        data = _image_bytes(first) if first else None
        batch.append(
            {
                "data_source": f"flywheel/{record['pool']}",
                "prompt": [{"role": "user", "content": f"<image>{record['instruction']}"}],
                "images": [{"bytes": data, "path": first}] if data else [],
                "ability": record["env_kind"],
                "reward_model": {"style": "rule", "ground_truth": json.dumps({"task": record["task"]})},
                "extra_info": json.dumps(
                    {
                        "trajectory_id": record["id"],
                        "task_id": record["task_id"],
                        "final_reward": record["final_reward"],
                        "validation": record["validation"],
                        "actions": [s["action_text"] for s in record["steps"]],
                    }
                ),
            }
        )
        if len(batch) >= 256:
            flush()
        done += 1
        if not progress(done):
            break
    flush()
    writer.close()
    zf.writestr("train.parquet", sink.getvalue())
    return done


def write_osworld(zf: zipfile.ZipFile, records: Iterable[dict[str, Any]], progress: ProgressFn) -> int:
    """OSWorld result layout: one folder per trajectory with traj.jsonl and step PNGs."""
    done = 0
    for record in records:
        folder = f"{record['pool']}/{record['task']}/t{record['id']}"
        lines: list[str] = []
        for step in record["steps"]:
            png_name = None
            data = _image_bytes(step["screenshot"]) if step["screenshot"] else None
            if data is not None:
                png_name = f"step_{step['index'] + 1}.png"
                zf.writestr(
                    f"{folder}/{png_name}", data if step["screenshot"].endswith(".png") else _as_png(data)
                )
            lines.append(
                json.dumps(
                    {
                        "step_num": step["index"] + 1,
                        "action_timestamp": step["clock_end"],
                        "action": step["action_text"],
                        "response": step["raw_text"] or _assistant_text(step),
                        "reward": step["reward"],
                        "done": step["done"],
                        "info": {"decision": step["decision"]},
                        "screenshot_file": png_name,
                    },
                    ensure_ascii=False,
                )
            )
        zf.writestr(f"{folder}/traj.jsonl", "\n".join(lines) + ("\n" if lines else ""))
        zf.writestr(
            f"{folder}/result.txt",
            f"{record['final_reward'] if record['final_reward'] is not None else ''}\n",
        )
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
