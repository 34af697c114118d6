"""`manage.py import_tasks` and `POST /api/tasks/import/` (admins only)."""

from __future__ import annotations

import io
import json
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import include, path

from webapp.store.models import Task, TaskPool

pytestmark = pytest.mark.django_db

# The lead includes import_views from webapp/store/api/urls.py; this urlconf works before and after.
urlpatterns = [
    path("api/", include("webapp.store.api.import_views")),
    path("api/", include("webapp.store.api.urls")),
]
URL = "/api/tasks/import/"


def osworld(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "snapshot": "os",
        "instruction": f"Do {task_id}",
        "config": [],
        "related_apps": ["os"],
        "evaluator": {
            "func": "check_include_exclude",
            "result": {"type": "vm_command_line", "command": "echo ok", "shell": True},
            "expected": {"type": "rule", "rules": {"include": ["ok"], "exclude": []}},
        },
        **extra,
    }


# ---------------------------------------------------------------- command


def test_command_imports_and_prints_counts(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(osworld("a")))
    out = StringIO()
    call_command("import_tasks", str(tmp_path / "a.json"), "--pool", "cmd", "--create-pool", stdout=out)
    assert "pool 'cmd' (pool created): 1 created, 0 updated" in out.getvalue()
    out = StringIO()
    call_command("import_tasks", str(tmp_path), "--pool", "cmd", "--miniwob", "click-test", stdout=out)
    assert "1 created, 1 updated" in out.getvalue()
    assert set(Task.objects.values_list("external_id", flat=True)) == {"a", "click-test"}


def test_command_prints_issues_and_fails(tmp_path: Path) -> None:
    bad = osworld("b")
    bad["evaluator"].pop("func")
    (tmp_path / "b.json").write_text(json.dumps(bad))
    err = StringIO()
    with pytest.raises(CommandError, match="nothing imported: 1 issue"):
        call_command("import_tasks", str(tmp_path / "b.json"), "--pool", "cmd", "--create-pool", stderr=err)
    assert f"{tmp_path / 'b.json'}: evaluator.func: missing" in err.getvalue()
    assert not TaskPool.objects.exists()


