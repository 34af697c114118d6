"""Desktop episodes replay to their reward: two annotation sessions on a real desktop (Xvfb, xterm,
the session's sandbox) of an OSWorld-format task with its evaluator — one solves it (reward 1), one
writes the wrong text (reward 0) — recorded through the annotation API, exported as native JSONL,
and replayed by `replay_check` from the export and from the store, each in a fresh desktop re-created
from the recorded task, seed and start state: the same reward both times."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from annotation.models import Assignment
from tests.annotation.test_annotation_flow import _wait_candidates, _wait_completed, _wait_idle
from tests.factories import TaskFactory
from webapp.store.models import ExportJob, Trajectory
from webapp.store.tasks import export_job_execute
from workers.envs import osworld

# Two annotated desktop episodes and three replays (each a fresh desktop): a hang guard, not a speed target.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

EXAMPLE = next(t for t in osworld.load_examples() if t["id"] == "fw-os-002-write-file")


@pytest.fixture
def warm_pool() -> str:
    return "desktop=1"


def _episode(client, task_pk: int, command: str) -> Trajectory:
    """One annotated episode: click into the xterm, type `command` + Enter, Finish."""
    _wait_idle("desktop", timeout=120)
    started = client.post("/api/annotation/sessions/", {"task": task_pk}, format="json")
    assert started.status_code == 201, started.content
    sid = started.json()["id"]
    version = _wait_candidates(client, sid, 1)["observation"]["obs_version"]
    for action_text in ("click(start_box='(200,200)')", f"type(content='{command}\\n')"):
        decided = client.post(
            f"/api/annotation/sessions/{sid}/decide/",
            {"kind": "override", "obs_version": version, "thought": "In the terminal.",
             "action_text": action_text, "convention": "screen"},
            format="json",
        )  # fmt: skip
        assert decided.status_code == 200, decided.content
        version = decided.json()["state"]["observation"]["obs_version"]
    finish = client.post(f"/api/annotation/sessions/{sid}/decide/",
                         {"kind": "finish", "obs_version": version, "answer": ""}, format="json")  # fmt: skip
    assert finish.status_code == 200, finish.content
    trajectory_id = finish.json()["state"]["trajectory_id"]
    return _wait_completed(trajectory_id, timeout=120)


def test_desktop_episodes_replay_from_the_export_to_their_reward(api, users, live_stack, tmp_path) -> None:
    task = TaskFactory(
        external_id=EXAMPLE["id"], env_kind="desktop", source="osworld", instruction=EXAMPLE["instruction"],
        setup={"osworld": EXAMPLE["config"], "snapshot": "os", "related_apps": EXAMPLE["related_apps"]},
        verifier={"osworld": EXAMPLE["evaluator"]},
    )  # fmt: skip
    Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")
    solved = _episode(client, task.pk, "echo Hello, Flywheel! > ~/hello.txt")
    wrong = _episode(client, task.pk, "echo Hello > ~/hello.txt")
    assert (solved.final_reward, wrong.final_reward) == (1.0, 0.0)

    # What re-creates each episode is stored with it: the task as reset, the seed, the env's kind,
    # the versions of what ran it and its start state.
    episode = solved.metadata["episode"]
    assert episode["seed"] == solved.metadata["seed"] and episode["task"]["verifier"] == EXAMPLE["evaluator"]
    assert episode["env"]["kind"] == "desktop" and episode["env"]["start"]["screen"] == [1280, 800]
    assert episode["env"]["start"]["apps"] == ["xterm"] and "xvfb" in episode["env"]["version"]
    assert [s.done for s in solved.steps.order_by("index")] == [False, False, True]

    job = ExportJob.objects.create(created_by=users["researcher"], format="jsonl",
                                   filters={"source": ["annotation"]})  # fmt: skip
    export_job_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    archive = tmp_path / "export.zip"
    archive.write_bytes(job.archive.open("rb").read())
    with zipfile.ZipFile(archive) as zf:
        lines = [json.loads(x) for x in zf.read("trajectories.jsonl").decode().splitlines()]
    assert sorted(r["metadata"]["episode"]["env"]["kind"] for r in lines) == ["desktop", "desktop"]

    call_command("replay_check", "--jsonl", str(archive), stdout=(out := io.StringIO()))
    results = [json.loads(x) for x in out.getvalue().splitlines()]
    assert results[-1] == {"checked": 2, "same": 2, "differs": 0, "skipped": 0}, results
    by_id = {r["trajectory"]: r for r in results[:-1]}
    assert by_id[solved.pk]["replayed"] == 1.0 and by_id[wrong.pk]["replayed"] == 0.0
    assert all(r["reason"] == "" for r in by_id.values())  # same versions, same start state

    call_command("replay_check", "--ids", str(solved.pk), stdout=(out := io.StringIO()))
    assert json.loads(out.getvalue().splitlines()[-1]) == {
        "checked": 1,
        "same": 1,
        "differs": 0,
        "skipped": 0,
    }
