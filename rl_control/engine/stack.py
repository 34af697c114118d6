"""A local engine stack of real processes, for the engine tests and benchmarks.

One env host (Celery worker on `env.<name>` with a warm pool: browsers, or the kinds given),
rollout workers (Celery, prefork, on a queue of their own) and one trainer worker (Celery, one prefork child), which starts
each run's own policy servers as `make up` does (rl_control.engine.serving: one implementation). Every name (queues, Redis prefixes) carries
a random suffix so several stacks share PostgreSQL and Redis without seeing each other's work.
`settings_overrides()` is what the calling process needs to talk to the same stack.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

CELERY = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--without-gossip", "--without-mingle",
          "--without-heartbeat", "-l", "warning"]  # fmt: skip


def wait_for(what: str, predicate: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop a process started in its own session (and its children) by its group id."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class LocalStack:
    def __init__(
        self,
        workdir: Path,
        database_url: str,
        *,
        settings_module: str,
        envs: int = 2,
        slot_timeout_s: float = 60.0,
        updates_per_chunk: int = 2,
        extra_env: dict[str, str] | None = None,
        warm_pool: dict[str, int] | None = None,
        host_per_kind: bool = False,
        host_module: str | None = None,
    ) -> None:
        self.name = f"e{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.envs = envs
        self.warm_pool = warm_pool or {"browser": envs}  # environments the env host keeps idle, by kind
        self.host_per_kind = host_per_kind
        # The env host's worker: `celery -A webapp worker`, or `python -m <host_module> worker` (a
        # module that sets the host up, then runs the same worker: benchmarks.remote_vm)
        self.host_worker = CELERY if host_module is None else [sys.executable, "-m", host_module, *CELERY[5:]]
        self.procs: list[subprocess.Popen] = []
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": settings_module,
            "DATABASE_URL": database_url,
            "FLEET_REDIS_PREFIX": f"test:fleet:{self.name}",
            "RL_REDIS_PREFIX": f"test:rl:{self.name}",
            "RL_ROLLOUT_QUEUE": f"rollout.{self.name}",
            "RL_TRAIN_QUEUE": f"train.{self.name}",
            "RL_CHECKPOINT_ROOT": str(workdir / "rl"),
            "RL_SLOT_TIMEOUT_S": str(slot_timeout_s),
            "RL_UPDATES_PER_CHUNK": str(updates_per_chunk),
            "RL_ROLLOUT_CHUNK_S": "20",
            "OMP_NUM_THREADS": "1",
            **(extra_env or {}),
        }
        self.rollout: subprocess.Popen | None = None

    def settings_overrides(self) -> dict[str, Any]:
        e = self.env
        return {
            "FLEET_REDIS_PREFIX": e["FLEET_REDIS_PREFIX"], "RL_REDIS_PREFIX": e["RL_REDIS_PREFIX"],
            "RL_ROLLOUT_QUEUE": e["RL_ROLLOUT_QUEUE"],
            "RL_TRAIN_QUEUE": e["RL_TRAIN_QUEUE"], "RL_CHECKPOINT_ROOT": e["RL_CHECKPOINT_ROOT"],
            "RL_SLOT_TIMEOUT_S": float(e["RL_SLOT_TIMEOUT_S"]),
        }  # fmt: skip

    def spawn(self, args: list[str], **extra: str) -> subprocess.Popen:
        log = open(self.workdir / f"proc{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(args, env={**self.env, **extra}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        return proc

    def rollout_worker(self) -> subprocess.Popen:
        """A rollout worker with one process per environment slot (prefork: see rl_control.tasks)."""
        self.rollout = self.spawn([*CELERY, "-n", f"r{len(self.procs)}{self.name}@%h", "-Q",
                                   self.env["RL_ROLLOUT_QUEUE"], "-P", "prefork", "-c", str(self.envs)])  # fmt: skip
        return self.rollout

    def start(self) -> None:
        # One env host, or with `host_per_kind` one per kind (as a fleet keeps browsers and desktop
        # VMs on machines of their own: a process's Chromium and its desktops do not share a fate).
        pools = (
            [(k, {k: n}) for k, n in self.warm_pool.items()] if self.host_per_kind else [("", self.warm_pool)]
        )
        for suffix, pool in pools:
            host = f"{self.name}{suffix}"
            self.spawn([*self.host_worker, "-n", f"h{host}@%h", "-Q", f"env.{host}", "-P", "threads",
                        "-c", str(2 * self.envs)], FLYWHEEL_ENV_HOST=host,
                       FLEET_WARM_POOL=",".join(f"{k}={n}" for k, n in pool.items()),
                       FLEET_HOST_PERIOD_S="0.5")  # fmt: skip
        self.rollout_worker()
        # prefork with one child: one update at a time, and the main process answers the launch
        # preflight's "who consumes the train queue" while the child trains (solo could not).
        self.spawn(
            [*CELERY, "-n", f"t{self.name}@%h", "-Q", self.env["RL_TRAIN_QUEUE"], "-P", "prefork", "-c", "1"]
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)
        # The runs' own policy servers (started by the trainer worker, each in its own session) exit
        # within seconds once their lifelines are gone.
        from django.conf import settings

        from workers.envs.leases import redis_client

        r = redis_client(settings.REDIS_URL)
        for name in r.scan_iter(match=f"{self.env['RL_REDIS_PREFIX']}:run:*:serve:lifeline", count=500):
            r.delete(name)

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-tail:]}"
            for p in sorted(self.workdir.glob("proc*.log"))
        )


def launch_when_ready(run: Any, timeout_s: float = 300.0) -> Any:
    """Launch `run` once the stack's workers and env host answer the launch preflight (they take
    tens of seconds to start on a loaded machine); the last preflight error after `timeout_s`."""
    from rl_control import services
    from rl_control.services.runs import RunPreflightError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return services.run_launch(run=run)
        except RunPreflightError:
            if time.monotonic() > deadline:
                raise
            time.sleep(3.0)