def test_command_reports_unsupported_tasks(tmp_path: Path) -> None:
    task = osworld(
        "gui", config=[{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://x.org"]}}]
    )
    (tmp_path / "gui.json").write_text(json.dumps(task))
    out = StringIO()
    call_command(
        "import_tasks", str(tmp_path), "--pool", "cmd", "--create-pool", "--format", "osworld", stdout=out
    )
    assert "1 task(s) cannot run locally and were imported disabled" in out.getvalue()
    assert Task.objects.get(external_id="gui").enabled is False


# ---------------------------------------------------------------- API


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


@pytest.mark.urls(__name__)
def test_admin_imports_then_reimports(api: Any) -> None:
    client = api("admin")
    body = {"pool": "up", "create_pool": "true", "file": _upload("t.json", json.dumps(osworld("t")).encode())}
    response = client.post(URL, body, format="multipart")
    assert response.status_code == 201, response.content
    assert (response.data["created"], response.data["updated"]) == (1, 0)
    assert response.data["tasks"][0]["external_id"] == "t"
    assert response.data["tasks"][0]["pool"] == "up"

    body = {"pool": "up", "file": _upload("t.json", json.dumps(osworld("t", instruction="Again")).encode())}
    response = client.post(URL, body, format="multipart")
    assert response.status_code == 200
    assert (response.data["created"], response.data["updated"]) == (0, 1)
    assert Task.objects.get(external_id="t").instruction == "Again"


@pytest.mark.urls(__name__)
def test_admin_uploads_archive_and_miniwob_names(api: Any) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("os/a.json", json.dumps(osworld("a")))
        zf.writestr("list.jsonl", json.dumps({"id": "j", "instruction": "x", "env_kind": "browser"}))
    body = {
        "pool": "arch",
        "create_pool": "true",
        "file": _upload("tasks.zip", buffer.getvalue()),
        "miniwob": "click-test, click-link",
    }
    response = api("admin").post(URL, body, format="multipart")
    assert response.status_code == 201, response.content
    assert response.data["created"] == 4
    assert {t["external_id"] for t in response.data["tasks"]} == {"a", "j", "click-test", "click-link"}


@pytest.mark.urls(__name__)
def test_bad_upload_returns_issues_and_writes_nothing(api: Any) -> None:
    bad = osworld("b")
    bad["evaluator"].pop("func")
    body = {"pool": "up", "create_pool": "true", "file": _upload("tasks/abc.json", json.dumps(bad).encode())}
    response = api("admin").post(URL, body, format="multipart")
    assert response.status_code == 400
    assert response.data["issues"] == [
        {
            "file": "abc.json",
            "field": "evaluator.func",
            "reason": "missing",
            "message": "abc.json: evaluator.func: missing",
        }
    ]
    assert not TaskPool.objects.exists()


@pytest.mark.urls(__name__)
def test_missing_file_and_names_is_400(api: Any) -> None:
    response = api("admin").post(URL, {"pool": "up"}, format="multipart")
    assert response.status_code == 400
    assert "give a file" in json.dumps(response.data)


@pytest.mark.urls(__name__)
def test_oversized_upload_is_413(api: Any, settings: Any) -> None:
    settings.TASK_IMPORT_MAX_UPLOAD_BYTES = 1000
    body = {"pool": "up", "create_pool": "true", "file": _upload("big.json", b" " * 5000)}
    response = api("admin").post(URL, body, format="multipart")
    assert response.status_code == 413
    assert "limit is 1000 bytes" in response.data["detail"]
    assert not TaskPool.objects.exists()


@pytest.mark.urls(__name__)
@pytest.mark.parametrize(("role", "expected"), [("annotator", 403), ("reviewer", 403), ("researcher", 403),
                                                ("nobody", 403), (None, 403)])  # fmt: skip
def test_import_forbidden_for_other_roles(api: Any, role: str | None, expected: int) -> None:
    body = {"pool": "up", "create_pool": "true", "file": _upload("t.json", json.dumps(osworld("t")).encode())}
    response = api(role).post(URL, body, format="multipart")
    assert response.status_code == expected
    assert not Task.objects.exists()


@pytest.mark.urls(__name__)
def test_several_files_import_the_good_ones_and_report_the_bad_ones_per_file(api: Any) -> None:
    bad = osworld("b")
    bad["evaluator"].pop("func")
    lines = (
        b'{"id": "j1", "instruction": "one", "env_kind": "browser"}\n{"id": "j2", "env_kind": "browser"}\n'
    )
    files = [_upload("good.json", json.dumps(osworld("g")).encode()), _upload("bad.json", json.dumps(bad).encode()),
             _upload("list.jsonl", lines), _upload("again.json", json.dumps(osworld("g")).encode())]  # fmt: skip
    response = api("admin").post(
        URL, {"pool": "multi", "create_pool": "true", "file": files}, format="multipart"
    )
    assert response.status_code == 201, response.content
    assert response.data["created"] == 1 and response.data["refused_files"] == 3
    assert set(Task.objects.values_list("external_id", flat=True)) == {"g"}
    by_file = {f["file"]: f for f in response.data["files"]}
    assert by_file["good.json"]["ok"] and by_file["good.json"]["tasks"][0]["external_id"] == "g"
    assert by_file["bad.json"]["issues"][0]["field"] == "evaluator.func"
    assert [i["file"] for i in by_file["list.jsonl"]["issues"]] == [
        "list.jsonl:line 2"
    ]  # the refused task's line
    assert "duplicate id 'g'" in by_file["again.json"]["issues"][0]["reason"]


@pytest.mark.urls(__name__)
def test_preview_reads_everything_and_writes_nothing(api: Any) -> None:
    TaskPool.objects.create(name="prev")
    client = api("admin")
    first = {"pool": "prev", "file": _upload("t.json", json.dumps(osworld("t")).encode())}
    assert client.post(URL, first, format="multipart").status_code == 201
    files = [_upload("t.json", json.dumps(osworld("t")).encode()), _upload("notes.txt", b"hello")]
    response = client.post(URL + "preview/", {"pool": "prev", "file": files}, format="multipart")
    assert response.status_code == 200, response.content
    by_file = {f["file"]: f for f in response.data["files"]}
    assert by_file["t.json"]["tasks"][0]["exists"] is True  # re-import: an update
    assert by_file["notes.txt"]["ok"] is False
    assert "unknown file type" in by_file["notes.txt"]["issues"][0]["reason"]
    assert response.data["pool_exists"] is True and response.data["refused_files"] == 1
    assert Task.objects.count() == 1
    files = [_upload("t.json", json.dumps(osworld("t")).encode())]
    denied = api("annotator").post(URL + "preview/", {"pool": "prev", "file": files}, format="multipart")
    assert denied.status_code == 403


def test_command_imports_the_good_files_of_a_folder_and_reports_the_bad_ones(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(osworld("a")))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text(json.dumps(osworld("b")))
    bad = osworld("c")
    bad["evaluator"].pop("func")
    (tmp_path / "sub" / "c.json").write_text(json.dumps(bad))
    (tmp_path / "d.json").write_text("{not json")
    out, err = StringIO(), StringIO()
    call_command("import_tasks", str(tmp_path), "--pool", "mixed", "--create-pool", stdout=out, stderr=err)
    assert "2 created" in out.getvalue() and "2 file(s) refused" in out.getvalue()
    assert f"{tmp_path / 'sub' / 'c.json'}: evaluator.func: missing" in err.getvalue()
    assert f"{tmp_path / 'd.json'}: invalid JSON" in err.getvalue()
    assert sorted(Task.objects.filter(pool__name="mixed").values_list("external_id", flat=True)) == ["a", "b"]


@pytest.mark.urls(__name__)
def test_a_folder_upload_names_files_by_their_path_inside_it(api: Any) -> None:
    """Browsers send only a file's base name: the pools page sends each file's path inside the chosen
    folder beside it, and the reports name files by it (two `tasks.json` in different folders stay
    apart); a hostile path is refused with a 400 naming the field, nothing read or written."""
    bad = osworld("b")
    bad["evaluator"].pop("func")
    files = [
        _upload("tasks.json", json.dumps(osworld("a")).encode()),
        _upload("tasks.json", json.dumps(bad).encode()),
    ]
    body = {
        "pool": "paths",
        "create_pool": "true",
        "file": files,
        "path": ["os/tasks.json", "calc/more/tasks.json"],
    }
    client = api("admin")
    preview = client.post(URL + "preview/", body, format="multipart")
    assert preview.status_code == 200, preview.content
    assert [f["file"] for f in preview.data["files"]] == ["os/tasks.json", "calc/more/tasks.json"]
    assert preview.data["files"][1]["issues"][0]["file"].startswith("calc/more/tasks.json")
    done = client.post(URL, {**body, "file": [_upload("tasks.json", json.dumps(osworld("a")).encode()),
                                              _upload("tasks.json", json.dumps(bad).encode())]}, format="multipart")  # fmt: skip
    assert done.status_code == 201 and done.data["files"][0]["file"] == "os/tasks.json"

    def refused(paths: list[str]) -> dict[str, Any]:
        upload = [_upload("x.json", json.dumps(osworld("x")).encode()) for _ in paths]
        r = client.post(
            URL + "preview/", {"pool": "paths", "file": upload, "path": paths}, format="multipart"
        )
        assert r.status_code == 400, (paths, r.status_code, r.content)
        return r.json()

    for hostile in ("../x.json", "/etc/x.json", "a/../../x.json", "a//x.json", ".git/x.json", "a\\b/x.json",
                    "a/\u202ex.json", "d/" * 40 + "x.json", "y" * 1001 + "/x.json"):  # fmt: skip
        assert "path" in refused([hostile]), hostile
    assert "does not end in the file's name" in json.dumps(refused(["sub/other.json"]))
    two = [_upload("x.json", b"{}"), _upload("x.json", b"{}")]
    mismatch = client.post(
        URL + "preview/", {"pool": "paths", "file": two, "path": ["a/x.json"]}, format="multipart"
    )
    assert mismatch.status_code == 400 and "one path per file" in json.dumps(mismatch.json())
    assert Task.objects.filter(external_id="x").count() == 0


def test_a_folder_of_more_than_a_hundred_files_imports_file_by_file(api: Any) -> None:
    """Issue 33: the pools page's folder import of over 100 files answered "The request was not
    valid" (Django's DATA_UPLOAD_MAX_NUMBER_FILES); now every file is read, each with its report."""
    bad = osworld("bad")
    bad["evaluator"].pop("func")
    files = [_upload(f"t{i}.json", json.dumps(osworld(f"many-{i}")).encode()) for i in range(150)]
    files.append(_upload("bad.json", json.dumps(bad).encode()))
    paths = [f"suite/os/t{i}.json" for i in range(150)] + ["suite/os/bad.json"]
    body = {"pool": "many", "create_pool": "true", "file": files, "path": paths}
    response = api("admin").post(URL, body, format="multipart")
    assert response.status_code == 201, response.content[:300]
    reports = response.data["files"]
    assert len(reports) == 151 and sum(r["ok"] for r in reports) == 150
    assert Task.objects.filter(pool__name="many").count() == 150


def test_an_archive_imports_file_by_file_and_names_windows_variants(api: Any) -> None:
    """One bad file no longer refuses the archive; the Windows variants (same ids as the Linux
    tasks) are skipped and named, not refused as duplicates."""
    bad = osworld("bad")
    bad["evaluator"].pop("func")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("examples/os/a.json", json.dumps(osworld("a")))
        zf.writestr("examples/os/b.json", json.dumps(osworld("b")))
        zf.writestr("examples/os/bad.json", json.dumps(bad))
        zf.writestr("examples/Windows/os/a.json", json.dumps(osworld("a")))
    body = {"pool": "zipped", "create_pool": "true", "file": [_upload("suite.zip", buf.getvalue())]}
    response = api("admin").post(URL, body, format="multipart")
    assert response.status_code == 201, response.content[:300]
    by_file = {r["file"]: r for r in response.data["files"]}
    assert by_file["suite.zip!examples/os/a.json"]["ok"] and by_file["suite.zip!examples/os/b.json"]["ok"]
    assert not by_file["suite.zip!examples/os/bad.json"]["ok"]
    windows = by_file["suite.zip!examples/Windows/os/a.json"]["issues"][0]["message"]
    assert "Windows variant" in windows and "duplicate" not in windows
    assert set(Task.objects.filter(pool__name="zipped").values_list("external_id", flat=True)) == {"a", "b"}
