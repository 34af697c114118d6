"""An annotator's Infeasible scores as OSWorld scores it (desktop_env's DesktopEnv.evaluate: an
infeasible task scores 1 only when the last action is FAIL, any other task 0 after FAIL), through the
REST API on a live env host (a terminal session of OSWorld-format tasks): Infeasible on an infeasible
task → 1, Finish there → 0, Infeasible on a feasible task whose file is already written → 0; the
step stores call_user (OSWorld's FAIL, as its UI-TARS agent sends it) with the outcome, and the
OSWorld results export writes FAIL and result 1.0."""

from __future__ import annotations

import json
import zipfile

import pytest

from annotation.models import Assignment
from tests.annotation.test_annotation_flow import _wait_candidates, _wait_completed, _wait_idle
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.store.models import ExportJob, Trajectory
from webapp.store.tasks import export_job_execute
from workers.envs import osworld
from workers.envs.sandbox import sandbox_available

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]

WRITE_FILE = next(t for t in osworld.load_examples() if t["id"] == "fw-os-002-write-file")


@pytest.fixture
def warm_pool() -> str:
    return "terminal=1"


def _task(external_id: str, config: list, evaluator: dict, instruction: str):
    return TaskFactory(
        pool=TaskPoolFactory(name=f"osworld-{external_id}"), external_id=external_id, env_kind="terminal",
        source="osworld", instruction=instruction, setup={"osworld": config}, verifier={"osworld": evaluator},
    )  # fmt: skip


def _session(client, task, overrides: list[str], kind: str) -> Trajectory:
    """One annotated episode: the `overrides` (UI-TARS actions in screen pixels), then `kind`."""
    _wait_idle("terminal", timeout=120)
    started = client.post("/api/annotation/sessions/", {"task": task.pk}, format="json")
    assert started.status_code == 201, started.content
    sid = started.json()["id"]
    version = _wait_candidates(client, sid, 1)["observation"]["obs_version"]
    for action_text in overrides:
        decided = client.post(f"/api/annotation/sessions/{sid}/decide/",
                              {"kind": "override", "obs_version": version, "thought": "In the shell.",
                               "action_text": action_text, "convention": "screen"}, format="json")  # fmt: skip
        assert decided.status_code == 200, decided.content
        version = decided.json()["state"]["observation"]["obs_version"]
    ended = client.post(f"/api/annotation/sessions/{sid}/decide/",
                        {"kind": kind, "obs_version": version, "thought": "No shell can do that.",
                         "answer": ""}, format="json")  # fmt: skip
    assert ended.status_code == 200, ended.content
    trajectory_id = ended.json()["state"]["trajectory_id"]
    return _wait_completed(trajectory_id, timeout=60)


def test_infeasible_scores_one_only_on_an_infeasible_task(api, users, live_stack) -> None:
    impossible = _task("fw-inf-font", [], {"func": "infeasible"},
                       "Set this terminal's font to Comic Sans in GNOME Settings.")  # fmt: skip
    feasible = _task(
        WRITE_FILE["id"], WRITE_FILE["config"], WRITE_FILE["evaluator"], WRITE_FILE["instruction"]
    )
    for task in (impossible, feasible):
        Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")

    gave_up = _session(client, impossible, [], "infeasible")
    assert gave_up.final_reward == 1.0, gave_up.metadata
    (step,) = gave_up.steps.all()
    assert [a["kind"] for a in step.action] == ["call_user"] and step.decision_meta["outcome"] == "infeasible"
    assert step.done
    assert _session(client, impossible, [], "finish").final_reward == 0.0  # DONE is not FAIL
    # The file is written (Finish would score 1), then given up on: OSWorld scores FAIL 0 there.
    solved_then_gave_up = _session(
        client, feasible, ["type(content='echo Hello, Flywheel! > ~/hello.txt\\n')"], "infeasible"
    )
    assert solved_then_gave_up.final_reward == 0.0

    job = ExportJob.objects.create(created_by=users["researcher"], format="osworld",
                                   filters={"source": ["annotation"]})  # fmt: skip
    export_job_execute(job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    with zipfile.ZipFile(job.archive.open("rb")) as zf:
        folder = next(n.rsplit("/", 1)[0] for n in zf.namelist() if n.endswith(f".t{gave_up.pk}/traj.jsonl"))
        (line,) = zf.read(f"{folder}/traj.jsonl").decode().splitlines()
        assert json.loads(line)["action"] == "FAIL"
        assert zf.read(f"{folder}/result.txt").decode() == "1.0\n"
