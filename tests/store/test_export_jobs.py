"""Archive export jobs: every format's layout, cancellation, and a real Celery worker end to end."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.db import connection
from PIL import Image

from tests.factories import TaskFactory
from webapp.store import services
from webapp.store.models import ExportJob
from webapp.store.tasks import export_job_execute


def _jpeg(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def two_trajectories(db):
    task = TaskFactory(external_id="click-test", instruction="Click the button.")
    trajs = []
    for reward in (1.0, 0.0):
        traj = services.trajectory_create(task=task, source="rl", policy_version="v3")
        for i in range(3):
            services.step_append(
                trajectory=traj,
                screenshot=_jpeg((40 * i, 80, 120)),
                fields={
                    "thought": f"step {i}",
                    "action_text": f"click(start_box='({i},{i})')",
                    "clock_end": i + 0.5,
                },
            )
        services.trajectory_finish(trajectory=traj, status="completed", final_reward=reward)
        trajs.append(traj)
    return trajs


def _run(user, fmt: str) -> tuple[ExportJob, zipfile.ZipFile]:
    job = ExportJob.objects.create(created_by=user, format=fmt, filters={"source": ["rl"]})
    export_job_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert job.progress == 100.0 and job.done_trajectories == job.total_trajectories == 2
    return job, zipfile.ZipFile(job.archive.open("rb"))


def test_native_jsonl_archive(users, two_trajectories) -> None:
    _, zf = _run(users["researcher"], "jsonl")
    records = [json.loads(line) for line in zf.read("trajectories.jsonl").decode().splitlines()]
    assert len(records) == 2
    for record in records:
        for step in record["steps"]:
            assert zf.read(step["screenshot"])[:2] == b"\xff\xd8"  # the JPEG itself is in the archive


def test_sharegpt_has_one_image_token_per_image(users, two_trajectories) -> None:
    _, zf = _run(users["researcher"], "sharegpt")
    samples = json.loads(zf.read("sharegpt.json"))
    assert len(samples) == 2
    for sample in samples:
        tokens = sum(m["content"].count("<image>") for m in sample["messages"])
        assert tokens == len(sample["images"]) == 3
        assert [m["role"] for m in sample["messages"]] == ["user", "assistant"] * 3
        assert sample["messages"][1]["content"].startswith("Thought: step 0\nAction: click")
        for path in sample["images"]:
            zf.getinfo(path)
    assert json.loads(zf.read("dataset_info.json"))["flywheel"]["formatting"] == "sharegpt"


def test_verl_parquet_columns(users, two_trajectories) -> None:
    _, zf = _run(users["researcher"], "verl")
    table = pq.read_table(io.BytesIO(zf.read("train.parquet")))
    assert table.column_names == ["data_source", "prompt", "images", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    assert rows[0]["prompt"][0]["content"].startswith("<image>Click the button.")
    assert rows[0]["images"][0]["bytes"][:2] == b"\xff\xd8"
    assert {json.loads(r["extra_info"])["final_reward"] for r in rows} == {0.0, 1.0}


def test_osworld_layout_has_pngs(users, two_trajectories) -> None:
    _, zf = _run(users["researcher"], "osworld")
    traj_files = [n for n in zf.namelist() if n.endswith("traj.jsonl")]
    assert len(traj_files) == 2
    lines = [json.loads(x) for x in zf.read(traj_files[0]).decode().splitlines()]
    assert [x["step_num"] for x in lines] == [1, 2, 3]
    png = zf.read(traj_files[0].replace("traj.jsonl", lines[0]["screenshot_file"]))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_cancelled_job_is_not_run(users, two_trajectories) -> None:
    job = ExportJob.objects.create(created_by=users["researcher"], format="jsonl")
    services.export_job_cancel(job=job)
    export_job_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "cancelled" and not job.archive


def test_failed_job_ends_terminal_with_error(users, db) -> None:
    job = ExportJob.objects.create(
        created_by=users["researcher"], format="jsonl", filters={"created_after": "x"}
    )
    export_job_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and job.error


@pytest.mark.django_db(transaction=True)
def test_export_job_through_a_real_celery_worker(api, two_trajectories) -> None:
    """POST creates the job; a real worker on the `export` queue builds it; the API serves the zip."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "FLYWHEEL_TEST_MEDIA_ROOT": str(settings.MEDIA_ROOT),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "export", "-P", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        response = api("researcher").post("/api/export-jobs/", {"format": "sharegpt"}, format="json")
        assert response.status_code == 202
        job_id = response.json()["id"]
        deadline = time.monotonic() + 60
        body = {}
        while time.monotonic() < deadline:
            body = api("researcher").get(f"/api/export-jobs/{job_id}/").json()
            if body["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.2)
        assert body["status"] == "succeeded", body
        download = api("researcher").get(f"/api/export-jobs/{job_id}/download/")
        assert download.status_code == 200
        zf = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
        assert len(json.loads(zf.read("sharegpt.json"))) == 2
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)
