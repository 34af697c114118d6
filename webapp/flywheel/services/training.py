"""Turn a dataset iteration into SFT examples and train a checkpoint from it, and merge checkpoints
that share one SFT parent (seed 000 §2.6). Both register a new `Checkpoint`."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any, Unpack

from django.conf import settings

from webapp.flywheel.models import DatasetIteration, Split
from webapp.store.checkpoints import CheckpointError, checkpoint_dir, checkpoint_register
from webapp.store.models import Checkpoint
from webapp.store.sft_jobs import SftError, SftTraining, needs_elements, trajectory_sft_examples
from webapp.store.sft_jobs import checkpoint_sft as store_sft


class TrainingError(ValueError):
    """Training or merging was refused; the message says why."""


def dataset_sft_examples(
    *, dataset: DatasetIteration, include_prefixes: bool = True, need_elements: bool = True
) -> list[Any]:
    """One `SFTExample` per step of the SFT split (plus the judge-marked correct prefixes of CT
    failures), by `webapp.store.sft_jobs.trajectory_sft_examples` (`need_elements`: False for an
    HF vision-language parent)."""
    members = dataset.members.select_related("trajectory__task").prefetch_related("trajectory__steps")
    if not include_prefixes:
        members = members.filter(split=Split.SFT)
    examples = []
    for member in members.iterator(chunk_size=200):
        if member.split == Split.SFT:
            examples += trajectory_sft_examples(member.trajectory, need_elements=need_elements)
        elif member.sft_prefix_steps:
            examples += trajectory_sft_examples(
                member.trajectory, limit=member.sft_prefix_steps, need_elements=need_elements
            )
    return examples


def _new_dir(version: str) -> tuple[Path, str]:
    relative = Path("checkpoints") / version
    return Path(settings.MEDIA_ROOT) / relative, str(relative)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:60]


def checkpoint_sft(
    *, parent: Checkpoint, dataset: DatasetIteration, version: str = "", **training: Unpack[SftTraining]
) -> Checkpoint:
    """Fine-tune `parent` on the dataset's SFT examples (`webapp.store.sft_jobs.checkpoint_sft`, the
    one SFT path) and register the result as a child of `parent`."""
    try:
        examples = dataset_sft_examples(dataset=dataset, need_elements=needs_elements(parent))
    except SftError as exc:
        raise TrainingError(str(exc)) from exc
    version = version or _slug(f"sft-d{dataset.version}-{uuid.uuid4().hex[:6]}")
    try:
        return store_sft(
            parent=parent, examples=examples, version=version, about={"dataset": dataset.version},
            notes=f"SFT on dataset v{dataset.version} ({len(examples)} examples)", **training,
        )  # fmt: skip
    except SftError as exc:
        raise TrainingError(f"dataset v{dataset.version}: {exc}") from exc


def sft_root(checkpoint: Checkpoint) -> Checkpoint | None:
    """Itself if it was trained by SFT (or has no parent), else its nearest such ancestor. The SFT
    parent of a checkpoint is `sft_root(checkpoint.parent)`: RL runs and domain SFTs started from
    one SFT checkpoint share it."""
    seen: set[int] = set()
    node: Checkpoint | None = checkpoint
    while node is not None and node.pk not in seen:
        seen.add(node.pk)
        if "sft" in (node.metrics or {}) or node.parent_id is None:
            return node
        node = node.parent
    return None


def checkpoint_merge(*, checkpoints: list[Checkpoint], weights: list[float], version: str = "") -> Checkpoint:
    """θ = Σ α_k θ_k over checkpoints from one SFT parent (seed 000 §2.6). Refuses checkpoints of
    different SFT parents, external endpoints, and weights that are negative or do not sum to 1."""
    from safetensors.torch import load_file

    from workers.rl.merge import check_merge_weights, merge_state_dicts

    if len(checkpoints) < 2:
        raise TrainingError("a merge needs at least two checkpoints")
    try:
        alphas = check_merge_weights(weights, len(checkpoints))
    except ValueError as exc:
        raise TrainingError(str(exc)) from exc
    external = [c.version for c in checkpoints if c.endpoint_url or not c.path]
    if external:
        raise TrainingError(f"cannot merge external endpoints without weights: {external}")
    roots = {}
    for c in checkpoints:
        root = sft_root(c.parent) if c.parent is not None else None
        roots[c.version] = root.version if root is not None else None
    if None in roots.values() or len(set(roots.values())) != 1:
        raise TrainingError(
            "checkpoints must share one SFT parent; their SFT parents are "
            + ", ".join(f"{v} ← {r or 'none'}" for v, r in roots.items())
        )
    state_dicts = []
    for c in checkpoints:
        files = sorted(checkpoint_dir(c).glob("*.safetensors"))
        if len(files) != 1:
            raise TrainingError(f"{c.version}: expected one .safetensors file, found {len(files)}")
        state_dicts.append(load_file(str(files[0])))
    try:
        merged = merge_state_dicts(state_dicts, alphas)
    except ValueError as exc:
        raise TrainingError(f"cannot merge: {exc}") from exc
    parent = Checkpoint.objects.get(version=next(iter(roots.values())))
    version = version or _slug(f"merge-{uuid.uuid4().hex[:8]}")
    target, relative = _new_dir(version)
    sources = dict(zip([c.version for c in checkpoints], alphas, strict=True))
    from workers.policy.base import PolicyError
    from workers.policy.hf_vlm import checkpoint_kind

    try:
        kinds = {checkpoint_kind(checkpoint_dir(c)) for c in checkpoints}
    except PolicyError as exc:
        raise TrainingError(str(exc)) from exc
    if kinds == {"hf_vlm"}:
        _save_merged_hf(checkpoint_dir(checkpoints[0]), target, merged, version, parent.version, sources)
    elif kinds == {"embedded"}:
        from workers.policy.embedded.policy import load_checkpoint
        from workers.policy.sft import save_checkpoint

        # The first checkpoint provides config and tokenizer; the merged weights replace its own.
        model, _ = load_checkpoint(checkpoint_dir(checkpoints[0]))
        try:
            model.load_state_dict(merged)
        except RuntimeError as exc:
            raise TrainingError(f"merged weights do not fit the model: {exc}") from exc
        save_checkpoint(model, target, version, parent.version, {"merge": sources})
    else:
        raise TrainingError(f"cannot merge checkpoints of different kinds: {sorted(kinds)}")
    metrics = {
        "merge": {
            "sources": [c.version for c in checkpoints],
            "weights": alphas,
            "sft_parent": parent.version,
        }
    }
    try:
        return checkpoint_register(
            version=version, path=relative, parent=parent, metrics=metrics,
            notes="merge of " + ", ".join(f"{a:.3g}·{c.version}" for a, c in zip(alphas, checkpoints, strict=True)),
        )  # fmt: skip
    except CheckpointError as exc:
        raise TrainingError(str(exc)) from exc


def _save_merged_hf(
    first: Path, target: Path, merged: dict[str, Any], version: str, parent: str, sources: dict[str, float]
) -> None:
    """An HF vision-language merge: the merged tensors under the first checkpoint's names and file
    layout (no model class involved), its config (new version, parent), tokenizer, image processor."""
    import json
    import shutil
    import time

    from safetensors.torch import save_file

    target.mkdir(parents=True, exist_ok=True)
    for item in first.iterdir():
        if (
            item.is_file()
            and not item.name.endswith(".safetensors")
            and item.name not in ("trainer_state.pt",)
        ):
            shutil.copy2(item, target / item.name)
    save_file(merged, str(target / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text())
    config.update({"flywheel_version": version, "flywheel_parent": parent})
    (target / "config.json").write_text(json.dumps(config, indent=2))
    record = {"version": version, "parent": parent, "created": time.time(), "merge": sources}
    (target / "flywheel_version.json").write_text(json.dumps(record, indent=2))


def source_task_sets(checkpoints: list[Checkpoint]) -> dict[str, list[str]]:
    """Each source checkpoint's task set: the MiniWoB tasks of the trajectories it was trained on
    (from its SFT dataset), else the tasks it produced trajectories on."""
    out: dict[str, list[str]] = {}
    for c in checkpoints:
        dataset_version = ((c.metrics or {}).get("sft") or {}).get("dataset")
        names: set[str] = set()
        if dataset_version is not None:
            ds = DatasetIteration.objects.filter(version=dataset_version).first()
            if ds is not None:
                names = set(ds.members.filter(trajectory__task__source="miniwob").values_list(
                    "trajectory__task__external_id", flat=True))  # fmt: skip
        if not names:
            names = set(
                c.trajectories.filter(task__source="miniwob").values_list("task__external_id", flat=True)
            )
        out[c.version] = sorted(names)
    return out


def evaluate_checkpoint(
    *,
    checkpoint: Checkpoint,
    tasks: list[str],
    seeds: list[int],
    max_steps: int = 6,
    max_new_tokens: int | None = None,
) -> dict[str, Any] | None:
    """Success on MiniWoB tasks with `workers.policy.evaluate` (greedy); None when there is no
    evaluator or no task."""
    try:
        from workers.policy.evaluate import evaluate
    except ImportError:
        return None
    from webapp.flywheel.services.sampling import open_policy

    if not tasks or checkpoint.endpoint_url:
        return None
    policy = open_policy(checkpoint=checkpoint, seed=0, max_new_tokens=max_new_tokens)
    return evaluate(policy, tasks, seeds, max_steps=max_steps).as_dict()
