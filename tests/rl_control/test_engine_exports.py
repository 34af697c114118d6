"""A real run (the engine's real processes, as tests/rl_control/test_engine.py starts them) whose
entropy-collapse threshold is set from its config fires the alert, and its CSV and TensorBoard
exports hold every recorded row, including the figures recorded besides the loss."""

from __future__ import annotations

import csv
import io
import struct

import pytest
from rest_framework.test import APIClient

from rl_control import services
from rl_control.models import RunAlert, RunMetric
from tests.rl_control import test_engine as engine_tests

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
# The engine tests' stack (found by name in this module); start_checkpoint comes from conftest.py.
stack_factory = engine_tests.stack_factory


def test_a_real_run_fires_its_configured_alert_and_exports_its_rows(
    users, stack_factory, start_checkpoint
) -> None:
    stack = stack_factory(60.0)
    stack.start()
    run = services.run_create(
        user=users["researcher"], name="collapse", algorithm="ppo", pool=engine_tests._miniwob_pool(),
        start_checkpoint=start_checkpoint,
        config={
            "env": {"parallel_envs": 2},
            "ppo": {"lr_policy": 1e-4, "value_pretrain_max_updates": 1, "minibatch_size": 4},
            "curation": {"step_cap": 2, "min_batch_trajectories": 2},
            "budget": {"max_updates": 3, "max_minutes": 20},
            # The launch form's "Entropy collapse below" (alerts section): above any real entropy.
            "alerts": {"entropy_min": 50.0, "entropy_max": 100.0},
        },
    )  # fmt: skip
    run = engine_tests.launch_and_finish(run, stack, 600)
    alert = RunAlert.objects.filter(run=run, kind="entropy_collapse").first()
    assert alert is not None and alert.threshold == 50.0 and alert.value < 50.0

    client = APIClient()
    client.force_authenticate(users["researcher"])
    body = b"".join(client.get(f"/api/rl/runs/{run.pk}/export.csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == RunMetric.objects.filter(run=run).count() > 20
    names = {r["name"] for r in rows}
    assert {"policy/entropy", "outcome/reward_mean", "outcome/think_length_mean",
            "curation/step_limit_mean", "fleet/live"} <= names, names  # fmt: skip
    assert {int(r["step"]) for r in rows} == {1, 2, 3}
    data = b"".join(client.get(f"/api/rl/runs/{run.pk}/export.tfevents").streaming_content)
    events, pos = 0, 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 12 + length + 4
        events += 1
    assert events == len(rows) + 1  # the file-version event, then one scalar per row
    alerts = client.get(f"/api/rl/runs/{run.pk}/alerts/").json()
    assert any(
        a["kind"] == "entropy_collapse" for a in (alerts["results"] if isinstance(alerts, dict) else alerts)
    )
