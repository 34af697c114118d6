"""Fixtures of the flywheel tests: trajectories with real stored steps, a local judge server, and
embedded checkpoints with an SFT lineage."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from PIL import Image

from tests.chat_server import ChatServer, chat_server
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.store import services as store
from webapp.store.checkpoints import checkpoint_create_initial, checkpoint_dir, checkpoint_register
from webapp.store.models import Checkpoint, Trajectory

ELEMENTS = [{"index": 0, "tag": "button", "text": "OK", "x": 40.0, "y": 60.0, "width": 40.0, "height": 20.0}]


def jpeg(color: tuple[int, int, int] = (90, 120, 160)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (160, 210), color).save(out, format="JPEG")
    return out.getvalue()


def make_trajectory(task: Any, *, source: str = "rejection_sampling", reward: float = 1.0, steps: int = 2,
                    status: str = "completed") -> Trajectory:  # fmt: skip
    traj = store.trajectory_create(task=task, source=source, policy_version="v-test")
    for i in range(steps):
        store.step_append(
            trajectory=traj, screenshot=jpeg((30 * i, 80, 120)),
            fields={"thought": f"Click OK ({i}).", "action_text": "click(start_box='(60,70)')",
                    "screen_width": 160, "screen_height": 210,
                    "rl": {"elements": ELEMENTS, "instruction": "Click OK."}},
        )  # fmt: skip
    return store.trajectory_finish(trajectory=traj, status=status, final_reward=reward)


@pytest.fixture
def pool(db):
    return TaskPoolFactory(name="fw-pool")


@pytest.fixture
def tasks(pool):
    return [TaskFactory(pool=pool, external_id=name) for name in ("click-test", "click-button", "focus-text")]


def _verdict(body: dict[str, Any]) -> str:
    """A deterministic judge standing in for an LLM judge / ORM model: V=1 when the trajectory's
    verifier reward is positive, else V=0 with PREFIX = number of steps − 1."""
    content = body["messages"][-1]["content"]  # the judge's parts: text and screenshots
    text = "\n".join(p["text"] for p in content if p["type"] == "text")
    steps = text.count("\nStep ")
    reward = float(text.split("Verifier reward: ")[1].split("\n")[0])
    return "V: 1" if reward > 0 else f"The last step was wrong.\nV: 0\nPREFIX: {max(0, steps - 1)}"


@pytest.fixture
def judge() -> Iterator[ChatServer]:
    """`judge.url` (…/v1) and `judge.requests` (every request body, in order)."""
    with chat_server(_verdict) as server:
        yield server


@pytest.fixture
def judge_url(judge: ChatServer) -> str:
    return str(judge.url)


def child_checkpoint(parent: Checkpoint, version: str, *, shift: float, sft: bool) -> Checkpoint:
    """A child of `parent` whose float weights are `parent + shift` (a stand-in for training)."""
    from workers.policy.embedded.policy import load_checkpoint
    from workers.policy.sft import save_checkpoint

    model, _ = load_checkpoint(checkpoint_dir(parent))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(shift)
    relative = f"checkpoints/{version}"
    save_checkpoint(model, checkpoint_dir(parent).parent / version, version, parent.version)
    metrics = {"sft": {"dataset": None}} if sft else {"rl": {}}
    return checkpoint_register(version=version, path=relative, parent=parent, metrics=metrics)


@pytest.fixture
def lineage(db) -> dict[str, Checkpoint]:
    """init → sft-a → {rl-1 (+0.1), rl-2 (+0.3)};  init → sft-b → rl-3."""
    init = checkpoint_create_initial(version="fw-init")
    sft_a = child_checkpoint(init, "fw-sft-a", shift=0.0, sft=True)
    sft_b = child_checkpoint(init, "fw-sft-b", shift=0.05, sft=True)
    return {
        "init": init, "sft_a": sft_a, "sft_b": sft_b,
        "rl_1": child_checkpoint(sft_a, "fw-rl-1", shift=0.1, sft=False),
        "rl_2": child_checkpoint(sft_a, "fw-rl-2", shift=0.3, sft=False),
        "rl_3": child_checkpoint(sft_b, "fw-rl-3", shift=0.2, sft=False),
    }  # fmt: skip
