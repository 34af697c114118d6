"""Preflight at launch (rl_control.engine.preflight) through the API: a run that cannot work is
refused with a 400 naming what is missing, and nothing is created; with everything in place (a real
Celery worker on the run's queues, an environment registered by a host, a whole checkpoint) the run
is created and launched in one request."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from rl_control import services
from rl_control.engine.preflight import checkpoint_problem
from rl_control.models import Run
from tests.factories import TaskFactory, TaskPoolFactory
from tests.service_urls import subprocess_database_url
from webapp.fleet import services as fleet
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def isolated() -> Iterator[dict[str, str]]:
    """Own queues and fleet prefix, the preflight on; the registry emptied afterwards."""
    name = uuid.uuid4().hex[:8]
    names = {"RL_TRAIN_QUEUE": f"train.pre.{name}", "RL_ROLLOUT_QUEUE": f"rollout.pre.{name}",
             "FLEET_REDIS_PREFIX": f"test:fleet:pre:{name}", "RL_REDIS_PREFIX": f"test:rl:pre:{name}"}  # fmt: skip
    with override_settings(RL_PREFLIGHT=True, **names):
        fleet.registry.cache_clear()
        yield names
        fleet.registry().clear()
    fleet.registry.cache_clear()


@pytest.fixture
def workers(isolated) -> Iterator[None]:
    """A real Celery worker consuming the run's train and rollout queues (prefork, as `make up`
    starts them: its main process answers the preflight while a child trains)."""

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", **{k: str(v) for k, v in isolated.items()},
           "DATABASE_URL": subprocess_database_url()}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-P", "prefork", "-c", "1", "-l", "warning",
         "-n", f"pre{uuid.uuid4().hex[:6]}@%h", "-Q", f"{isolated['RL_TRAIN_QUEUE']},{isolated['RL_ROLLOUT_QUEUE']}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    from rl_control.engine.preflight import _queues_served

    deadline = time.monotonic() + 90
    while isolated["RL_TRAIN_QUEUE"] not in _queues_served() and time.monotonic() < deadline:
        time.sleep(0.5)
    yield
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def _browser_env_up() -> None:
    """What an env host does when its warm pool booted: register the environment and beat."""
    fleet.registry().register_env(
        env_id=f"e{uuid.uuid4().hex[:6]}", kind="browser", worker="hostpre", boot_s=0.1
    )
    fleet.registry().host_heartbeat(worker="hostpre", ttl_s=60)


@pytest.fixture
def whole(tmp_path: Path) -> Checkpoint:
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    path = tmp_path / "ok"
    new_model(FlywheelPolicyConfig(flywheel_version="0"), seed=0).save_pretrained(path)
    FlywheelTokenizer().save_pretrained(path)
    return Checkpoint.objects.create(version=f"pre-{uuid.uuid4().hex[:6]}", path=str(path))


def _post(api, body: dict) -> tuple[int, dict]:
    before = Run.objects.count()
    response = api("researcher").post("/api/rl/runs/", {"name": "pre", "preset": "grpo-dart", "launch": True, **body},
                                      format="json")  # fmt: skip
    if response.status_code != 201:
        assert Run.objects.count() == before, "a refused launch left a run behind"
    return response.status_code, response.json()


def test_nothing_in_place_names_everything_missing(api, isolated, pool, tmp_path: Path) -> None:
    desktop = TaskPoolFactory(name="desk-only")
    TaskFactory.create_batch(2, pool=desktop, env_kind="desktop")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "flywheel_policy"}')
    (broken / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    Checkpoint.objects.create(version="broken", path=str(broken))
    code, errors = _post(
        api, {"pool": desktop.pk, "start_checkpoint": "broken", "config": {"env": {"kind": "browser"}}}
    )
    assert code == 400, errors
    assert "no browser task it can run: its tasks are desktop" in errors["pool"][0]
    assert "set Environment kind to desktop" in errors["pool"][0]
    assert "no browser environment can be leased" in errors["env.kind"][0]
    assert f"no trainer worker consumes queue '{isolated['RL_TRAIN_QUEUE']}'" in errors["serving"][0]
    assert "checkpoint broken does not load" in errors["start_checkpoint"][0]
    # an external endpoint that does not answer is named too
    code, errors = _post(
        api, {"pool": pool.pk, "config": {"serving": {"endpoints": "http://127.0.0.1:9/v1"}}}
    )
    assert code == 400 and "127.0.0.1:9" in errors["serving.endpoints"][0]


def test_a_whole_checkpoint_passes_and_damaged_ones_do_not(whole: Checkpoint, tmp_path: Path) -> None:
    from webapp.store.checkpoints import checkpoint_dir

    good = checkpoint_dir(whole)
    assert checkpoint_problem(good) is None
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "config.json").write_bytes((good / "config.json").read_bytes())
    data = (good / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert "truncated" in checkpoint_problem(cut)
    (cut / "model.safetensors").unlink()
    assert "missing" in checkpoint_problem(cut)
    assert "config.json" in checkpoint_problem(tmp_path)


def test_with_everything_in_place_the_run_is_created_and_launched(api, workers, pool, whole) -> None:
    _browser_env_up()
    code, body = _post(api, {"pool": pool.pk, "start_checkpoint": whole.version})
    assert code == 201, body
    assert body["status"] == "running"
    services.run_stop(run=Run.objects.get(pk=body["id"]))
    # the preflight went by the live fleet: with the env host gone, the next launch is refused
    fleet.registry().retire_worker(worker="hostpre", reason="the host stopped")
    code, errors = _post(api, {"pool": pool.pk, "start_checkpoint": whole.version})
    assert code == 400 and list(errors) == ["env.kind"]
    # created without launching, then launched through its own endpoint: the same refusal, run kept
    run = api("researcher").post("/api/rl/runs/", {"name": "later", "preset": "grpo-dart", "pool": pool.pk},
                                 format="json").json()  # fmt: skip
    refused = api("researcher").post(f"/api/rl/runs/{run['id']}/launch/", {}, format="json")
    assert refused.status_code == 400 and "env.kind" in refused.json()
    assert Run.objects.get(pk=run["id"]).status == "created"
    assert settings.RL_PREFLIGHT


def test_hf_vlm_checkpoints_pass_whole_and_refuse_embedded_only_settings(
    api, isolated, pool, tmp_path: Path
) -> None:
    """A Qwen2.5-VL-family checkpoint (the tiny one built here) is a start checkpoint; without its
    image processor or with truncated weights it is refused; the embedded model's thought
    temperature and Entropulse are named as not available for it."""
    import shutil

    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    good = build_tiny_checkpoint(tmp_path / "vlm")
    assert checkpoint_problem(good) is None
    bad = tmp_path / "vlm-bad"
    shutil.copytree(good, bad)
    (bad / "preprocessor_config.json").unlink()
    assert "preprocessor_config.json" in checkpoint_problem(bad)
    shutil.copy(good / "preprocessor_config.json", bad)
    data = (good / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[:-100])
    assert "truncated" in checkpoint_problem(bad)
    Checkpoint.objects.create(version="tiny-vlm-pre", path=str(good), profile="hf-vlm")
    code, errors = _post(api, {"pool": pool.pk, "start_checkpoint": "tiny-vlm-pre",
                               "config": {"grpo": {"thought_temperature": 0.1}, "entropulse": {"enabled": True}}})  # fmt: skip
    assert code == 400
    assert "start_checkpoint" not in errors, errors
    assert "one temperature" in errors["grpo.thought_temperature"][0]
    assert "entropulse.enabled" not in errors  # Entropulse phases train HF VLMs too


def test_environments_in_parallel_default_to_what_the_host_holds(api, isolated, pool) -> None:
    """A start model with no fitted number (a large model): the default is the fleet's environments
    of the run's kind, at most 8; with none up, the machine's cores (at most 8). The embedded
    starter's fit names its own (one per rollout process): the form shows it, with where it comes
    from, whatever the hosts hold, and a run created on the defaults gets what the form showed. A set
    value is kept."""
    from rl_control.engine.preflight import host_parallel_envs

    def shown() -> tuple[int, str]:
        grpo = next(p for p in api("researcher").get("/api/rl/presets/").json() if p["name"] == "grpo-dart")
        return grpo["config"]["env"]["parallel_envs"], grpo["notes"]["env.parallel_envs"]

    cores = min(8, os.cpu_count() or 1)
    n, why = host_parallel_envs("browser")
    assert n == cores and f"this machine has {os.cpu_count()} cores" in why
    for _ in range(3):
        _browser_env_up()
    n, why = host_parallel_envs("browser")
    assert n == 3 and "the env hosts hold 3 browser environments" in why
    n, why = shown()  # the embedded starter (this install's start model)
    assert n == 2 and "fitted to this start model" in why, (n, why)
    body = {"name": "d", "preset": "grpo-dart", "pool": pool.pk}
    created = api("researcher").post("/api/rl/runs/", body, format="json")
    assert created.status_code == 201 and created.json()["config"]["env"]["parallel_envs"] == n
    body["config"] = {"env": {"parallel_envs": 5}}
    created = api("researcher").post("/api/rl/runs/", body, format="json")
    assert created.status_code == 201 and created.json()["config"]["env"]["parallel_envs"] == 5
    for _ in range(7):
        _browser_env_up()
    assert host_parallel_envs("browser")[0] == 8  # ten held: the default stays at eight
    bad = api("researcher").post("/api/rl/runs/", {**body, "config": {"env": "x"}}, format="json")
    assert bad.status_code == 400 and "env" in bad.json(), bad.json()


def test_the_environment_kind_comes_from_the_pool_and_what_is_missing_is_said(api, isolated) -> None:
    """An OSWorld-format pool (desktop tasks) on the basic form: env.kind is the pool's, so the only
    thing missing is a desktop environment; a pool that mixes kinds runs "mixed"; a pool with nothing
    to run says why in words."""
    osworld = TaskPoolFactory(name="osworld-like")
    TaskFactory.create_batch(2, pool=osworld, env_kind="desktop", source="osworld")
    TaskFactory(pool=osworld, env_kind="browser", enabled=False)  # disabled: not played, not counted
    code, errors = _post(api, {"pool": osworld.pk})
    assert code == 400 and "pool" not in errors, errors
    assert errors["env.kind"] == [
        "no desktop environment can be leased: no env host has one up (start an env host with "
        "FLEET_WARM_POOL including desktop=N, e.g. `make up` starts envhost1)"
    ]
    created = api("researcher").post("/api/rl/runs/", {"name": "k", "preset": "grpo-dart", "pool": osworld.pk},
                                     format="json")  # fmt: skip
    assert created.status_code == 201 and created.json()["config"]["env"]["kind"] == "desktop"

    mixed = TaskPoolFactory(name="mixed-kinds")
    TaskFactory(pool=mixed, env_kind="desktop")
    TaskFactory(pool=mixed, env_kind="terminal")
    code, errors = _post(api, {"pool": mixed.pk})
    assert code == 400 and "pool" not in errors
    assert [m.split(":")[0] for m in errors["env.kind"]] == [
        "no desktop environment can be leased", "no terminal environment can be leased",
    ]  # fmt: skip

    empty = TaskPoolFactory(name="empty-pool")
    assert "pool empty-pool holds no tasks" in _post(api, {"pool": empty.pk})[1]["pool"][0]
    off = TaskPoolFactory(name="all-off")
    TaskFactory.create_batch(3, pool=off, env_kind="browser", enabled=False)
    assert "has 3 tasks, none enabled" in _post(api, {"pool": off.pk})[1]["pool"][0]
    unsupported = TaskPoolFactory(name="unsupported")
    TaskFactory(pool=unsupported, env_kind="desktop", supported=False, unsupported_reasons=["needs a VM"])
    message = _post(api, {"pool": unsupported.pk})[1]["pool"][0]
    assert "none of the enabled tasks of pool unsupported can run on this install (needs a VM)" in message


def test_an_osworld_format_pool_launches_on_the_basic_form(api, workers) -> None:
    osworld = TaskPoolFactory(name="osworld-launch")
    TaskFactory.create_batch(2, pool=osworld, env_kind="desktop", source="osworld")
    fleet.registry().register_env(
        env_id=f"d{uuid.uuid4().hex[:6]}", kind="desktop", worker="hostpre", boot_s=0.1
    )
    fleet.registry().host_heartbeat(worker="hostpre", ttl_s=60)
    code, body = _post(api, {"pool": osworld.pk})
    assert code == 201, body
    assert body["status"] == "running" and body["config"]["env"]["kind"] == "desktop"
    services.run_stop(run=Run.objects.get(pk=body["id"]))


def test_workers_count_by_their_announcement_not_by_answering_a_broadcast(isolated) -> None:
    """The rollout and train workers run at background CPU priority: on a busy machine their main
    processes did not answer a broadcast within seconds and launches were refused for minutes
    (`bench team`). A worker counts while its announcement lives (renewed every 10 s), not after."""
    from rl_control.engine.preflight import _queues_served
    from webapp.fleet import queues

    train, rollout = isolated["RL_TRAIN_QUEUE"], isolated["RL_ROLLOUT_QUEUE"]
    assert not {train, rollout} & _queues_served()
    queues.worker_announce(queue=train, worker="busy-trainer@h", concurrency=1)  # no process answers
    queues.worker_announce(queue=rollout, worker="gone-rollout@h", concurrency=2, ttl_s=-1.0)  # lapsed
    served = _queues_served()
    assert train in served and rollout not in served
