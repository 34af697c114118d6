"""OSWorld task JSON import: files, folders, archives, validation, support flags, upsert."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from webapp.store.importers import SourceFile, TaskImportError, task_import_run
from webapp.store.importers.osworld import check_supported, osworld_task_json
from webapp.store.models import Task, TaskPool
from webapp.store.services import task_difficulty_score

pytestmark = pytest.mark.django_db


def shell_task(task_id: str, **overrides: Any) -> dict[str, Any]:
    """An OSWorld `os` task the local desktop can run: shell setup, command-line result, rule match."""
    task = {
        "id": task_id,
        "snapshot": "os",
        "instruction": f"Create the file {task_id}.txt in the home folder.",
        "source": "https://example.org/howto",
        "config": [{"type": "execute", "parameters": {"command": f"rm -f ~/{task_id}.txt", "shell": True}}],
        "related_apps": ["os"],
        "evaluator": {
            "func": "check_include_exclude",
            "result": {"type": "vm_command_line", "command": f"ls ~/{task_id}.txt", "shell": True},
            "expected": {
                "type": "rule",
                "rules": {"include": [f"{task_id}.txt"], "exclude": ["No such file"]},
            },
        },
    }
    task.update(overrides)
    return task


# Shaped like xlang-ai/OSWorld evaluation_examples/examples/chrome/*: browser setup and a file getter.
CHROME_TASK = {
    "id": "bb5e4c0d-f964-439c-97b6-bdb9747de3f4",
    "snapshot": "chrome",
    "instruction": "Can you make Bing the main search engine when I look stuff up on the internet?",
    "source": "https://support.google.com/chrome/answer/95426",
    "config": [
        {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://www.bing.com"]}},
    ],
    "trajectory": "trajectories/",
    "related_apps": ["chrome"],
    "evaluator": {
        "postconfig": [{"type": "launch", "parameters": {"command": ["pkill", "chrome"]}}],
        "func": "match_in_list",
        "result": {"type": "default_search_engine"},
        "expected": {"type": "rule", "rules": {"expected": ["Microsoft Bing", "Bing"]}},
    },
}


def write(path: Path, task: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(task, indent=2))
    return path


def test_single_file_imports_desktop_task_with_setup_and_verifier(tmp_path: Path) -> None:
    path = write(tmp_path / "os" / "t1.json", shell_task("t1"))
    result = task_import_run(pool_name="osw", create_pool=True, paths=[path])
    assert (result.created, result.updated, result.pool_created) == (1, 0, True)
    task = Task.objects.get(pool__name="osw", external_id="t1")
    assert task.env_kind == "desktop"
    assert task.source == "osworld"
    assert task.instruction == "Create the file t1.txt in the home folder."
    assert task.setup["osworld"][0]["type"] == "execute"
    assert task.setup["snapshot"] == "os"
    assert task.setup["related_apps"] == ["os"]
    assert task.verifier["osworld"]["func"] == "check_include_exclude"
    assert task.supported and task.enabled and task.unsupported_reasons == []
    assert task.difficulty == task_difficulty_score(
        steps=10, cross_page=False, prerequisites=1, exceptions=False
    )
    assert result.task_ids == [task.pk]


def test_os_alone_does_not_make_a_task_cross_application(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", shell_task("t", related_apps=["os", "terminal"]))
    task_import_run(pool_name="osw", create_pool=True, paths=[path])
    assert Task.objects.get(external_id="t").difficulty_cross_page is False


def test_unsupported_task_is_imported_disabled_with_reasons(tmp_path: Path) -> None:
    path = write(tmp_path / "chrome.json", CHROME_TASK)
    result = task_import_run(pool_name="osw", create_pool=True, paths=[path])
    task = Task.objects.get(external_id=CHROME_TASK["id"])
    assert result.unsupported == 1
    assert not task.supported
    assert not task.enabled
    assert task.unsupported_reasons, "an unsupported task must say why"
    assert all(isinstance(r, str) and r for r in task.unsupported_reasons)


def test_missing_evaluator_func_imports_nothing_and_names_file_field_reason(tmp_path: Path) -> None:
    good = write(tmp_path / "tasks" / "good.json", shell_task("good"))
    bad_task = shell_task("bad")
    del bad_task["evaluator"]["func"]
    bad = write(tmp_path / "tasks" / "abc.json", bad_task)
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, paths=[good, bad])
    assert [str(i) for i in caught.value.issues] == [f"{bad}: evaluator.func: missing"]
    assert Task.objects.count() == 0
    assert not TaskPool.objects.filter(name="osw").exists(), "the pool is not created by a refused import"


@pytest.mark.parametrize(
    ("mutate", "field", "reason_part"),
    [
        (lambda t: t.pop("id"), "id", "missing"),
        (lambda t: t.update(instruction="  "), "instruction", "non-empty"),
        (lambda t: t.update(config={"type": "execute"}), "config", "must be a list"),
        (lambda t: t["config"][0].pop("type"), "config[0].type", "missing"),
        (lambda t: t.pop("evaluator"), "evaluator", "missing"),
        (lambda t: t["evaluator"].pop("result"), "evaluator.result", "missing"),
        (lambda t: t["evaluator"].update(func=["exact_match", "exact_match"]), "evaluator.result", "one entry per"),
        (lambda t: t["evaluator"].update(conj="xor", func=["infeasible"], result=None, expected=None),
         "evaluator.conj", "'and' or 'or'"),
        (lambda t: t["evaluator"].update(postconfig=[{"parameters": {}}]), "evaluator.postconfig[0].type", "missing"),
        (lambda t: t.update(related_apps="os"), "related_apps", "list"),
    ],
)  # fmt: skip
def test_each_bad_field_is_named(tmp_path: Path, mutate: Any, field: str, reason_part: str) -> None:
    task = shell_task("t")
    mutate(task)
    path = write(tmp_path / "t.json", task)
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, paths=[path])
    assert any(
        i.file == str(path) and i.field == field and reason_part in i.reason for i in caught.value.issues
    ), caught.value.issues
    assert Task.objects.count() == 0


def test_infeasible_task_needs_no_result(tmp_path: Path) -> None:
    task = shell_task("inf", evaluator={"func": "infeasible"})
    task_import_run(pool_name="osw", create_pool=True, paths=[write(tmp_path / "inf.json", task)])
    assert Task.objects.get(external_id="inf").verifier == {"osworld": {"func": "infeasible"}}


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "id": "x",\n  "instruction": oops\n}')
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, paths=[path])
    (issue,) = caught.value.issues
    assert issue.file == str(path)
    assert "line 3" in issue.reason


def test_folder_is_read_recursively_and_ignores_other_files(tmp_path: Path) -> None:
    write(tmp_path / "examples" / "os" / "a.json", shell_task("a"))
    write(tmp_path / "examples" / "chrome" / "deep" / "b.json", shell_task("b"))
    (tmp_path / "examples" / "README.md").write_text("not a task")
    result = task_import_run(pool_name="osw", create_pool=True, paths=[tmp_path / "examples"], fmt="osworld")
    assert result.created == 2
    assert set(Task.objects.values_list("external_id", flat=True)) == {"a", "b"}


def test_duplicate_ids_across_files_are_refused(tmp_path: Path) -> None:
    one = write(tmp_path / "one.json", shell_task("same"))
    two = write(tmp_path / "two.json", shell_task("same"))
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, paths=[one, two])
    assert caught.value.issues[0].file == str(two)
    assert "duplicate id 'same'" in caught.value.issues[0].reason
    assert Task.objects.count() == 0


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _targz(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tf.addfile(info)
    return buffer.getvalue()


def test_zip_and_targz_archives_import(tmp_path: Path) -> None:
    zip_path = tmp_path / "tasks.zip"
    zip_path.write_bytes(_zip({"os/z1.json": json.dumps(shell_task("z1")).encode(), "notes.txt": b"ignored"}))
    tgz = SourceFile("upload.tar.gz", _targz({"examples/os/g1.json": json.dumps(shell_task("g1")).encode()}))
    result = task_import_run(pool_name="osw", create_pool=True, paths=[zip_path], uploads=[tgz])
    assert result.created == 2
    assert set(Task.objects.values_list("external_id", flat=True)) == {"z1", "g1"}


@pytest.mark.parametrize("evil", ["../escape.json", "/etc/evil.json", "os/../../evil.json"])
def test_archive_with_path_traversal_is_refused(evil: str) -> None:
    ok = json.dumps(shell_task("ok")).encode()
    for upload in (
        SourceFile("evil.zip", _zip({"ok.json": ok, evil: ok})),
        SourceFile("evil.tar.gz", _targz({"ok.json": ok, evil: ok})),
    ):
        with pytest.raises(TaskImportError) as caught:
            task_import_run(pool_name="osw", create_pool=True, uploads=[upload])
        (issue,) = caught.value.issues
        assert issue.file == f"{upload.name}!{evil}"
        assert "refused" in issue.reason
    assert Task.objects.count() == 0


def test_archive_with_symlink_is_refused() -> None:
    upload = SourceFile(
        "links.tar.gz", _targz({"ok.json": json.dumps(shell_task("ok")).encode()}, symlink="x.json")
    )
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, uploads=[upload])
    assert "link" in caught.value.issues[0].reason
    assert Task.objects.count() == 0


def test_oversized_archive_member_is_refused(settings: Any) -> None:
    settings.TASK_IMPORT_MAX_FILE_BYTES = 2000
    big = json.dumps(shell_task("big", instruction="x" * 5000)).encode()
    upload = SourceFile(
        "big.zip", _zip({"small.json": json.dumps(shell_task("s")).encode(), "big.json": big})
    )
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", create_pool=True, uploads=[upload])
    (issue,) = caught.value.issues
    assert issue.file == "big.zip!big.json"
    assert "limit is 2000 bytes" in issue.reason
    assert Task.objects.count() == 0


def test_archive_over_the_total_budget_is_refused(settings: Any) -> None:
    settings.TASK_IMPORT_MAX_TOTAL_BYTES = 3000
    members = {f"t{i}.json": json.dumps(shell_task(f"t{i}")).encode() for i in range(10)}
    with pytest.raises(TaskImportError) as caught:
        task_import_run(
            pool_name="osw", create_pool=True, uploads=[SourceFile("many.tar.gz", _targz(members))]
        )
    (issue,) = caught.value.issues
    assert issue.file == "many.tar.gz"
    assert "more than 3000 bytes uncompressed" in issue.reason
    assert Task.objects.count() == 0


def test_multi_metric_evaluator_imports_and_checks_entries(tmp_path: Path) -> None:
    evaluator = {
        "func": ["check_include_exclude", "exact_match"],
        "conj": "or",
        "result": [
            {"type": "vm_command_line", "command": "echo a"},
            {"type": "vm_command_line", "command": "echo b"},
        ],
        "expected": [{"type": "rule", "rules": {"include": ["a"], "exclude": []}}, None],
        "options": [{}, {}],
    }
    good = write(tmp_path / "multi.json", shell_task("multi", evaluator=evaluator))
    task_import_run(pool_name="osw", create_pool=True, paths=[good])
    assert Task.objects.get(external_id="multi").verifier["osworld"]["conj"] == "or"
    bad = write(
        tmp_path / "bad.json", shell_task("bad", evaluator={**evaluator, "result": [None, {"type": "x"}]})
    )
    with pytest.raises(TaskImportError) as caught:
        task_import_run(pool_name="osw", paths=[bad])
    assert [str(i) for i in caught.value.issues] == [
        f"{bad}: evaluator.result[0]: must be an object with a type"
    ]


def test_not_an_archive_is_reported() -> None:
    with pytest.raises(TaskImportError) as caught:
        task_import_run(
            pool_name="osw", create_pool=True, uploads=[SourceFile("junk.zip", b"not a zip at all")]
        )
    assert "not a readable archive" in caught.value.issues[0].reason


def test_reimport_updates_in_place_and_keeps_statistics(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", shell_task("t"))
    first = task_import_run(pool_name="osw", create_pool=True, paths=[path])
    Task.objects.filter(pk=first.task_ids[0]).update(
        attempts=4, successes=1, success_rate=0.25, enabled=False
    )
    write(path, shell_task("t", instruction="A new wording.", related_apps=["os", "gedit", "terminal"]))
    second = task_import_run(pool_name="osw", paths=[path])
    assert (second.created, second.updated) == (0, 1)
    assert second.task_ids == first.task_ids
    task = Task.objects.get(pk=first.task_ids[0])
    assert task.instruction == "A new wording."
    assert task.difficulty_cross_page is True
    assert (task.attempts, task.successes, task.success_rate) == (4, 1, 0.25)
    assert task.enabled is False, "an admin's choice to disable a task survives a re-import"


def test_same_id_in_another_pool_is_a_separate_task(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", shell_task("t"))
    task_import_run(pool_name="a", create_pool=True, paths=[path])
    result = task_import_run(pool_name="b", create_pool=True, paths=[path])
    assert result.created == 1
    assert Task.objects.filter(external_id="t").count() == 2


def test_check_supported_is_the_environment_checker() -> None:
    from workers.envs import osworld

    for task in (shell_task("ok"), CHROME_TASK):
        assert check_supported(task) == osworld.check_supported(task)


def test_stored_task_rebuilds_the_original_osworld_json(tmp_path: Path) -> None:
    original = shell_task("round")
    task_import_run(pool_name="osw", create_pool=True, paths=[write(tmp_path / "round.json", original)])
    assert osworld_task_json(Task.objects.get(external_id="round")) == original
