"""Expert demonstrations into the store, and SFT of a checkpoint on stored trajectories.

- `demos_collect`: play the scripted MiniWoB++ expert (workers/policy/expert.py) and store every
  successful episode as a trajectory with source `import`: screenshots in media storage, the element
  list the policy would read in `Step.rl["elements"]`, the episode's own instruction in
  `Trajectory.instruction` (MiniWoB++ generates it per episode; the Task row only holds a
  placeholder).
- `sft_examples_from`: one `SFTExample` per stored step, the prompt rebuilt exactly as the embedded
  policy builds it at inference time, the target `Thought: …\\nAction: …` (loss on those tokens only).
- `checkpoint_sft_from_store`: train a checkpoint on the trajectories selected by the export API's
  filters (source / route / pool / ...) and register the child `Checkpoint` with parent and metrics.
- `sft_job_run`: an `SftJob` run to a terminal state on the `train` queue with progress and status
  (created and queued by `webapp.store.job_services.sft_job_create`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict, Unpack

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet

from webapp.store import services as store
from webapp.store.checkpoints import checkpoint_dir, checkpoint_register
from webapp.store.jobs import job_claim, job_end
from webapp.store.models import (
    Checkpoint,
    JobStatus,
    SftJob,
    Task,
    Trajectory,
    TrajectorySource,
    TrajectoryStatus,
)

log = logging.getLogger(__name__)
DEMO_POOL = "miniwob-demos"
EXPERT_VERSION = "scripted-expert"
VERSION_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


class SftError(ValueError):
    """SFT or demonstration collection was refused; the message says why."""


# ------------------------------------------------------------------ demonstrations


def _miniwob_task(name: str, pool_name: str) -> Task:
    """The Task row for a MiniWoB++ task (any pool), imported into `pool_name` when missing."""
    task = Task.objects.filter(source="miniwob", external_id=name).order_by("pk").first()
    if task is not None:
        return task
    from webapp.store.importers.miniwob import miniwob_records
    from webapp.store.importers.services import tasks_import

    records, issues = miniwob_records([name])
    if issues:
        raise SftError("; ".join(str(issue) for issue in issues))
    result = tasks_import(pool_name=pool_name, create_pool=True, records=records)
    return Task.objects.get(pk=result.task_ids[0])


def demos_collect(
    *,
    task_names: Iterable[str],
    episodes: int,
    seed_start: int = 0,
    env: Any | None = None,
    pool_name: str = DEMO_POOL,
    progress: Callable[[str, int, bool], None] | None = None,
) -> list[Trajectory]:
    """Store `episodes` expert episodes per task (seeds seed_start..); failed or unplannable
    episodes are not stored. Returns the stored trajectories."""
    from workers.policy.expert import SUPPORTED_TASKS, play_expert_episode

    names = list(dict.fromkeys(task_names))
    unsupported = [n for n in names if n not in SUPPORTED_TASKS]
    if unsupported:
        raise SftError(f"no scripted expert for {unsupported}; supported: {list(SUPPORTED_TASKS)}")
    if episodes < 1:
        raise SftError("episodes must be >= 1")
    tasks = {name: _miniwob_task(name, pool_name) for name in names}
    own = env is None
    if env is None:
        from workers.envs.browser.miniwob import MiniWoBEnv

        env = MiniWoBEnv(wait_s=0.0)
    from webapp.store.taskspec import task_spec_wire
    from workers.envs.base import TaskSpec

    stored: list[Trajectory] = []
    try:
        for name, task in tasks.items():
            spec = TaskSpec(**task_spec_wire(task))
            for seed in range(seed_start, seed_start + episodes):
                play = play_expert_episode(env, spec, seed)
                if play.error is not None:
                    log.warning("expert cannot plan %s seed %s: %s", name, seed, play.error)
                    continue
                if progress is not None:
                    progress(name, seed, play.success)
                if not play.success:
                    continue
                metadata = {"seed": seed, "origin": "scripted MiniWoB++ expert"}
                trajectory = expert_trajectory_store(
                    task=task, spec=spec, play=play, source=TrajectorySource.IMPORT, metadata=metadata,
                    success=True,
                )  # fmt: skip
                stored.append(trajectory)
    finally:
        if own:
            env.close()
    return stored


@transaction.atomic
def expert_trajectory_store(
    *,
    task: Task,
    spec: Any,
    play: Any,
    source: str,
    metadata: dict[str, Any],
    success: bool | None = None,
    decision: str = "",
) -> Trajectory:
    """A played expert episode (`workers.policy.expert.ExpertPlay`) as a completed trajectory of
    `source`: each step's screenshot in media storage, the element list and the instruction the
    policy would read in `Step.rl`, the final screen, the env's reward. `decision` labels the steps
    when the expert stands in for an annotator."""
    from workers.policy.base import instruction_of

    first = play.steps[0].observation if play.steps else play.final
    trajectory = store.trajectory_create(
        task=task, source=source, policy_version=EXPERT_VERSION, metadata=metadata,
        instruction=first.instruction,
    )  # fmt: skip
    for index, step in enumerate(play.steps):
        obs = step.observation
        fields: dict[str, Any] = {
            "raw_text": f"Thought: {step.thought}\nAction: {step.action_text}",
            "thought": step.thought,
            "action_text": step.action_text,
            "action": [step.action.to_json()],
            "coord_convention": "screen",
            "screen_width": obs.width,
            "screen_height": obs.height,
            "policy_version": EXPERT_VERSION,
            "done": index == len(play.steps) - 1,
            "rl": {"elements": [asdict(e) for e in obs.elements], "instruction": instruction_of(obs, spec)},
        }
        if decision:
            fields["decision"] = decision
        store.step_append(
            trajectory=trajectory, screenshot=obs.screenshot, image_format=obs.image_format, fields=fields
        )
    return store.trajectory_finish(
        trajectory=trajectory, status=TrajectoryStatus.COMPLETED, final_reward=play.reward, success=success,
        final_screenshot=play.final.screenshot, image_format=play.final.image_format,
    )  # fmt: skip


# ------------------------------------------------------------------ SFT on stored trajectories


def trajectories_for_sft(filters: dict[str, Any]) -> QuerySet[Trajectory]:
    """Trajectories selected by the export API's filters (`source`, `route`, `pool`, `pool_name`,
    `min_reward`, ...); SftError on an invalid filter instead of silently selecting everything."""
    from webapp.store.api.filters import TrajectoryFilter

    filterset = TrajectoryFilter(filters, queryset=Trajectory.objects.all())
    if not filterset.is_valid():
        raise SftError(f"invalid filters: {dict(filterset.errors)}")
    return filterset.qs.select_related("task")


def trajectory_sft_examples(
    trajectory: Trajectory, *, limit: int | None = None, need_elements: bool = True
) -> list[Any]:
    """One SFTExample per step (of the first `limit` steps) that has a screenshot, an action and,
    for the embedded model (`need_elements`), an element list; the prompt rebuilt as the policy
    builds it at inference time: its history holds every earlier step's action (and screenshot, which
    an HF VLM shows for the last few). Targets and history are in screen pixels, whatever convention
    the step was stored in (`workers.policy.sft.screen_text`). Other steps are skipped."""
    from workers.envs.base import Element, Observation
    from workers.policy.base import HistoryItem
    from workers.policy.sft import example_from_step, screen_text

    examples = []
    history: list[Any] = []
    for step in sorted(trajectory.steps.all(), key=lambda s: s.index):
        if limit is not None and step.index >= limit:
            break
        found = (step.rl or {}).get("elements")
        elements: list[dict[str, Any]] = found if isinstance(found, list) else []
        has_elements = isinstance(found, list)
        image = None
        if step.screenshot:
            with default_storage.open(step.screenshot.name, "rb") as fh:
                image = fh.read()
        width, height = step.screen_width or 0, step.screen_height or 0
        target = screen_text(step.thought, step.action_text, step.coord_convention, width, height)
        if image is not None and (has_elements or not need_elements) and step.action_text:
            obs = Observation(
                screenshot=image,
                width=width,
                height=height,
                instruction=(step.rl or {}).get("instruction") or trajectory.episode_instruction,
                elements=tuple(Element(**e) for e in elements) if has_elements else (),
            )
            examples.append(example_from_step(obs, history, target))
        history.append(HistoryItem(step.thought, target.partition("Action:")[2].strip(), image))
    return examples


def sft_examples_from(trajectories: QuerySet[Trajectory], *, need_elements: bool = True) -> list[Any]:
    """`trajectory_sft_examples` of every trajectory, in order."""
    examples = []
    for trajectory in trajectories.prefetch_related("steps").iterator(chunk_size=100):
        examples += trajectory_sft_examples(trajectory, need_elements=need_elements)
    return examples


def needs_elements(checkpoint: Checkpoint) -> bool:
    """Whether SFT of this checkpoint needs the element list of each step: the embedded model reads
    one, an HF vision-language model (workers.policy.hf_vlm) reads only screenshots."""
    from workers.policy.base import PolicyError
    from workers.policy.hf_vlm import checkpoint_kind

    if checkpoint.endpoint_url or not checkpoint.path:
        return True
    try:
        return checkpoint_kind(checkpoint_dir(checkpoint)) != "hf_vlm"
    except PolicyError as exc:
        raise SftError(str(exc)) from exc


def writable_examples(examples: list[Any], checkpoint_path: Any) -> tuple[list[Any], int]:
    """The examples whose target the checkpoint's grammar can write, and how many it cannot (e.g. a
    sampled thought longer than the model's thought cap, or an action outside its subset): one such
    step is left out of the SFT instead of failing it."""
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.grammar import Grammar, GrammarError
    from workers.policy.embedded.tokenizer import FlywheelTokenizer
    from workers.policy.hf_vlm import checkpoint_kind

    if checkpoint_kind(checkpoint_path) == "hf_vlm":
        return list(examples), 0  # no grammar: the VLM's SFT leaves out what it cannot encode itself
    config = FlywheelPolicyConfig.from_pretrained(checkpoint_path)
    grammar = Grammar(FlywheelTokenizer.from_pretrained(checkpoint_path), config.max_thought, config.max_text)
    kept = []
    for example in examples:
        try:
            grammar.encode_response(example.target)
        except GrammarError:
            continue
        kept.append(example)
    return kept, len(examples) - len(kept)


class SftTraining(TypedDict, total=False):
    """How `checkpoint_sft` trains, for the callers that pass it on (its defaults apply)."""

    steps: int
    lr: float
    batch_size: int
    seed: int
    progress: Callable[[dict[str, float]], None] | None
    should_stop: Callable[[], bool] | None


def checkpoint_sft(
    *,
    parent: Checkpoint,
    examples: list[Any],
    version: str,
    about: dict[str, Any],
    notes: str,
    steps: int = 200,
    lr: float = 1e-3,
    batch_size: int = 16,
    seed: int = 0,
    progress: Callable[[dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Checkpoint:
    """The one SFT path: fine-tune `parent` on the `examples` its grammar can write with
    `workers.policy.sft.sft_train` and register `version` as its child. `about` (what the examples
    were selected by) is kept in the child's `metrics["sft"]` beside the training figures."""
    from workers.policy.base import PolicyError
    from workers.policy.sft import sft_train

    if parent.endpoint_url or not parent.path:
        raise SftError(f"checkpoint {parent.version} is an external endpoint; SFT needs local weights")
    if steps < 1:
        raise SftError("steps must be >= 1")
    kept, skipped = writable_examples(examples, checkpoint_dir(parent))
    if not kept:
        raise SftError(
            f"no SFT examples with screenshots{' and elements' if needs_elements(parent) else ''}"
            + (f" that the model can write ({skipped} cannot)" if skipped else "")
        )
    relative = Path("checkpoints") / version
    target = Path(settings.MEDIA_ROOT) / relative
    if target.exists():
        raise SftError(f"{target} exists already")
    try:
        result = sft_train(
            checkpoint_dir(parent), kept, target, steps=steps, lr=lr, batch_size=batch_size, seed=seed,
            version=version, progress_callback=progress, should_stop=should_stop,
        )  # fmt: skip
    except PolicyError as exc:
        raise SftError(str(exc)) from exc
    metrics = {
        "sft": {
            **about,
            "examples": result["examples"],
            "skipped_examples": skipped + int(result.get("skipped_examples", 0)),
            "steps": result["steps"],
            "stopped": result["stopped"],
            "lr": lr,
            "batch_size": batch_size,
            "loss_first": result["loss_first"],
            "loss_last": result["loss_last"],
            "seconds": round(result["seconds"], 2),
        }
    }
    return checkpoint_register(
        version=version, path=str(relative), parent=parent, metrics=metrics, notes=notes
    )


