"""Dashboard reads of the run API: run list alerts, replay, episode picks, compare, exports, fleet.

Metrics are produced by the real recording service (services.metrics_record); the fleet panel reads
a real Redis lease registry under its own prefix.
"""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from django.test import override_settings

from rl_control import services
from tests.factories import TaskFactory
from webapp.fleet import services as fleet
from webapp.store import services as store

pytestmark = pytest.mark.django_db


def _record(run, steps: int) -> None:
    services.run_launch(run=run)
    for step in range(steps):
        services.metrics_record(
            run=run, step=step, policy_version=step, samples=32 * step, wall=0.5 * step,
            values={"policy/entropy": 1.0 - 0.01 * step, "outcome/reward_mean": 0.1 * step},
        )  # fmt: skip


def test_run_list_carries_alert_counts(api, make_run) -> None:
    quiet, noisy = make_run(name="quiet"), make_run(name="noisy")
    services.run_launch(run=noisy)
    services.metrics_record(run=noisy, step=3, policy_version=3, samples=10, values={"policy/entropy": 0.001})
    rows = {r["name"]: r for r in api("researcher").get("/api/rl/runs/").json()["results"]}
    assert rows["noisy"]["alerts"] == {"count": 1, "last_kind": "entropy_collapse", "last_step": 3}
    assert rows["quiet"]["alerts"] == {"count": 0, "last_kind": None, "last_step": None}
    detail = api("researcher").get(f"/api/rl/runs/{noisy.pk}/").json()
    assert (
        detail["alert_settings"]["entropy_min"] == 0.05 and detail["alert_settings"]["staleness_bound"] == 1
    )
    assert quiet.pk != noisy.pk


def _episode(run, task, rewards: list[float], final: float):
    t = store.trajectory_create(task=task, source="rl", run_id=run.pk, policy_version="3")
    for i, r in enumerate(rewards):
        store.step_append(
            trajectory=t, screenshot=b"\x89PNG fake", image_format="png",
            fields={"thought": f"thought {i}", "action": [{"kind": "click", "point": [10 * i, 20]}],
                    "action_text": f"click(start_box='({10 * i},20)')", "coord_convention": "screen",
                    "screen_width": 100, "screen_height": 80, "reward": r, "policy_version": str(2 + i),
                    "rl": {"value": 0.5 - 0.1 * i, "advantage": 0.2 * i, "lambda_policy": 0.95, "ratio": 1.1,
                           "clipped": i == 1, "kept": True, "version": 3, "token_ids": [5, 6, 7],
                           "logprobs": [-0.1, -0.2, -0.3], "elements": [{"index": 1, "tag": "button"}]}},
        )  # fmt: skip
    store.trajectory_finish(trajectory=t, status="completed", final_reward=final)
    return t


def test_replay_and_episode_picks(api, make_run, pool) -> None:
    run = make_run()
    task_a, task_b = pool.tasks.all()[:2]
    low = _episode(run, task_a, [0.0, 0.0], final=0.0)
    high = _episode(run, task_b, [0.0, 1.0], final=1.0)
    spiky = _episode(run, task_a, [0.0, 3.0, 0.0], final=0.5)
    client = api("researcher")
    pick = lambda **q: [r["id"] for r in client.get(f"/api/rl/runs/{run.pk}/episodes/pick/", q).json()]  # noqa: E731
    assert pick(which="best") == [high.pk, spiky.pk, low.pk]
    assert pick(which="worst") == [low.pk, spiky.pk, high.pk]
    assert pick(which="latest") == [spiky.pk, high.pk, low.pk]
    assert pick(which="step_reward")[0] == spiky.pk
    assert pick(which="best", task=task_a.external_id) == [spiky.pk, low.pk]
    assert client.get(f"/api/rl/runs/{run.pk}/episodes/pick/", {"which": "nope"}).status_code == 400

    body = client.get(f"/api/rl/trajectories/{spiky.pk}/replay/").json()
    assert body["run_id"] == run.pk and body["final_reward"] == 0.5 and len(body["steps"]) == 3
    second = body["steps"][1]
    assert second["thought"] == "thought 1" and second["reward"] == 3.0 and second["policy_version"] == "3"
    # As the trainer stores them (workers.rl.trainer step stats over the rollout's own fields):
    # λ from lambda_policy, the token count instead of the ids, no log-probs or page elements.
    assert second["rl"] == {
        "value": 0.4,
        "advantage": 0.2,
        "lambda": 0.95,
        "ratio": 1.1,
        "clipped": True,
        "kept": True,
        "tokens": 3,
    }
    assert second["screen_actions"] == [{"kind": "click", "point": [10, 20]}]
    assert second["screenshot_url"].endswith(".png")
    # Annotation trajectories open in the same view; other roles do not see replays.
    annotated = store.trajectory_create(task=TaskFactory(pool=pool), source="annotation")
    got = client.get(f"/api/rl/trajectories/{annotated.pk}/replay/").json()
    assert got["source"] == "annotation" and got["run_id"] is None and got["steps"] == []
    assert api("annotator").get(f"/api/rl/trajectories/{spiky.pk}/replay/").status_code == 403


