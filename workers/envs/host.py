"""The worker side of the environment manager (seed 000 §2.2): a process that owns live
environments, keeps a warm pool per kind, health-checks them, replaces crashed ones, and executes
calls for whoever holds the lease. Lease bookkeeping lives in Redis (`leases.LeaseRegistry`), so a
restarted host loses none of it; its own envs are retired and rebooted.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.actions.types import Action
from workers.envs.base import EnvCrashed, EnvError, Environment
from workers.envs.episode import episode_env
from workers.envs.leases import LeaseRegistry
from workers.envs.wire import observation_to_wire, step_result_to_wire, task_spec_from_wire

log = logging.getLogger(__name__)

EnvFactory = Callable[[], Environment]
SHUTDOWN_WAIT_S = 60.0  # how long shutdown waits for a call in progress before closing its env anyway


@dataclass
class HostedEnv:
    env_id: str
    kind: str
    env: Environment
    boot_s: float
    # Whether anything runs yet that can die: envs with a boot step start processes at once; page
    # envs open their page only at the first reset (before it, is_alive() is False by design).
    started: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class HostStats:
    booted: int = 0
    boot_failures: int = 0
    crashed: int = 0
    replaced: int = 0
    recycled: int = 0
    boot_times: list[float] = field(default_factory=list)


class UnknownEnv(EnvError):
    """The env id is not hosted here (retired, crashed, or another worker's)."""


class EnvHost:
    """Owns environments for one worker. `maintain()` is one upkeep pass; `start()` runs it every
    `period_s` on a background thread. `call()` is thread-safe per environment."""

    def __init__(
        self,
        *,
        registry: LeaseRegistry,
        worker: str,
        factories: Mapping[str, EnvFactory],
        warm: Mapping[str, int],
        capacity: Mapping[str, int] | None = None,
        period_s: float = 1.0,
    ) -> None:
        unknown = set(warm) - set(factories)
        if unknown:
            raise ValueError(f"warm pool names kinds with no factory: {sorted(unknown)}")
        self.registry = registry
        self.worker = worker
        self.factories = dict(factories)
        self.warm = dict(warm)
        self.capacity = dict(capacity or {k: max(v, 1) * 4 for k, v in warm.items()})
        self.period_s = period_s
        self.envs: dict[str, HostedEnv] = {}
        self.stats = HostStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ upkeep
    def boot(self, kind: str) -> str:
        """Boot one env of `kind` and put it in the registry's idle set; returns its id."""
        t0 = time.monotonic()
        env = None
        try:
            env = self.factories[kind]()
            boot = getattr(env, "boot", None)
            if callable(boot):
                boot()
        except Exception:
            self.stats.boot_failures += 1
            if env is not None:  # what it made before failing (a desktop's directories)
                with contextlib.suppress(Exception):
                    env.close()
            raise
        boot_s = time.monotonic() - t0
        env_id = f"{kind}-{uuid.uuid4().hex[:10]}"
        with self._lock:
            self.envs[env_id] = HostedEnv(
                env_id=env_id, kind=kind, env=env, boot_s=boot_s, started=callable(boot)
            )
        self.stats.booted += 1
        self.stats.boot_times.append(boot_s)
        self.registry.register_env(env_id=env_id, kind=kind, worker=self.worker, boot_s=boot_s)
        return env_id

    def health_check(self) -> list[str]:
        """Take every dead env out of service; returns their ids.

        An env in a call (its lock held) is skipped: a reset that reboots a used desktop has, for a
        moment, no X server and no sandbox, and closing it then from here killed the session the
        call was booting ("the session's sandbox is not running"); a call that finds its env
        crashed takes it out of service itself."""
        dead = []
        for hosted in list(self.envs.values()):
            if not hosted.started or not hosted.lock.acquire(blocking=False):
                continue
            try:
                try:
                    alive = hosted.env.is_alive()
                except Exception:
                    alive = False
                if not alive:
                    dead.append(hosted.env_id)
                    self._discard(hosted, reason=f"{hosted.kind} env stopped responding (health check)")
            finally:
                hosted.lock.release()
        return dead

    def fill(self) -> list[str]:
        """Boot envs until each kind has its warm number idle here (within capacity)."""
        booted = []
        for kind, want in self.warm.items():
            while self._idle_here(kind) < want and self._count(kind) < self.capacity.get(kind, want):
                try:
                    booted.append(self.boot(kind))
                except Exception:
                    log.exception("booting a %s env failed", kind)
                    break
        return booted

    def reregister(self) -> list[str]:
        """Put back into service the envs hosted here that the registry no longer knows: Redis
        restarted (it keeps nothing on disk) or a reaper retired this host during a stall. Leases
        from before are gone with it; their holders learn so at their next renew. Returns the ids."""
        back = []
        for hosted in list(self.envs.values()):
            if self.registry.env(hosted.env_id) or hosted.env_id not in self.envs:
                continue
            self.registry.register_env(
                env_id=hosted.env_id, kind=hosted.kind, worker=self.worker, boot_s=hosted.boot_s
            )
            back.append(hosted.env_id)
        if back:
            log.warning(
                "host %s: %d envs were missing from the registry; registered again", self.worker, len(back)
            )
        return back

    def recycle_idle(self) -> list[str]:
        """Give every idle env that a finished lease used a fresh session now (envs with a
        `recycle()`: a desktop reboots its sandbox, X server and window manager), so that the next
        lease's reset starts on a booted, clean env instead of paying the reboot itself. An env
        being called (its lock held) is skipped; a lease taken meanwhile waits for the lock and
        finds the env fresh. Returns the recycled ids."""
        done = []
        for hosted in list(self.envs.values()):
            recycle = getattr(hosted.env, "recycle", None)
            if not callable(recycle) or self.registry.env(hosted.env_id).get("state") != "idle":
                continue
            if not hosted.lock.acquire(blocking=False):
                continue
            try:
                if self.envs.get(hosted.env_id) is not hosted:  # taken out of service meanwhile
                    continue
                if recycle():
                    done.append(hosted.env_id)
                    self.stats.recycled += 1
            except EnvCrashed as exc:
                self._discard(hosted, reason=f"recycling failed: {exc}")
            except Exception:
                log.warning("recycling %s failed", hosted.env_id, exc_info=True)
            finally:
                hosted.lock.release()
        return done

    def maintain(self) -> dict[str, Any]:
        self.registry.host_heartbeat(worker=self.worker, ttl_s=max(5.0, 5 * self.period_s))
        self.reregister()
        dead = self.health_check()
        recycled = self.recycle_idle()
        booted = self.fill()
        if dead:
            self.stats.replaced += min(len(dead), len(booted))
        return {"dead": dead, "booted": booted, "recycled": recycled}

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                try:
                    self.maintain()
                except Exception:
                    log.exception("env host upkeep failed")

        # Envs a previous process of this host left in the registry no longer exist.
        stale = self.registry.retire_worker(worker=self.worker, reason=f"host {self.worker} restarted")
        if stale:
            log.info("retired %d envs left by a previous %s process", len(stale), self.worker)
        self.maintain()
        self._thread = threading.Thread(target=loop, name=f"env-host-{self.worker}", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            gone, self.envs = list(self.envs.values()), {}
        for hosted in gone:
            self.registry.retire_env(env_id=hosted.env_id)
            # A call or a recycle in progress ends first: closing the env under it broke the session
            # it was booting (its log directory or sandbox gone) and leaked what it started after.
            locked = hosted.lock.acquire(timeout=SHUTDOWN_WAIT_S)
            try:
                self._close(hosted)
            finally:
                if locked:
                    hosted.lock.release()

    # ------------------------------------------------------------------ calls
    def call(self, env_id: str, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one operation on a hosted env: reset {task, seed} (answers the observation and the
        env's kind, version and start state: workers.envs.episode), step {action}, observe {},
        evaluate {}. Returns a JSON-safe dict; a crash takes the env out of service and raises
        `EnvCrashed` for the caller."""
        hosted = self.envs.get(env_id)
        if hosted is None:
            raise UnknownEnv(f"environment {env_id} is not hosted by {self.worker}")
        payload = payload or {}
        with hosted.lock:
            if self.envs.get(env_id) is not hosted:  # taken out of service while this call waited
                raise UnknownEnv(f"environment {env_id} is no longer hosted by {self.worker}")
            try:
                if op == "reset":
                    spec = task_spec_from_wire(payload["task"])
                    obs = hosted.env.reset(spec, payload.get("seed"))
                    hosted.started = True
                    return {
                        "observation": observation_to_wire(obs),
                        "env": episode_env(hosted.env, spec, obs),
                    }
                if op == "step":
                    return step_result_to_wire(hosted.env.step(Action.from_json(payload["action"])))
                if op == "observe":
                    return {"observation": observation_to_wire(hosted.env.observe())}
                if op == "evaluate":
                    return {"reward": float(hosted.env.evaluate())}
                if op == "pointer":
                    xinput = getattr(hosted.env, "xinput", None)
                    if xinput is None:
                        raise EnvError(f"a {hosted.kind} environment has no X pointer")
                    x, y = xinput.pointer()
                    return {"x": x, "y": y}
                if op == "frames":
                    return _frames_op(hosted, payload)
                if op == "info":
                    vnc = getattr(hosted.env, "vnc_target", None)
                    target = vnc() if callable(vnc) else vnc
                    return {"kind": hosted.kind, "vnc": _target_dict(target)}
            except EnvCrashed as exc:
                self._discard(hosted, reason=str(exc))
                raise
        raise EnvError(
            f"unknown operation {op!r}; expected reset, step, observe, evaluate, pointer, frames or info"
        )

    # ------------------------------------------------------------------ internals
    def _discard(self, hosted: HostedEnv, *, reason: str) -> None:
        with self._lock:
            if self.envs.pop(hosted.env_id, None) is None:
                return
        self.stats.crashed += 1
        self.registry.mark_crashed(env_id=hosted.env_id, reason=reason)
        self._close(hosted)

    def _close(self, hosted: HostedEnv) -> None:
        try:
            hosted.env.close()
        except Exception:
            log.warning("closing %s failed", hosted.env_id, exc_info=True)

    def _count(self, kind: str) -> int:
        return sum(1 for h in self.envs.values() if h.kind == kind)

    def _idle_here(self, kind: str) -> int:
        return sum(
            1
            for h in list(self.envs.values())
            if h.kind == kind and self.registry.env(h.env_id).get("state") == "idle"
        )


def _target_dict(target: Any) -> dict[str, Any] | None:
    if target is None:
        return None
    if isinstance(target, dict):
        return target
    fields = {k: getattr(target, k) for k in ("host", "port", "socket") if getattr(target, k, None)}
    return fields or {"repr": repr(target)}


def _frames_op(hosted: HostedEnv, payload: dict[str, Any]) -> dict[str, Any]:
    """Take-over screens: {cmd: start} | {cmd: before, times: [monotonic...]} | {cmd: stop}."""
    env: Any = hosted.env  # a desktop env; the frame methods are not part of `Environment`
    if not hasattr(env, "frames_start"):
        raise EnvError(f"a {hosted.kind} environment does not record take-over frames")
    cmd = payload.get("cmd")
    if cmd == "start":
        return {"frames": env.frames_start()}
    if cmd == "before":
        shots = env.frames_before([float(t) for t in payload.get("times") or []])
        return {"frames": [base64.b64encode(s).decode("ascii") if s else None for s in shots]}
    if cmd == "stop":
        env.frames_stop()
        return {}
    raise EnvError(f"frames: unknown cmd {cmd!r}; expected start, before or stop")
