"""What the engine benchmarks (`bench rollout`, `bench learn`, `bench flywheel`) share: the driver in a
child process on the bench's own database, the start checkpoint, a pool of MiniWoB++ tasks and the
user that owns the runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks.harness.database import bench_database
from benchmarks.harness.processes import owned_processes


def run_in_child(module: str, kind: str, quick: bool) -> dict[str, Any]:
    """Run `python -m module [--quick]` on the bench database `kind`; its last line is JSON. Stopped
    from outside, the child gets SIGTERM first, so its own clean-up (the stack) runs."""
    db = bench_database(kind)
    args = [sys.executable, "-m", module] + (["--quick"] if quick else [])
    proc = subprocess.Popen(args, env=db.env, cwd=settings.BASE_DIR, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"bench {kind} failed ({proc.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return dict(json.loads(lines[-1]))


def child_main(drive: Callable[[bool], dict[str, Any]], argv: list[str]) -> int:
    """The child's entry point: Django set up, `drive(quick)` owning what it starts, its JSON printed."""
    import django

    django.setup()
    with owned_processes():
        figures = drive("--quick" in argv)
    print(json.dumps(figures))
    return 0


def start_checkpoint(workdir: Path, model: Any = None) -> Any:
    """The run's start checkpoint: `model` (an untrained one by default) saved under `workdir`."""
    from webapp.store.models import Checkpoint
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    path = workdir / "start"
    if model is None:
        model = new_model(FlywheelPolicyConfig(flywheel_version="0"), seed=0)
    model.config.flywheel_version = "0"
    model.save_pretrained(path)
    FlywheelTokenizer().save_pretrained(path)
    return Checkpoint.objects.create(version=f"bench-start-{workdir.name}", path=str(path))


def task_pool(name: str, tasks: list[tuple[str, int | None]], pause_ms: int = 0) -> Any:
    """A pool of MiniWoB++ tasks: (task, step budget or None), each with the given transition pause."""
    from webapp.store.models import Task, TaskPool

    pool = TaskPool.objects.create(name=name)
    for task, budget in tasks:
        setup: dict[str, Any] = {"task": task}
        if budget:
            setup["max_steps"] = budget
        if pause_ms:
            setup["transition_pause_ms"] = pause_ms
        Task.objects.create(
            pool=pool, external_id=task, instruction="", env_kind="browser", source="miniwob", setup=setup
        )
    return pool


def bench_user() -> Any:
    """The user that owns the engine benchmarks' runs."""
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-rl")
    return user
