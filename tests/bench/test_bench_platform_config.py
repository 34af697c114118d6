"""The typed configurations of the platform benchmarks (benchmarks/harness/platform_config.py): the
defaults are the values the reported figures were measured with, FLYWHEEL_* overrides are typed, and
a bad value is refused with the variable's name."""

from __future__ import annotations

import importlib
import inspect
import json
import os
from dataclasses import asdict
from typing import Any

import pytest

from benchmarks.harness.platform_config import (
    AnnotateBenchConfig,
    DashboardBenchConfig,
    EnvmanagerBenchConfig,
    EnvstepBenchConfig,
    ExportBenchConfig,
    FlywheelBenchConfig,
    LaunchBenchConfig,
    OsworldBenchConfig,
    PolicyBenchConfig,
    VlmBenchConfig,
)
from benchmarks.management.commands.bench import BENCHES

CONFIGS: list[Any] = [
    ExportBenchConfig, EnvmanagerBenchConfig, EnvstepBenchConfig, PolicyBenchConfig, AnnotateBenchConfig,
    DashboardBenchConfig, LaunchBenchConfig, VlmBenchConfig, FlywheelBenchConfig, OsworldBenchConfig,
]  # fmt: skip

# What --quick ran with before the configurations (the benches' former `x if quick else y`).
QUICK: dict[Any, dict[str, Any]] = {
    ExportBenchConfig: {"steps": 50_000},
    EnvmanagerBenchConfig: {"throughput_s": 3.0, "reclaims": 5, "processes": 2, "reaper_period_s": 1.0},
    EnvstepBenchConfig: {"desktop_steps": 200, "settled_steps": 50, "desktop_boots": 3, "browser_steps": 40,
                         "browser_pages": 8, "episodes_per_page": 3},
    PolicyBenchConfig: {"repeats": 5, "threads": 1, "candidates": 4, "checkpoint": None, "validation_seeds": 2},
    AnnotateBenchConfig: {"decisions": 15},
    DashboardBenchConfig: {"series_names": ("policy/entropy",), "downsample_repeats": 5, "latency_samples": 60,
                           "sockets": 500, "series_points": 1_000_000},
    LaunchBenchConfig: {"window_s": 120.0, "base_url": None},
    VlmBenchConfig: {"proposals": 6, "updates": 1},
    FlywheelBenchConfig: {"tasks": ("click-test", "focus-text", "click-button"), "k": 2, "demos_per_task": 6,
                          "sft_steps": (100, 40), "eval_seeds": 2, "max_steps": 2, "iterations": 2, "rl_minutes": 2.0},
    OsworldBenchConfig: {"checks_per_domain": 2},
}  # fmt: skip


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("FLYWHEEL_") and not name.startswith("FLYWHEEL_TEST"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_a_full_run_reads_the_defaults_and_quick_the_former_quick_shape(config: Any) -> None:
    assert config.for_run(False) == config(quick=False)
    quick = config.for_run(True)
    assert {k: getattr(quick, k) for k in QUICK[config]} == QUICK[config]
    json.dumps(asdict(quick))  # printed in the bench's JSON


def test_full_defaults_are_the_measured_ones() -> None:
    assert ExportBenchConfig(quick=False).steps == 1_000_000
    assert EnvstepBenchConfig(quick=False).desktop_steps == 1000
    flywheel = FlywheelBenchConfig(quick=False)
    assert len(flywheel.tasks) == 8 and flywheel.eval_range == range(90_000, 90_010)
    assert flywheel.rs_temperature == 0.3 and flywheel.max_new_tokens == 64
    assert LaunchBenchConfig(quick=False).run_config() == {
        "env": {"parallel_envs": 2},
        "grpo": {"rollouts_per_task": 2},
        "curation": {"rollouts_max": 2, "step_cap": 4, "min_batch_trajectories": 4},
        "budget": {"max_updates": 10_000, "max_minutes": 12.0},
    }
    assert len(OsworldBenchConfig(quick=False).goal_domains) == 10  # multi_apps and vs_code too (issue 33)


def test_overrides_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_EXPORT_STEPS", "2000")
    monkeypatch.setenv("FLYWHEEL_BENCH_POLICY_THREADS", "4")
    monkeypatch.setenv("FLYWHEEL_BENCH_POLICY_CHECKPOINT", "/tmp/ckpt")
    monkeypatch.setenv("FLYWHEEL_LAUNCH_WINDOW_S", "30.5")
    monkeypatch.setenv("FLYWHEEL_BENCH_PASSWORD", "s3cret")
    assert ExportBenchConfig.for_run(True).steps == 2000
    policy = PolicyBenchConfig.for_run(False)
    assert (policy.threads, policy.checkpoint, policy.repeats) == (4, "/tmp/ckpt", 30)
    launch = LaunchBenchConfig.for_run(True)
    assert launch.window_s == 30.5 and launch.run_config()["budget"]["max_minutes"] == pytest.approx(
        2.5083, 1e-3
    )
    assert launch.password == "s3cret" and "password" not in launch.to_json()
    monkeypatch.setenv("FLYWHEEL_BENCH_POLICY_CHECKPOINT", "")  # set but empty: the untrained model
    assert PolicyBenchConfig.for_run(True).checkpoint is None


@pytest.mark.parametrize(
    ("name", "value", "config", "message"),
    [
        ("EXPORT_STEPS", "a million", ExportBenchConfig, "FLYWHEEL_EXPORT_STEPS='a million'"),
        ("EXPORT_STEPS", "0", ExportBenchConfig, "FLYWHEEL_EXPORT_STEPS must be a number > 0"),
        (
            "BENCH_POLICY_THREADS",
            "-2",
            PolicyBenchConfig,
            "FLYWHEEL_BENCH_POLICY_THREADS must be a number > 0",
        ),
        ("DASHBOARD_SOCKETS", "", DashboardBenchConfig, "FLYWHEEL_DASHBOARD_SOCKETS must be a number > 0"),
        ("ENVMANAGER_SECONDS", "ten", EnvmanagerBenchConfig, "FLYWHEEL_ENVMANAGER_SECONDS"),
        ("FLYWHEEL_RL_MINUTES", "1.5.2", FlywheelBenchConfig, "FLYWHEEL_FLYWHEEL_RL_MINUTES"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, config: Any, message: str
) -> None:
    monkeypatch.setenv(f"FLYWHEEL_{name}", value)
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(")):
        config.for_run(True)


@pytest.mark.parametrize("name", sorted(set(BENCHES) - {"rollout", "learn", "asr"}))
def test_each_platform_bench_reads_its_typed_configuration_and_prints_it(name: str) -> None:
    module = importlib.import_module(BENCHES[name].split(":")[0])
    source = inspect.getsource(module)
    assert "BenchConfig.for_run(quick" in source  # (quick) or (quick, <option>)
    assert '"config"' in source or "config=asdict(config)" in source
    assert 'os.environ.get("FLYWHEEL_' not in source
