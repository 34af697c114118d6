"""`make test-interop`: fresh exports from the real store, loaded by the consumers' own code.

Real MiniWoB++ episodes (the scripted expert in Chromium, each with its generated instruction and
seed) plus an unfinished and a zero-step trajectory go through the real export jobs (verl, sharegpt,
OSWorld); `scripts/interop/check.py` then runs in the scratch venv (`INTEROP_PYTHON`, built by
`scripts/interop/setup.sh` with verl 0.9.1 and LLaMA-Factory 0.9.5) and loads them with verl's
RLHFDataset and MultiTurnSFTDataset, LLaMA-Factory's get_dataset (qwen2_vl) and OSWorld's reader.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from webapp.store import services as store
from webapp.store.models import ExportJob, Trajectory
from webapp.store.sft_jobs import demos_collect
from webapp.store.tasks import export_job_execute

pytestmark = [pytest.mark.interop, pytest.mark.django_db]
ROOT = Path(__file__).resolve().parents[2]


def test_exports_load_in_verl_llamafactory_and_osworld(users, tmp_path) -> None:
    python = os.environ.get("INTEROP_PYTHON")
    if not python:
        pytest.skip("INTEROP_PYTHON is not set: run `make test-interop`")
    stored = demos_collect(task_names=["click-button", "enter-text", "click-test"], episodes=1, seed_start=7)
    assert len(stored) == 3 and all(t.instruction for t in stored)
    task = stored[0].task
    empty = store.trajectory_create(
        task=task, source="rl", instruction="Click nothing.", metadata={"seed": 1}
    )
    store.trajectory_finish(trajectory=empty, status="completed", final_reward=0.0)
    failed = store.trajectory_create(task=task, source="rl")
    store.trajectory_finish(trajectory=failed, status="failed", final_reward=None)
    store.trajectory_create(task=task, source="rl")  # running: left out of exports
    assert Trajectory.objects.count() == 6

    for fmt in ("verl", "sharegpt", "osworld"):
        job = ExportJob.objects.create(created_by=users["researcher"], format=fmt)
        export_job_execute(job.pk)
        job.refresh_from_db()
        assert job.status == "succeeded", job.error
        assert job.total_trajectories == 5
        with zipfile.ZipFile(job.archive.open("rb")) as zf:
            zf.extractall(tmp_path / fmt)

    result = subprocess.run(
        [python, str(ROOT / "scripts" / "interop" / "check.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    print(result.stdout)
    print(result.stderr[-4000:] if result.returncode else "")
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    assert '"interop": "ok"' in result.stdout
