"""Real processes for annotation tests: an env-host worker (Chromium + MiniWoB++), a Celery worker for
candidates and the embedded policy server (an untrained model: its candidates parse but are random)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.env_host import env_host


@pytest.fixture
def policy_server(tmp_path: Path) -> Iterator[str]:
    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer
    from workers.policy.server import start_server

    model, tokenizer = new_model(seed=0), FlywheelTokenizer()
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    server, _ = start_server(
        EmbeddedPolicy.from_pretrained(tmp_path / "ckpt", seed=0), checkpoint=str(tmp_path)
    )
    try:
        yield server.url + "/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def warm_pool() -> str:
    """The env host's warm pool; a test module overrides this fixture for other kinds."""
    return "browser=1"


@pytest.fixture
def live_stack(policy_server: str, warm_pool: str) -> Iterator[dict[str, str]]:
    """Env host (warm pool `warm_pool`) + a worker for the default queue, on this test's database."""
    with env_host(
        warm_pool, default_queue=True, POLICY_BASE_URL=policy_server, POLICY_PROFILE="embedded"
    ) as names:
        yield names