def checkpoint_sft_from_store(
    *, base: Checkpoint, version: str, filters: dict[str, Any], **training: Unpack[SftTraining]
) -> Checkpoint:
    """`checkpoint_sft` of `base` on the trajectories selected by the export API's filters."""
    if not VERSION_RE.match(version):
        raise SftError("version: 1-100 characters of letters, digits, '.', '_' or '-'")
    if Checkpoint.objects.filter(version=version).exists():
        raise SftError(f"a checkpoint {version!r} exists already")
    need_elements = needs_elements(base)
    examples = sft_examples_from(trajectories_for_sft(filters), need_elements=need_elements)
    if not examples:
        needs = "screenshot and element list" if need_elements else "screenshot and action"
        raise SftError(f"no trajectory steps with {needs} match {filters}")
    return checkpoint_sft(
        parent=base, examples=examples, version=version, about={"filters": filters},
        notes=f"SFT of {base.version} on {len(examples)} stored steps", **training,
    )  # fmt: skip


# ------------------------------------------------------------------ jobs


def sft_job_run(*, job_id: int) -> SftJob | None:
    """Run a queued job to a terminal state (the Celery task's body). Cancelling a running job stops
    training at the next step; the partial checkpoint is still registered."""
    job = job_claim(SftJob, job_id=job_id)
    if job is None:
        return None

    def progress(figures: dict[str, float]) -> None:
        SftJob.objects.filter(pk=job.pk).update(progress=figures)

    def should_stop() -> bool:
        return SftJob.objects.filter(pk=job.pk, status=JobStatus.CANCELLED).exists()

    try:
        checkpoint = checkpoint_sft_from_store(
            base=job.base, version=job.version, filters=job.filters, steps=job.steps, lr=job.lr,
            batch_size=job.batch_size, progress=progress, should_stop=should_stop,
        )  # fmt: skip
    except Exception as exc:
        log.exception("sft job %s failed", job_id)
        return job_end(job, status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
    # A job cancelled while training stays cancelled, with the partial checkpoint it produced.
    SftJob.objects.filter(pk=job.pk).update(result=checkpoint, examples=checkpoint.metrics["sft"]["examples"])
    return job_end(job, status=JobStatus.SUCCEEDED)


__all__ = [
    "SftError",
    "checkpoint_sft",
    "checkpoint_sft_from_store",
    "demos_collect",
    "expert_trajectory_store",
    "needs_elements",
    "sft_examples_from",
    "sft_job_run",
    "trajectories_for_sft",
    "trajectory_sft_examples",
    "writable_examples",
]
