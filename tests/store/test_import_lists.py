"""JSONL / CSV task lists and MiniWoB++ tasks from the wheel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webapp.store.importers import SourceFile, TaskImportError, task_import_run
from webapp.store.importers.miniwob import miniwob_instruction, miniwob_task_names
from webapp.store.models import Task
from webapp.store.services import task_difficulty_score

pytestmark = pytest.mark.django_db

CSV_GOOD = """external_id,instruction,env_kind,source,setup,verifier,difficulty_steps,difficulty_cross_page,difficulty_prerequisites,difficulty_exceptions,importance,tags
login,Log in as demo,browser,custom,"{""url"": ""http://127.0.0.1:9000/login""}","{""js"": ""window.ok""}",4,yes,1,false,2.5,"auth, web"
ls,List the files,terminal,,,,,,,,,
"""


def test_jsonl_imports_typed_rows(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "j1", "instruction": "Open settings", "env_kind": "desktop", "tags": ["a", "b"], "difficulty_steps": 6,
         "difficulty_exceptions": True, "importance": 3, "setup": {"apps": ["xterm"]}},
        {"external_id": "j2", "instruction": "Tap OK", "env_kind": "phone", "source": "custom", "enabled": False},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    result = task_import_run(pool_name="lists", create_pool=True, paths=[path])
    assert result.created == 2
    j1 = Task.objects.get(external_id="j1")
    assert (j1.env_kind, j1.source, j1.tags, j1.importance) == ("desktop", "custom", ["a", "b"], 3.0)
    assert j1.setup == {"apps": ["xterm"]}
    assert j1.difficulty == task_difficulty_score(steps=6, cross_page=False, prerequisites=0, exceptions=True)
    assert Task.objects.get(external_id="j2").enabled is False


def test_csv_imports_text_columns(tmp_path: Path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text(CSV_GOOD)
    assert task_import_run(pool_name="lists", create_pool=True, paths=[path]).created == 2
    login = Task.objects.get(external_id="login")
    assert login.setup == {"url": "http://127.0.0.1:9000/login"}
    assert login.verifier == {"js": "window.ok"}
    assert login.tags == ["auth", "web"]
    assert (login.difficulty_steps, login.difficulty_cross_page, login.difficulty_prerequisites) == (
        4,
        True,
        1,
    )
    assert login.importance == 2.5
    ls = Task.objects.get(external_id="ls")
    assert (ls.env_kind, ls.source, ls.setup, ls.tags, ls.enabled) == ("terminal", "custom", {}, [], True)


def test_jsonl_errors_carry_line_numbers_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "\n".join([
            json.dumps({"id": "ok", "instruction": "fine", "env_kind": "browser"}),
            "{not json",
            json.dumps({"id": "k", "instruction": "x", "env_kind": "spaceship"}),
            json.dumps({"id": "m", "env_kind": "browser", "difficulty_steps": "many", "colour": "red"}),
        ])
    )  # fmt: skip
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="lists", create_pool=True, paths=[path])
    got = {(i.file, i.field) for i in caught.value.issues}
    assert (f"{path}:line 2", "") in got
    assert (f"{path}:line 3", "env_kind") in got
    assert (f"{path}:line 4", "instruction") in got
    assert (f"{path}:line 4", "difficulty_steps") in got
    assert (f"{path}:line 4", "colour") in got
    reasons = {i.field: i.reason for i in caught.value.issues if i.file.endswith("line 3")}
    assert "'spaceship' is not one of" in reasons["env_kind"]
    assert Task.objects.count() == 0


def test_csv_errors_carry_row_numbers(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        "id,instruction,env_kind,setup,difficulty_cross_page,importance\n"
        "a,Do a,browser,{},no,1\n"
        'b,Do b,browser,"{broken",maybe,-2\n'
    )
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="lists", create_pool=True, paths=[path])
    issues = {i.field: i for i in caught.value.issues}
    assert set(issues) == {"setup", "difficulty_cross_page", "importance"}
    assert all(i.file == f"{path}:row 3" for i in issues.values())
    assert "invalid JSON" in issues["setup"].reason
    assert "true or false" in issues["difficulty_cross_page"].reason
    assert Task.objects.count() == 0


def test_explicit_format_overrides_the_extension() -> None:
    upload = SourceFile("list.txt", b'{"id": "t", "instruction": "x", "env_kind": "browser"}\n')
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="lists", create_pool=True, uploads=[upload])
    assert "unknown file type" in caught.value.issues[0].reason
    assert task_import_run(pool_name="lists", create_pool=True, uploads=[upload], fmt="jsonl").created == 1


def test_csv_reimport_reports_updates(tmp_path: Path) -> None:
    path = tmp_path / "tasks.csv"
    path.write_text(CSV_GOOD)
    task_import_run(pool_name="lists", create_pool=True, paths=[path])
    path.write_text(CSV_GOOD.replace("List the files", "List all the files"))
    result = task_import_run(pool_name="lists", paths=[path])
    assert (result.created, result.updated) == (0, 2)
    assert Task.objects.get(external_id="ls").instruction == "List all the files"


def test_miniwob_imports_every_task_in_the_wheel() -> None:
    names = miniwob_task_names()
    assert len(names) > 100 and "click-test" in names
    result = task_import_run(pool_name="wob", create_pool=True, miniwob=[])
    assert result.created == len(names)
    task = Task.objects.get(external_id="click-test")
    assert (task.env_kind, task.source) == ("browser", "miniwob")
    assert task.instruction == miniwob_instruction("click-test")
    assert task.setup["miniwob"] == {"task": "click-test"}
    assert task.setup["task"] == "click-test"


def test_miniwob_named_subset_and_unknown_names() -> None:
    result = task_import_run(pool_name="wob", create_pool=True, miniwob=["click-button", "enter-text.html"])
    assert result.created == 2
    assert set(Task.objects.values_list("external_id", flat=True)) == {"click-button", "enter-text"}
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="wob", miniwob=["click-button", "no-such-task"])
    (issue,) = caught.value.issues
    assert (issue.file, issue.field) == ("miniwob", "task")
    assert "no-such-task" in issue.reason
    assert Task.objects.count() == 2


def test_nothing_to_import_is_an_error() -> None:
    with pytest.raises(TaskImportError, match="nothing to import"):
        task_import_run(pool_name="wob", create_pool=True)


def test_unknown_pool_without_create_is_refused() -> None:
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="missing", miniwob=["click-test"])
    assert (
        str(caught.value.issues[0])
        == "pool: name: no pool named 'missing'; create it first (or --create-pool)"
    )
    assert Task.objects.count() == 0
