"""Issue 33: an OSWorld task whose episode scores more than 0 with no action is disabled with the
reason, whenever that is found (the import's no-action check may have said "ok")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webapp.store import services as store
from webapp.store.importers import task_import_run
from webapp.store.models import Task

pytestmark = pytest.mark.django_db

TASK = {
    "id": "later",
    "snapshot": "os",
    "instruction": "Create ~/done.",
    "source": "flywheel-tests",
    "config": [],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "test -e ~/done && echo yes", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
    },
}


def _imported(tmp_path: Path, task_id: str) -> Task:
    (tmp_path / f"{task_id}.json").write_text(json.dumps({**TASK, "id": task_id}))
    result = task_import_run(
        pool_name=f"later-{task_id}", create_pool=True, paths=[tmp_path / f"{task_id}.json"]
    )
    return Task.objects.get(pk=result.task_ids[0])


def test_an_episode_scoring_with_no_action_disables_the_task(tmp_path: Path) -> None:
    task = _imported(tmp_path, "no-action")
    assert task.enabled and task.supported
    trajectory = store.trajectory_create(task=task, source="annotation")
    store.trajectory_finish(trajectory=trajectory, status="completed", final_reward=0.5)
    task.refresh_from_db()
    assert not task.enabled and not task.supported
    assert task.unsupported_reasons == [
        f"passes without action: scored 0.5 with no action (trajectory {trajectory.pk})"
    ]


def test_an_episode_with_actions_or_no_score_leaves_the_task_alone(tmp_path: Path) -> None:
    task = _imported(tmp_path, "acted")
    acted = store.trajectory_create(task=task, source="annotation")
    store.step_append(
        trajectory=acted, screenshot=b"\x89PNG", image_format="png", fields={"action_text": "x"}
    )
    store.trajectory_finish(trajectory=acted, status="completed", final_reward=1.0)
    idle = store.trajectory_create(task=task, source="annotation")
    store.trajectory_finish(trajectory=idle, status="completed", final_reward=0.0)
    task.refresh_from_db()
    assert task.enabled and task.supported and task.unsupported_reasons == []
