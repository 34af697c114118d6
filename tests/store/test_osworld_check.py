"""The no-action check on imported OSWorld tasks: real desktops, real sandboxes, real evaluators."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from webapp.store.importers import task_import_run
from webapp.store.importers.osworld_check import (
    GIVE_UP_REFERENCE,
    osworld_reference_check,
    osworld_tasks_check,
)
from webapp.store.models import Task
from workers.envs.osworld.check import CheckOutcome, no_action_check

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("wmctrl") is None, reason="make osworld-apps installs wmctrl"),
]

BASE: dict[str, Any] = {
    "snapshot": "os",
    "source": "flywheel-tests",
    "related_apps": ["os"],
    "evaluator": {
        "func": "check_include_exclude",
        "result": {
            "type": "vm_command_line",
            "command": "test -e ~/done && echo yes || echo no",
            "shell": True,
        },
        "expected": {"type": "rule", "rules": {"include": ["yes"], "exclude": ["no"]}},
    },
}


def _task(task_id: str, config: list[dict[str, Any]]) -> dict[str, Any]:
    task = copy.deepcopy(BASE)
    task.update(id=task_id, instruction=f"Create ~/done ({task_id}).", config=config)
    return task


def test_no_action_check_disables_passing_and_broken_tasks(tmp_path: Path) -> None:
    tasks = [
        _task("honest", [{"type": "command", "parameters": {"command": "rm -f ~/done", "shell": True}}]),
        # Its set-up already does the work: it scores success with no action.
        _task("passes", [{"type": "command", "parameters": {"command": "touch ~/done", "shell": True}}]),
        # A window that never shows: the set-up fails.
        _task("broken", [{"type": "activate_window", "parameters": {"window_name": "No Such Window"}}]),
    ]
    for task in tasks:
        (tmp_path / f"{task['id']}.json").write_text(json.dumps(task))
    result = task_import_run(pool_name="checked", create_pool=True, paths=[tmp_path])
    assert result.created == 3 and result.unsupported == 0

    checks = {c.external_id: c for c in osworld_tasks_check(task_ids=result.task_ids)}
    assert {k: c.verdict for k, c in checks.items()} == {
        "honest": "ok",
        "passes": "passes_without_action",
        "broken": "setup_error",
    }
    rows = {t.external_id: t for t in Task.objects.filter(pool__name="checked")}
    assert rows["honest"].enabled and rows["honest"].supported
    assert not rows["passes"].enabled and not rows["passes"].supported
    assert "passes without action" in rows["passes"].unsupported_reasons[-1]
    assert not rows["broken"].enabled
    assert "No Such Window" in rows["broken"].unsupported_reasons[-1]
    # Checking again skips what is already disabled; the management command reports the rest.
    call_command("check_osworld_tasks", pool="checked")
    assert Task.objects.get(pool__name="checked", external_id="honest").enabled


def test_import_api_queues_the_check_and_the_pool_api_runs_it_on_demand(
    api: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from webapp.store.tasks import osworld_task_check

    monkeypatch.setitem(osworld_task_check.app.conf, "task_always_eager", True)
    passes = _task("passes", [{"type": "command", "parameters": {"command": "touch ~/done", "shell": True}}])
    upload = SimpleUploadedFile("passes.json", json.dumps(passes).encode())
    with django_capture_on_commit_callbacks(execute=True):
        response = api("admin").post(
            "/api/tasks/import/",
            {"pool": "viaapi", "create_pool": "true", "file": upload},
            format="multipart",
        )
    assert response.status_code == 201, response.content
    assert response.data["osworld_checks_queued"] == 1
    task = Task.objects.get(pool__name="viaapi", external_id="passes")
    assert not task.enabled and "passes without action" in task.unsupported_reasons[-1]

    # On demand from the pool: nothing enabled is left to check; other roles may not; no such pool is 404.
    url = f"/api/pools/{task.pool_id}/osworld-check/"
    assert api("annotator").post(url).status_code == 403
    assert api("admin").post("/api/pools/999999/osworld-check/").status_code == 404
    Task.objects.filter(pk=task.pk).update(enabled=True, supported=True, unsupported_reasons=[])
    with django_capture_on_commit_callbacks(execute=True):
        response = api("admin").post(url)
    assert response.status_code == 202 and response.data == {"queued": 1}
    assert not Task.objects.get(pk=task.pk).enabled


def test_an_infeasible_task_scores_zero_with_no_action_and_one_after_giving_up(tmp_path: Path) -> None:
    """As OSWorld scores it (DesktopEnv.evaluate): the import check gives up in the same session, the
    independent check on fresh desktops, the task's reference being FAIL (our call_user)."""
    task = _task("cannot", [{"type": "command", "parameters": {"command": "touch ~/ready", "shell": True}}])
    task["evaluator"] = {"func": "infeasible"}
    (tmp_path / "cannot.json").write_text(json.dumps(task))
    result = task_import_run(pool_name="infeasible", create_pool=True, paths=[tmp_path])
    assert result.created == 1 and result.unsupported == 0

    assert no_action_check(task) == CheckOutcome("ok", "", 0.0, gave_up=1.0)  # the import check's
    (record,) = osworld_reference_check(task_ids=result.task_ids)
    assert (record["reference"], record["no_action"], record["solved"]) == (GIVE_UP_REFERENCE, 0.0, 1.0)
    assert record["correct"] and Task.objects.get(pk=result.task_ids[0]).reference_check["correct"]