def test_compare_lists_config_differences(api, make_run) -> None:
    a = make_run(name="a", preset="grpo-dart")
    b = make_run(name="b", preset="grpo-dart", config={"grpo": {"lr": 2e-6}, "seed": 4})
    c = make_run(name="c", preset="ppo-uitars2")
    client = api("researcher")
    body = client.get("/api/rl/compare/", {"runs": f"{a.pk},{b.pk}"}).json()
    assert [r["id"] for r in body["runs"]] == [a.pk, b.pk]
    diff = {row["key"]: row["values"] for row in body["config_diff"]}
    assert diff == {"grpo.lr": [a.config["grpo"]["lr"], 2e-6], "seed": [0, 4]}
    mixed = {
        row["key"]: row["values"]
        for row in client.get("/api/rl/compare/", {"runs": f"{a.pk},{c.pk}"}).json()["config_diff"]
    }
    assert (
        mixed["algorithm"] == ["grpo", "ppo"]
        and mixed["grpo.lr"][1] is None
        and mixed["ppo.clip_low"][0] is None
    )
    assert client.get("/api/rl/compare/", {"runs": str(a.pk)}).status_code == 400
    assert client.get("/api/rl/compare/", {"runs": f"{a.pk},999999"}).status_code == 404


def test_csv_export_holds_every_recorded_point(api, make_run) -> None:
    run = make_run()
    _record(run, 30)
    response = api("researcher").get(f"/api/rl/runs/{run.pk}/export.csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 60
    entropy = [r for r in rows if r["name"] == "policy/entropy"]
    assert [int(r["step"]) for r in entropy] == list(range(30))
    assert float(entropy[7]["value"]) == 1.0 - 0.07 and float(entropy[7]["wall_s"]) == 3.5
    assert int(entropy[7]["samples"]) == 224 and int(entropy[7]["policy_version"]) == 7


def test_tensorboard_export_is_read_by_tensorboards_own_loader(api, make_run, tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    run = make_run()
    _record(run, 12)
    response = api("researcher").get(f"/api/rl/runs/{run.pk}/export.tfevents")
    assert response.status_code == 200 and "events.out.tfevents." in response["Content-Disposition"]
    path = tmp_path / response["Content-Disposition"].split('filename="')[1].rstrip('"')
    path.write_bytes(b"".join(response.streaming_content))
    # The raw loader checks every record's length and CRC32C, and decodes every Event.
    events = list(EventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    assert len(events) == 1 + 24
    # What TensorBoard's scalar dashboard reads.
    board = EventAccumulator(str(tmp_path))
    board.Reload()
    assert set(board.Tags()["scalars"]) == {"policy/entropy", "outcome/reward_mean"}
    entropy = board.Scalars("policy/entropy")
    assert [e.step for e in entropy] == list(range(12))
    assert entropy[5].value == pytest.approx(0.95, rel=1e-6)
    assert entropy[5].wall_time - entropy[0].wall_time == pytest.approx(2.5)


def test_fleet_panel_shows_the_runs_leases(api, make_run) -> None:
    run, other = make_run(name="mine"), make_run(name="other")
    prefix = f"test:hpd:{uuid.uuid4().hex[:8]}"
    with override_settings(FLEET_REDIS_PREFIX=prefix):
        fleet.registry.cache_clear()
        reg = fleet.registry()
        try:
            for i in range(3):
                reg.register_env(env_id=f"e{i}", kind="browser", worker="w1", boot_s=1.5 + i)
            mine = reg.acquire(
                kind="browser", owner=f"rl:{run.pk}:0:1", task="t1"
            )  # as the engine's workers name it
            theirs = reg.acquire(kind="browser", owner=f"rl:{other.pk}", task="t2")
            assert mine is not None and theirs is not None
            client = api("researcher")
            body = client.get(f"/api/rl/runs/{run.pk}/fleet/").json()
            assert [x["lease_id"] for x in body["live"]] == [mine.lease_id]
            assert body["live"][0]["state"] == "leased" and body["live"][0]["boot_s"] == pytest.approx(
                1.5 + int(mine.env_id[1:])
            )
            assert body["counts"]["leased"] == 1 and body["fleet_idle"] == 1
            # Watching: a lease of another run is not found; a browser env has no VNC display.
            assert client.post(f"/api/rl/runs/{run.pk}/fleet/{theirs.lease_id}/watch/").status_code == 404
            reg.mark_crashed(env_id=mine.env_id, reason="test crash")
            body = client.get(f"/api/rl/runs/{run.pk}/fleet/").json()
            assert body["live"][0]["state"] == "crashed"
        finally:
            reg.clear()
            fleet.registry.cache_clear()
