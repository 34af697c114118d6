"""The verl backend's Flywheel side (issue 23 item 3) in the platform's own environment (verl is not
installed here; flywheel_verl.exercise runs the agent loop with verl's classes in verl's own venv):
an external trainer records metrics on a run's dashboard, verl's metric names map to canonical
ones, and `verl_submit` writes a run's job (dataset rows verl reads, agent-loop registration,
overrides) and its `ray job submit` command."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from flywheel_verl.tracking import to_flywheel
from rl_control import services
from rl_control.models import RunMetric
from webapp.store.models import Checkpoint
from workers.rl.verl_rows import task_from_extra

pytestmark = pytest.mark.django_db


def test_an_external_trainer_records_canonical_metrics_and_is_refused_otherwise(api, make_run) -> None:
    run = make_run(name="verl")
    values = to_flywheel({"actor/entropy": 1.5, "critic/score/mean": 0.25, "actor/pg_loss": -0.1,
                          "perf/throughput": 123.0, "actor/grad_norm": float("nan"), "note": "text"})  # fmt: skip
    assert values == {"policy/entropy": 1.5, "outcome/reward_mean": 0.25, "policy/loss": -0.1}
    url = f"/api/rl/runs/{run.pk}/metrics/record/"
    r = api("researcher").post(url, {"step": 3, "values": values}, format="json")
    assert r.status_code == 201, r.content
    assert RunMetric.objects.filter(run=run, step=3).count() == 3
    for bad in ({"step": 4, "values": {"made/up": 1.0}}, {"step": -1, "values": values}, {"step": 1, "values": {}},
                {"step": 1, "values": {"policy/entropy": "x"}}):  # fmt: skip
        r = api("researcher").post(url, bad, format="json")
        assert r.status_code == 400, (bad, r.content)
    assert RunMetric.objects.filter(run=run).count() == 3
    assert api("annotator").post(url, {"step": 5, "values": values}, format="json").status_code == 403
    assert api("researcher").post("/api/rl/runs/999999/metrics/record/", {"step": 1, "values": values},
                                  format="json").status_code == 404  # fmt: skip


def test_verl_submit_writes_the_runs_job(users, pool, tmp_path: Path, capsys) -> None:
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path / "tiny")
    checkpoint = Checkpoint.objects.create(version="tiny-verl", path=str(path), profile="hf-vlm")
    run = services.run_create(user=users["researcher"], name="verl", preset="grpo-dart", pool=pool,
                              start_checkpoint=checkpoint, config={"vlm": {"lora_rank": 16}})  # fmt: skip
    out = tmp_path / "job"
    call_command("verl_submit", run.pk, "--out", str(out), "--ray-address", "http://head:8265")
    printed = capsys.readouterr().out
    assert "ray job submit --address http://head:8265 --working-dir" in printed
    assert "flywheel_verl.main" in printed and f"actor_rollout_ref.model.path={path}" in printed
    rows = pq.read_table(out / "tasks.parquet").to_pylist()
    assert len(rows) == 3 * 4 and {r["agent_name"] for r in rows} == {"flywheel_gui"}
    # a struct verl reads as a dict (RLHFDataset calls extra_info.get), as the agent loop reads it
    assert isinstance(rows[0]["extra_info"], dict)
    task, seed = task_from_extra(rows[0]["extra_info"])
    assert task["kind"] == "browser" and task["task_id"] and seed == 0
    assert sorted(r["extra_info"]["seed"] for r in rows) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    overrides = (out / "overrides.txt").read_text()
    assert "actor_rollout_ref.model.lora_rank=16" in overrides and f"+flywheel.run_id={run.pk}" in overrides
    assert "flywheel_verl.agent_loop.FlywheelGUIAgentLoop" in (out / "agent_loop.yaml").read_text()
    embedded = services.run_create(user=users["researcher"], name="emb", preset="grpo-dart", pool=pool)
    with pytest.raises(Exception, match="HF checkpoints"):
        call_command("verl_submit", embedded.pk, "--out", str(tmp_path / "x"))
