"""The independent check (`manage.py osworld_check`): OSWorld tasks solved by hand (an approved
annotation trajectory) scored with no action and replayed, on real desktops with real evaluators;
both scores recorded on the task, a task that passes with no action disabled."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.store.test_osworld_check import BASE
from webapp.store.importers import task_import_run
from webapp.store.models import ReviewState, Step, Task, Trajectory, TrajectorySource, TrajectoryStatus

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("wmctrl") is None, reason="make osworld-apps installs wmctrl"),
]

# the same task shape as the import check's tests: a file ~/done decides the score
# The annotator's actions: the terminal (top left of the session's desktop), then the command.
SOLVED: list[list[dict[str, Any]]] = [
    [{"kind": "click", "point": [200, 200]}],
    [{"kind": "type", "text": "touch ~/done\n"}],
    [{"kind": "wait"}],
    [{"kind": "finished"}],
]


def _task(task_id: str, setup_command: str) -> dict[str, Any]:
    task = copy.deepcopy(BASE)
    config = [{"type": "command", "parameters": {"command": setup_command, "shell": True}}]
    task.update(id=task_id, instruction=f"Create ~/done ({task_id}).", config=config)
    return task


def _approved_trajectory(task: Task, steps: list[list[dict[str, Any]]], review: str) -> Trajectory:
    trajectory = Trajectory.objects.create(
        task=task,
        env_kind="desktop",
        source=TrajectorySource.ANNOTATION,
        status=TrajectoryStatus.COMPLETED,
        final_reward=1.0,
        review_state=review,
        num_steps=len(steps),
        metadata={"seed": 0},
    )
    for index, actions in enumerate(steps):
        Step.objects.create(trajectory=trajectory, index=index, action=actions, coord_convention="screen")
    return trajectory


def test_tasks_solved_by_hand_are_checked_with_no_action_and_solved(tmp_path: Path) -> None:
    tasks = [
        _task("honest", "rm -f ~/done"),
        _task("passes", "touch ~/done"),  # its set-up already does the work
        _task("unreviewed", "rm -f ~/done"),  # solved, but no reviewer approved it: no reference
    ]
    for task in tasks:
        (tmp_path / f"{task['id']}.json").write_text(json.dumps(task))
    result = task_import_run(pool_name="refcheck", create_pool=True, paths=[tmp_path])
    assert result.created == 3 and result.unsupported == 0
    rows = {t.external_id: t for t in Task.objects.filter(pool__name="refcheck")}
    honest = _approved_trajectory(rows["honest"], SOLVED, ReviewState.APPROVED)
    _approved_trajectory(rows["passes"], SOLVED, ReviewState.APPROVED)
    _approved_trajectory(rows["unreviewed"], SOLVED, ReviewState.PENDING)

    report = tmp_path / "report.json"
    with pytest.raises(CommandError, match="1 task"):  # "passes" is not correct: the command fails
        call_command("osworld_check", pool="refcheck", report=str(report))

    data = json.loads(report.read_text())
    assert data["checked"] == 2 and data["correct"] == 1 and data["passes_without_action"] == 1
    by_id = {r["id"]: r for r in data["tasks"]}
    assert set(by_id) == {"honest", "passes"}
    assert by_id["honest"]["reference"] == f"trajectory {honest.pk}"
    assert (by_id["honest"]["no_action"], by_id["honest"]["solved"], by_id["honest"]["correct"]) == (
        0.0,
        1.0,
        True,
    )
    assert (by_id["passes"]["no_action"], by_id["passes"]["correct"]) == (1.0, False)

    rows = {t.external_id: t for t in Task.objects.filter(pool__name="refcheck")}
    assert rows["honest"].enabled and rows["honest"].reference_check["correct"] is True
    assert rows["honest"].reference_check["solved"] == 1.0
    assert not rows["passes"].enabled and not rows["passes"].supported
    assert "independent check" in rows["passes"].unsupported_reasons[-1]
    assert rows["unreviewed"].enabled and rows["unreviewed"].reference_check == {}

    # bench osworld counts the recorded check of the task solved by hand in its correct_share
    from benchmarks.osworld import _hand_solved

    assert {r["id"]: r["correct"] for r in _hand_solved()} == {"honest": True, "passes": False}


def test_osworld_check_refuses_an_unknown_pool() -> None:
    with pytest.raises(CommandError, match="no OSWorld tasks"):
        call_command("osworld_check", pool="no-such-pool")
