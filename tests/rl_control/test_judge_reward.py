"""The LLM judge as the RL outcome reward for tasks without a verifier, against a real local HTTP
server speaking OpenAI chat completions: the judge reads the instruction, every thought and action
and the last screenshots (its verdict here depends on the final screen's colour), the verdict
becomes the reward, is stored on the trajectory and shown in replay; a judge that gives no verdict
fails the episode instead of guessing."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from PIL import Image

from rl_control import services
from rl_control.engine import judging
from tests.chat_server import chat_server
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.store import services as store
from webapp.store.models import Trajectory


def png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, format="PNG")
    return out.getvalue()


GREEN, RED, GREY = (20, 200, 40), (220, 30, 30), (128, 128, 128)


@pytest.fixture
def judge_server() -> Iterator[SimpleNamespace]:
    """Says success when the last image it is shown is mostly green; `mode` = "mute" answers with
    no verdict at all."""
    state = SimpleNamespace(mode="judge")

    def verdict(body: dict[str, Any]) -> str:
        images = [p["image_url"]["url"] for p in body["messages"][-1]["content"] if p["type"] == "image_url"]
        last = Image.open(io.BytesIO(base64.b64decode(images[-1].split(",", 1)[1]))).convert("RGB")
        r, g, _b = last.getpixel((10, 10))
        if state.mode == "mute":
            return "I cannot tell."
        if g > 150 and r < 100:
            return "Verdict: success\nReason: the final screen shows the confirmation.\nCorrect steps: 2"
        return "Verdict: failure\nReason: the confirmation never appeared.\nCorrect steps: 1"

    with chat_server(verdict) as server:
        yield SimpleNamespace(url=server.url, server=state, requests=server.requests)


def _episode(task: Any, run: Any) -> Trajectory:
    traj = store.trajectory_create(task=task, source="rl", policy_version="1", run_id=run.pk)
    for i, (thought, action) in enumerate([("Open the form.", "click(start_box='(10,10)')"),
                                           ("Press Save.", "click(start_box='(30,20)')")]):  # fmt: skip
        store.step_append(trajectory=traj, screenshot=png(GREY), image_format="png",
                          fields={"index": i, "thought": thought, "action_text": action,
                                  "screen_width": 64, "screen_height": 48})  # fmt: skip
    return traj


@pytest.mark.django_db
def test_the_judge_scores_a_task_without_a_verifier(users, judge_server, api) -> None:
    pool = TaskPoolFactory(name="open-ended")
    open_task = TaskFactory(pool=pool, env_kind="desktop", source="custom", verifier={},
                            instruction="Save the document as report.odt")  # fmt: skip
    scored = TaskFactory(pool=pool, env_kind="desktop", source="miniwob", external_id="click-test")
    run = services.run_create(user=users["researcher"], name="judged", preset="grpo-dart", pool=pool,
                              config={"env": {"kind": "desktop"},
                                      "judge": {"url": judge_server.url, "model": "orm-7b", "max_screenshots": 2}})  # fmt: skip
    assert judging.judge_applies(run.config, open_task) and not judging.judge_applies(run.config, scored)
    always = {**run.config, "judge": {**run.config["judge"], "use": "always"}}
    assert judging.judge_applies(always, scored)
    assert not judging.judge_applies({**run.config, "judge": {**run.config["judge"], "url": ""}}, open_task)

    good = _episode(open_task, run)
    verdict = judging.judge_episode(config=run.config, trajectory=good, task=open_task,
                                    final_screen=png(GREEN), env_reward=0.0)  # fmt: skip
    assert verdict["reward"] == 1.0 and verdict["success"] and verdict["correct_steps"] == 2
    assert verdict["model"] == "orm-7b" and "confirmation" in verdict["reason"]
    request = judge_server.requests[-1]
    assert request["model"] == "orm-7b" and request["temperature"] == 0.0
    parts = request["messages"][-1]["content"]
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    assert (
        "Save the document as report.odt" in text
        and "Thought: Press Save." in text
        and "Final screen:" in text
    )
    assert sum(p["type"] == "image_url" for p in parts) == 2  # the last two screens: step 2 and the final one
    assert "Environment reward" not in text  # nothing to report for a task without a verifier

    # What the rollout calls at the end of an episode, with the screen after its last action.
    from rl_control.engine.rollout import _judge

    assert _judge(run, good, scored, png(GREEN), 1.0) is None  # a verifier scores this task
    via_rollout = _judge(run, good, open_task, png(GREEN), 0.0)
    assert via_rollout is not None and via_rollout["reward"] == 1.0 and via_rollout["env_reward"] == 0.0
    assert _judge(run, good, open_task, png(RED), 0.0)["reward"] == 0.0

    bad = _episode(open_task, run)
    verdict = judging.judge_episode(config=run.config, trajectory=bad, task=open_task,
                                    final_screen=png(RED), env_reward=0.0)  # fmt: skip
    assert verdict["reward"] == 0.0 and not verdict["success"] and verdict["correct_steps"] == 1

    # The rollout stores the verdict with the episode (rollout._close); replay shows it.
    store.trajectory_finish(trajectory=good, status="completed", final_reward=1.0, success=True)
    Trajectory.objects.filter(pk=good.pk).update(metadata={"engine": {"judge": {**verdict, "success": True,
                                                                                "reason": "saved"}}})  # fmt: skip
    replay = api("researcher").get(f"/api/rl/trajectories/{good.pk}/replay/").json()
    assert replay["judge"]["role"] == "reward" and replay["judge"]["success"] is True
    assert replay["judge"]["model"] == "orm-7b" and replay["judge"]["reason"] == "saved"


@pytest.mark.django_db
def test_a_judge_without_a_verdict_fails_the_episode(users, judge_server) -> None:
    pool = TaskPoolFactory(name="open-ended-2")
    task = TaskFactory(pool=pool, env_kind="desktop", source="custom", verifier={})
    run = services.run_create(user=users["researcher"], name="j", preset="grpo-dart", pool=pool,
                              config={"env": {"kind": "desktop"}, "judge": {"url": judge_server.url}})  # fmt: skip
    judge_server.server.mode = "mute"
    with pytest.raises(judging.JudgeFailed, match="no verdict"):
        judging.judge_episode(config=run.config, trajectory=_episode(task, run), task=task,
                              final_screen=png(GREEN), env_reward=0.0)  # fmt: skip
    unreachable = {**run.config, "judge": {**run.config["judge"], "url": "http://127.0.0.1:9/v1"}}
    with pytest.raises(judging.JudgeFailed):
        judging.judge_episode(config=unreachable, trajectory=_episode(task, run), task=task,
                              final_screen=None, env_reward=0.0)  # fmt: skip
