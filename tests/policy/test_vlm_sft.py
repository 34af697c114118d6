"""SFT on HF vision-language checkpoints (issue 23): the one SFT path (store jobs, dataset SFT,
Entropulse) trains a tiny Qwen2.5-VL (random weights, built here) on annotated trajectories, and
the new checkpoint writes the demonstrated actions with a higher log-probability than its base."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from tests.factories import TaskFactory
from webapp.store import services as store
from webapp.store.checkpoints import checkpoint_create_tiny_vlm, checkpoint_dir
from webapp.store.job_services import sft_job_create
from webapp.store.models import JobStatus, Trajectory, TrajectorySource, TrajectoryStatus
from webapp.store.sft_jobs import sft_examples_from, sft_job_run
from workers.actions.types import Convention
from workers.envs.base import Observation
from workers.policy.base import HistoryItem
from workers.policy.hf_vlm import checkpoint_kind, profile_for
from workers.policy.hf_vlm.model import encode_prompt, eos_ids, load_vlm, score
from workers.policy.hf_vlm.sft import chat_example, to_model_text
from workers.policy.sft import SFTExample, screen_text


def _screen(shade: int) -> bytes:
    img = Image.new("RGB", (160, 210), (240, 240, 240))
    ImageDraw.Draw(img).rectangle((40, 90, 120, 120), fill=(shade, 80, 200))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _annotated(n: int) -> list[Trajectory]:
    """Trajectories as annotation sessions store them: the profile's convention in the step text
    (UI-TARS-1.5: pixels of the smart-resized screenshot), no element list."""
    task = TaskFactory(env_kind="browser", source="miniwob", external_id="click-button")
    out = []
    for i in range(n):
        trajectory = store.trajectory_create(
            task=task, source=TrajectorySource.ANNOTATION, instruction="Click the blue button."
        )
        for index, action_text in enumerate(["click(start_box='(126,168)')", "finished(content='done')"]):
            store.step_append(
                trajectory=trajectory, screenshot=_screen(30 * i), image_format="png",
                fields={"thought": "The button is in the middle.", "action_text": action_text,
                        "coord_convention": "absolute_resized", "screen_width": 160, "screen_height": 210,
                        "done": index == 1},
            )  # fmt: skip
        out.append(
            store.trajectory_finish(
                trajectory=trajectory, status=TrajectoryStatus.COMPLETED, final_reward=1.0, success=True
            )
        )
    return out


def _mean_logprob(directory: Path, examples: list[SFTExample]) -> float:
    model, tokenizer, image_processor = load_vlm(directory)
    eos = sorted(eos_ids(model, tokenizer))[0]
    profile = profile_for(directory)
    total, tokens = 0.0, 0
    with torch.no_grad():
        for example in examples:
            messages, target = chat_example(example, profile)
            response = [*tokenizer(target, add_special_tokens=False)["input_ids"], eos]
            lp = score(model, encode_prompt(tokenizer, image_processor, messages), response, 1.0).logprobs
            total, tokens = total + float(lp.sum()), tokens + len(response)
    return total / tokens


def test_coordinates_go_screen_then_model_convention() -> None:
    # 160x210 -> the default smart_resize's 252x336 image: its (126,168) is the screen's (80,105)
    text = screen_text("t", "click(start_box='(126,168)')", "absolute_resized", 160, 210)
    assert text == "Thought: t\nAction: click(start_box='(80,105)')"
    assert (
        screen_text("t", "not an action(", "absolute_resized", 160, 210)
        == "Thought: t\nAction: not an action("
    )
    assert to_model_text(text, (160, 210), (1000, 1000), Convention.RELATIVE_1000).endswith("'(500,500)')")
    obs = Observation(screenshot=_screen(0), width=160, height=210, instruction="go", image_format="png")
    example = SFTExample(None, text, obs, (HistoryItem("before", "click(start_box='(0,0)')", _screen(1)),))  # type: ignore[arg-type]
    messages, target = chat_example(example, profile_for(max_screenshots=2))
    assert target == "Thought: t\nAction: click(start_box='(126,168)')"  # the model's own pixels again
    assert (
        sum(1 for m in messages for p in m["content"] if isinstance(p, dict) and p["type"] == "image_url")
        == 2
    )


@pytest.mark.django_db
def test_sft_job_on_annotated_trajectories_makes_a_vlm_checkpoint_that_writes_them_better() -> None:
    trajectories = _annotated(2)
    base = checkpoint_create_tiny_vlm(version="tiny-vlm-sft-base")
    job = sft_job_create(user=None, base=base, version="tiny-vlm-sft-1", filters={"source": ["annotation"]},
                         steps=8, lr=5e-3, batch_size=2, enqueue=False)  # fmt: skip
    job = sft_job_run(job_id=job.pk)
    assert job is not None and job.status == JobStatus.SUCCEEDED, job and job.error
    child = job.result
    assert child.parent == base and child.profile == "hf-vlm" and job.examples == 4
    directory = checkpoint_dir(child)
    assert checkpoint_kind(directory) == "hf_vlm" and (directory / "preprocessor_config.json").is_file()
    sft = child.metrics["sft"]
    assert sft["examples"] == 4 and sft["skipped_examples"] == 0 and sft["steps"] == 8
    assert sft["loss_last"] < sft["loss_first"]
    examples = sft_examples_from(
        Trajectory.objects.filter(pk__in=[t.pk for t in trajectories]), need_elements=False
    )
    before = _mean_logprob(checkpoint_dir(base), examples)
    after = _mean_logprob(directory, examples)
    assert after > before + 0.5, (before, after)  # nats per demonstrated token


@pytest.mark.django_db
def test_vlm_sft_refuses_what_it_cannot_train() -> None:
    from webapp.store.sft_jobs import SftError, checkpoint_sft_from_store

    base = checkpoint_create_tiny_vlm(version="tiny-vlm-sft-base2")
    with pytest.raises(SftError, match="no trajectory steps with screenshot and action"):
        checkpoint_sft_from_store(base=base, version="nothing", filters={"source": ["annotation"]}, steps=2)
