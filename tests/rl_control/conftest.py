"""Fixtures for the run tests: a task pool and a helper that creates runs through the service."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from rl_control import services
from rl_control.engine.keys import rds
from rl_control.models import Run
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.store.models import Checkpoint, TaskPool


@pytest.fixture
def pool(db) -> TaskPool:
    pool = TaskPoolFactory(name="miniwob-8")
    TaskFactory.create_batch(3, pool=pool, env_kind="browser")
    return pool


@pytest.fixture
def engine_names() -> Iterator[dict[str, str]]:
    """Own Redis prefix and rollout queue (no worker consumes it); both removed afterwards."""
    name = uuid.uuid4().hex[:8]
    names = {"RL_REDIS_PREFIX": f"test:rlp:{name}", "RL_ROLLOUT_QUEUE": f"rollout.parts.{name}",
             "RL_TRAIN_QUEUE": f"train.parts.{name}", "RL_SERVING_START_QUEUE": f"serve.parts.{name}"}  # fmt: skip
    with override_settings(**names):
        yield names
        r = rds()
        stale = list(r.scan_iter(match=f"{names['RL_REDIS_PREFIX']}:*"))
        r.delete(names["RL_ROLLOUT_QUEUE"], names["RL_TRAIN_QUEUE"], names["RL_SERVING_START_QUEUE"], *stale)


@pytest.fixture
def make_run(users, pool):
    """`make_run(preset="grpo-dart", config={...})` → a created run owned by the researcher."""

    def make(*, name: str = "run", preset: str = "grpo-dart", config: dict[str, Any] | None = None) -> Run:
        return services.run_create(
            user=users["researcher"], name=name, preset=preset, config=config, pool=pool
        )

    return make


@pytest.fixture
def start_checkpoint(tmp_path: Path) -> Checkpoint:
    """An untrained embedded policy saved as a checkpoint (the engine tests' start weights)."""
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    path = tmp_path / "start"
    new_model(FlywheelPolicyConfig(flywheel_version="0"), seed=0).save_pretrained(path)
    FlywheelTokenizer().save_pretrained(path)
    return Checkpoint.objects.create(version=f"start-{uuid.uuid4().hex[:6]}", path=str(path))


@pytest.fixture
def published(monkeypatch) -> list[dict[str, Any]]:
    """Every event the services publish, in order (the channel layer itself is tested elsewhere)."""
    events: list[dict[str, Any]] = []
    for module, name in [
        ("rl_control.services.state", "publish_run_status"),
        ("rl_control.services.metrics", "publish_run_metrics"),
        ("rl_control.alerts", "publish_run_alert"),
    ]:
        monkeypatch.setattr(f"{module}.{name}", lambda payload: events.append(dict(payload)))
    return events
