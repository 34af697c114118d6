"""A researcher exports trajectories in every format — from the home page in Chromium and through the
REST API with a token — and gets archives their trainers read: each download is checked against the
row shapes of verl, LLaMA-Factory and OSWorld (tests/interop/shapes.py), with hostile free text in
the trajectories. A real Celery worker on the `export` queue builds the archives.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.conftest import PASSWORD
from tests.e2e.test_e2e_roles import USERNAMES, _sign_in
from tests.factories import TaskFactory
from tests.interop import shapes
from tests.interop.test_shapes import HOSTILE, _trajectory
from tests.service_urls import subprocess_database_url

pytestmark = pytest.mark.e2e
FORMATS = ("jsonl", "sharegpt", "verl", "osworld")


@pytest.fixture
def export_worker(live_server) -> Iterator[None]:
    """A Celery worker for the `export` queue on this test's database and media root."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "DATABASE_URL": subprocess_database_url(),
           "FLYWHEEL_TEST_MEDIA_ROOT": str(settings.MEDIA_ROOT)}  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "export", "-P", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        yield
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)


@pytest.fixture
def trajectories(users) -> None:
    task = TaskFactory(external_id="enter-text", instruction="Enter <image> <|im_start|>.")
    _trajectory(task, instruction="Click the OK button.", thought="The button is on the left.",
                actions=[("click(start_box='(10,20)')", {"kind": "click", "point": [10, 20]}),
                         ("finished(content='done')", {"kind": "finished", "text": "done"})], reward=1.0)  # fmt: skip
    _trajectory(task, instruction=HOSTILE, thought=HOSTILE,
                actions=[("type(content='<image>')", {"kind": "type", "text": HOSTILE}),
                         ("call_user()", {"kind": "call_user"})], reward=0.0)  # fmt: skip


def _check(fmt: str, archive: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        files = shapes.archive_files(zf)
    if fmt == "jsonl":
        records = shapes.check_jsonl(files["trajectories.jsonl"])
        assert len(records) == 2 and {r["instruction"] for r in records} >= {HOSTILE}
    elif fmt == "sharegpt":
        assert shapes.check_sharegpt(files) == {"samples": 2}
    elif fmt == "verl":
        assert shapes.check_verl_parquet(files["train.parquet"], files["sft.parquet"]) == {
            "train": 2,
            "sft": 2,
        }
    else:
        assert shapes.check_osworld(files) == {"examples": 2, "results": 2}


def test_researcher_exports_every_format_from_the_page(
    browser, live_server, trajectories, export_worker, shots, tmp_path: Path
) -> None:
    page = _sign_in(browser, live_server.url, "researcher", shots)
    panel = page.get_by_test_id("export")
    for n, fmt in enumerate(FORMATS, 1):
        panel.get_by_label("Format").select_option(fmt)
        panel.get_by_label("Source").select_option("rl")
        panel.get_by_role("button", name="Start export").click()
        expect(panel.locator(".job")).to_have_count(n)
        job = panel.locator(".job").first  # the newest job comes first
        expect(job).to_contain_text(fmt)
        expect(job).to_have_attribute("data-status", "succeeded", timeout=60_000)
        expect(job).to_contain_text("2 / 2 trajectories")
        with page.expect_download() as download:
            job.get_by_role("link", name="Download").click()
        saved = tmp_path / f"{fmt}.zip"
        download.value.save_as(saved)
        _check(fmt, saved.read_bytes())
    page.screenshot(path=str(shots / "export-every-format.png"), full_page=True)
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()


def test_researcher_exports_every_format_through_the_api(live_server, trajectories, export_worker) -> None:
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        issued = client.post(
            "/api/auth/token/", json={"username": USERNAMES["researcher"], "password": PASSWORD}
        )
        assert issued.status_code == 200, issued.text
        client.headers["Authorization"] = f"Token {issued.json()['token']}"
        refused = client.post("/api/export-jobs/", json={"format": "parquet"})
        assert refused.status_code == 400 and "format" in refused.json()
        for fmt in FORMATS:
            created = client.post("/api/export-jobs/", json={"format": fmt, "filters": {"source": ["rl"]}})
            assert created.status_code == 202, created.text
            job = created.json()
            deadline = time.monotonic() + 60
            while job["status"] not in ("succeeded", "failed", "cancelled"):
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
                job = client.get(f"/api/export-jobs/{job['id']}/").json()
            assert job["status"] == "succeeded", job["error"]
            download = client.get(job["download_url"])
            assert download.status_code == 200 and download.headers["content-type"] == "application/zip"
            _check(fmt, download.content)
        streamed = client.get("/api/trajectories/export", params={"format": "jsonl", "source": "rl"})
        assert streamed.status_code == 200
        records = shapes.check_jsonl(streamed.content)
        assert len(records) == 2 and {r["instruction"] for r in records} >= {HOSTILE}
        assert client.get("/api/trajectories/export", params={"format": "verl"}).status_code == 400
