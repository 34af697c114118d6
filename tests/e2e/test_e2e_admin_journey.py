"""The admin's journey in Chromium on `make up`'s stack: import a folder of task files from the pools
page — a preview naming each file by its path inside the folder, the good files imported, the bad
ones reported per file, why a task is unsupported, a task edited in place."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.e2e.journeys import JOURNEY_MARKS, People
from tests.e2e.live_stack import LiveStack

pytestmark = JOURNEY_MARKS


def _osworld(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id, "snapshot": "os", "instruction": f"Create the file /tmp/{task_id}.txt", "config": [],
        "related_apps": ["os"],
        "evaluator": {"func": "check_include_exclude",
                      "result": {"type": "vm_command_line", "command": f"test -f /tmp/{task_id}.txt && echo ok", "shell": True},
                      "expected": {"type": "rule", "rules": {"include": ["ok"], "exclude": []}}},
        **extra,
    }  # fmt: skip


def test_admin_imports_a_folder_of_task_files_from_the_pools_page(
    live_stack: LiveStack, people: People, shots: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(_osworld("e2e-good")))
    bad = _osworld("e2e-bad")
    bad["evaluator"].pop("func")
    (folder / "bad.json").write_text(json.dumps(bad))
    pdf = _osworld("e2e-pdf")
    pdf["evaluator"]["func"] = "compare_image_text"
    (folder / "pdf.json").write_text(json.dumps(pdf))
    (folder / "list.jsonl").write_text(
        json.dumps({"id": "e2e-j1", "instruction": "Open the settings", "env_kind": "browser"}) + "\n"
        + json.dumps({"id": "e2e-j2", "env_kind": "browser"}) + "\n"
    )  # fmt: skip
    (folder / "list.csv").write_text("id,instruction,env_kind,importance\ne2e-c1,Say hello,browser,2.5\n")
    (folder / "README.md").write_text("not a task file")
    # Files are named by their path inside the folder: this one is "more/good.json", not a second "good.json".
    (folder / "more").mkdir()
    (folder / "more" / "good.json").write_text(json.dumps(_osworld("e2e-sub")))
    (folder / ".git").mkdir()
    (folder / ".git" / "config.json").write_text("{}")  # hidden: left out like README.md

    page = people.page("admin")
    page.goto(f"{live_stack.base_url}/pools/")
    page.get_by_test_id("import-pool").fill("e2e-imported")
    page.get_by_test_id("import-folder").set_input_files(str(folder))
    summary = page.get_by_test_id("import-summary")
    expect(summary).to_contain_text("4 tasks can be imported", timeout=30_000)
    expect(summary).to_contain_text("2 files are refused")
    expect(page.get_by_test_id("import-file-bad.json")).to_contain_text("evaluator.func: missing")
    expect(page.get_by_test_id("import-file-list.jsonl")).to_contain_text("line 2")
    expect(page.get_by_test_id("import-file-list.jsonl")).to_contain_text("instruction")
    expect(page.get_by_test_id("import-file-pdf.json")).to_contain_text("unsupported")
    expect(page.get_by_test_id("import-file-pdf.json")).to_contain_text("compare_image_text")
    expect(page.get_by_test_id("import-file-more/good.json")).to_contain_text("more/good.json")
    expect(page.get_by_test_id("import-file-more/good.json")).to_contain_text("e2e-sub")
    expect(page.get_by_test_id("import-file-good.json")).to_contain_text("e2e-good")
    # README.md and (where the browser lists hidden files) .git/config.json
    expect(page.get_by_test_id("import-preview")).to_contain_text(
        re.compile(r"[12] files? in the folder skipped")
    )
    expect(page.get_by_test_id("import-file-.git/config.json")).to_have_count(0)
    page.screenshot(path=str(shots / "pools-import-preview.png"), full_page=True)
    with live_stack.api("admin") as api:
        assert not any(
            p["name"] == "e2e-imported" for p in api.get("/api/pools/?page_size=200").json()["results"]
        )

    page.get_by_test_id("import-go").click()
    expect(page.get_by_test_id("import-result")).to_contain_text("4 created", timeout=30_000)
    expect(page.get_by_test_id("import-result")).to_contain_text("2 files refused")
    # The pool browser shows the new pool with its tasks, and says why a task is unsupported.
    browser_box = page.get_by_test_id("pool-browser")
    expect(browser_box.locator(".pool-tabs a.active")).to_contain_text("e2e-imported", timeout=30_000)
    expect(page.get_by_test_id("unsupported-e2e-pdf")).to_contain_text("compare_image_text")
    expect(page.get_by_test_id("enabled-e2e-pdf")).to_be_disabled()
    # Edit importance and enabled in place.
    importance = page.get_by_test_id("importance-e2e-c1")
    expect(importance).to_have_value("2.5")
    importance.fill("4")
    importance.press("Tab")
    page.get_by_test_id("enabled-e2e-good").uncheck()
    expect(browser_box).to_contain_text("saved")
    expect(page.get_by_test_id("enabled-e2e-good").locator("xpath=ancestor::tr")).to_contain_text("disabled")
    page.screenshot(path=str(shots / "pools-import-done.png"), full_page=True)
    with live_stack.api("admin") as api:
        tasks = {t["external_id"]: t for t in api.get("/api/tasks/?page_size=200").json()["results"]}
    assert tasks["e2e-c1"]["importance"] == 4.0
    assert tasks["e2e-good"]["enabled"] is False
    assert tasks["e2e-pdf"]["supported"] is False and not tasks["e2e-pdf"]["enabled"]
    assert "e2e-bad" not in tasks and "e2e-j1" not in tasks and "e2e-sub" in tasks
    assert not people.errors["admin"], people.errors
