"""Fixtures for the policy layer: real MiniWoB++ pages in Chromium and two small HF checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.envs.browser.miniwob import MiniWoBEnv
from workers.envs.browser.pool import BrowserPool


def make_checkpoint(directory: Path, version: str, seed: int) -> Path:
    """An untrained embedded policy saved as an HF directory (config.json, safetensors, vocab)."""
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    new_model(FlywheelPolicyConfig(flywheel_version=version), seed=seed).save_pretrained(directory)
    FlywheelTokenizer().save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("policy-checkpoints")
    return {
        "v-a": make_checkpoint(root / "v-a", "v-a", seed=1),
        "v-b": make_checkpoint(root / "v-b", "v-b", seed=2),
    }


@pytest.fixture(scope="session")
def miniwob() -> Iterator[MiniWoBEnv]:
    """One real Chromium page running MiniWoB++ tasks (160×210 viewport)."""
    with BrowserPool() as pool:
        env = MiniWoBEnv(pool, wait_s=0.0)
        yield env
        env.close()


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2.5-VL (random weights, tokenizer and image processor built here)."""
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-vlm") / "v0", seed=0, version="0")
