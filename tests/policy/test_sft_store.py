"""Expert demonstrations in the store, SFT from stored trajectories (command, service, API, a real
Celery worker on a `train` queue), on the real PostgreSQL, media storage and Chromium."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from tests.service_urls import subprocess_database_url
from webapp.store.checkpoints import checkpoint_create_initial, checkpoint_dir
from webapp.store.job_services import sft_job_create
from webapp.store.models import Checkpoint, SftJob, Trajectory
from webapp.store.sft_jobs import (
    SftError,
    checkpoint_sft_from_store,
    demos_collect,
    sft_examples_from,
    sft_job_run,
    trajectories_for_sft,
)
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.expert import collect_demonstrations


@pytest.fixture
def demos(db, miniwob: MiniWoBEnv) -> list[Trajectory]:
    return demos_collect(task_names=["enter-text", "click-tab"], episodes=2, seed_start=40, env=miniwob)


def test_demos_are_stored_as_import_trajectories_with_screenshots(demos, miniwob: MiniWoBEnv) -> None:
    from django.core.files.storage import default_storage

    assert len(demos) == 4
    for trajectory in demos:
        assert trajectory.source == "import" and trajectory.status == "completed"
        assert trajectory.final_reward == 1.0 and trajectory.policy_version == "scripted-expert"
        assert trajectory.task.source == "miniwob" and trajectory.metadata["seed"] in (40, 41)
        steps = list(trajectory.steps.order_by("index"))
        assert len(steps) == trajectory.num_steps == (3 if trajectory.task.external_id == "enter-text" else 1)
        for step in steps:
            assert default_storage.exists(step.screenshot.name)
            assert step.rl["elements"] and step.action and step.coord_convention == "screen"
    # the prompts rebuilt from the store are exactly what the expert run produced in memory
    stored = sft_examples_from(Trajectory.objects.filter(pk__in=[t.pk for t in demos]).order_by("pk"))
    live = collect_demonstrations(["enter-text", "click-tab"], [40, 41], env=miniwob)
    assert [(e.inputs.text, e.target) for e in stored] == [(e.inputs.text, e.target) for e in live]
    assert all(e.inputs.image for e in stored)


def test_collect_demos_command_and_unknown_tasks(db, capsys) -> None:
    call_command("collect_demos", "--tasks", "click-test", "--episodes", "2", "--seed-start", "7")
    out = capsys.readouterr().out
    assert "click-test: 2/2 episodes stored" in out and "stored 2 trajectories (2 steps)" in out
    assert Trajectory.objects.filter(source="import", task__external_id="click-test").count() == 2
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no scripted expert"):
        call_command("collect_demos", "--tasks", "click-color", "--episodes", "1")


def test_policy_sft_command_registers_a_child_checkpoint(demos, capsys) -> None:
    base = checkpoint_create_initial(version="hpa-base")
    call_command(
        "policy_sft", "--base", "hpa-base", "--version", "hpa-sft-1", "--source", "import",
        "--steps", "3", "--batch-size", "4",
    )  # fmt: skip
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    child = Checkpoint.objects.get(version="hpa-sft-1")
    assert child.parent == base and printed["version"] == "hpa-sft-1"
    sft = child.metrics["sft"]
    assert sft["examples"] == 8 and sft["steps"] == 3 and sft["filters"] == {"source": ["import"]}
    assert sft["loss_first"] > 0 and sft["loss_last"] > 0
    from workers.policy.embedded.policy import EmbeddedPolicy

    policy = EmbeddedPolicy.from_pretrained(checkpoint_dir(child))
    assert policy.model_version == "hpa-sft-1" and policy.model.config.flywheel_parent == "hpa-base"
    # the same version twice, unknown bases, empty selections and bad filters are refused
    with pytest.raises(SftError, match="exists already"):
        checkpoint_sft_from_store(base=base, version="hpa-sft-1", filters={}, steps=1)
    with pytest.raises(SftError, match="no trajectory steps"):
        checkpoint_sft_from_store(base=base, version="hpa-sft-2", filters={"source": ["rl"]}, steps=1)
    with pytest.raises(SftError, match="invalid filters"):
        trajectories_for_sft({"source": ["nonsense"]})


def test_sft_job_api_roles_status_and_run(api, demos) -> None:
    checkpoint_create_initial(version="hpa-base")
    body = {"base": "hpa-base", "version": "hpa-job-1", "filters": {"source": ["import"]}, "steps": 2,
            "batch_size": 4}  # fmt: skip
    for role in ("annotator", "reviewer", "nobody"):
        assert api(role).post("/api/sft-jobs/", body, format="json").status_code == 403
    assert api(None).get("/api/sft-jobs/").status_code in (401, 403)
    bad = api("researcher").post("/api/sft-jobs/", {**body, "base": "nope"}, format="json")
    assert bad.status_code == 400 and "base" in bad.json()
    empty = api("researcher").post("/api/sft-jobs/", {**body, "filters": {"source": ["rl"]}}, format="json")
    assert empty.status_code == 400 and "no trajectories" in empty.json()["detail"]
    created = api("researcher").post("/api/sft-jobs/", body, format="json")
    assert created.status_code == 202, created.json()
    job = created.json()
    assert job["status"] == "queued" and job["base"] == "hpa-base" and job["created_by"] == "res"
    # the Celery task body (run here in-process; the worker test below runs it through Celery)
    sft_job_run(job_id=job["id"])
    done = api("admin").get(f"/api/sft-jobs/{job['id']}/").json()
    assert done["status"] == "succeeded" and done["result"] == "hpa-job-1" and done["examples"] == 8
    assert done["progress"]["total"] == 2 and done["progress"]["step"] == 2
    assert [j["id"] for j in api("admin").get("/api/sft-jobs/").json()] == [job["id"]]
    # a job for a version that now exists is refused; a failing job ends failed with its error
    assert api("admin").post("/api/sft-jobs/", body, format="json").status_code == 400
    failing = sft_job_create(user=None, base=Checkpoint.objects.get(version="hpa-base"), version="hpa-job-2",
                             filters={"source": ["import"]}, steps=1, enqueue=False)  # fmt: skip
    Trajectory.objects.all().delete()
    assert sft_job_run(job_id=failing.pk).status == "failed"
    assert "no trajectory steps" in SftJob.objects.get(pk=failing.pk).error
    cancelled = api("admin").post(f"/api/sft-jobs/{failing.pk}/cancel/").json()
    assert cancelled["status"] == "failed"  # terminal states stay


@pytest.mark.django_db(transaction=True)
def test_sft_job_through_a_real_celery_worker(api, miniwob: MiniWoBEnv) -> None:
    demos_collect(task_names=["click-test"], episodes=2, seed_start=3, env=miniwob)
    checkpoint_create_initial(version="hpa-base-w")
    queue = f"train-hpa-{os.getpid()}"  # the broker is shared: a queue no other worker reads
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        "FLYWHEEL_TEST_MEDIA_ROOT": str(settings.MEDIA_ROOT),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queue, "-P", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        with override_settings(SFT_TRAIN_QUEUE=queue):
            body = {"base": "hpa-base-w", "version": "hpa-job-w", "filters": {"source": ["import"]},
                    "steps": 2, "batch_size": 2}  # fmt: skip
            response = api("admin").post("/api/sft-jobs/", body, format="json")
        assert response.status_code == 202
        job_id = response.json()["id"]
        deadline = time.monotonic() + 120
        state = {}
        while time.monotonic() < deadline:
            state = api("admin").get(f"/api/sft-jobs/{job_id}/").json()
            if state["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.5)
        assert state["status"] == "succeeded", state
        assert Checkpoint.objects.get(version="hpa-job-w").parent.version == "hpa-base-w"
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
