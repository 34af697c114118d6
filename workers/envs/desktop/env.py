"""`DesktopEnv`: an Xvfb desktop with openbox, apps, XTEST input, mss screenshots and x11vnc (SPEC §3).

Xvfb, the window manager, every app, and every OSWorld set-up and evaluator command run in the
session's sandbox (`workers.envs.sandbox`). x11vnc is a host process that runs no task code, as the
session's uid, in the box's IPC namespace only (shared memory with its Xvfb); its socket is where
only the token proxy reaches it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from Xlib.error import ConnectionClosedError, DisplayError

from workers.actions.types import Action
from workers.envs.base import EnvCrashed, EnvError, EnvKind, ImageFormat, Observation, StepResult, TaskSpec
from workers.envs.desktop.apps import app_spec
from workers.envs.desktop.capture import ScreenGrabber
from workers.envs.desktop.config import DesktopConfig
from workers.envs.desktop.dispatch import execute_action
from workers.envs.desktop.frames import FrameRecorder
from workers.envs.desktop.procs import has_descendant, stop, wait_until
from workers.envs.desktop.session import (
    PY_INSIDE,
    SESSION_BUS,
    box_env,
    spawn_session_bus,
    terminal_transcript,
    wait_session_bus,
)
from workers.envs.desktop.settle import ScreenSettler
from workers.envs.desktop.wm import CONFIG_INSIDE, write_config, write_menu
from workers.envs.desktop.xauth import XAUTHORITY_INSIDE
from workers.envs.desktop.xinput import XInput
from workers.envs.desktop.xserver import XServer
from workers.envs.sandbox import SANDBOX_HOME, CommandResult, Limits, Sandbox, SandboxError
from workers.envs.sandbox.home import disk_mb_of
from workers.envs.vnc.server import VncTarget, X11Vnc, default_socket_root


class DesktopEnv:
    """A live desktop session implementing the Environment protocol.

    Coordinates in actions are screen pixels (conversion from model conventions happens before).
    After Xvfb dies every call except `close`/`is_alive` raises `EnvCrashed`.
    """

    kind: EnvKind = "desktop"

    def __init__(self, config: DesktopConfig | None = None) -> None:
        self.config = config or DesktopConfig()
        self._x: XServer | None = None
        self._vnc: X11Vnc | None = None
        self._input: XInput | None = None
        self._grabber: ScreenGrabber | None = None
        self._settler: ScreenSettler | None = None
        self._box: Sandbox | None = None
        self._bus: str | None = None
        self._apps: list[subprocess.Popen[bytes]] = []
        self._owns_dir = self.config.session_dir is None
        self.session_dir: Path = self.config.session_dir or Path(tempfile.mkdtemp(prefix="flywheel-desktop-"))
        # Host-only: logs and the session's X directory (`XServer`; only its sockets/ is mounted in
        # the sandbox); traversable so that x11vnc, as the session's uid, reaches the X directory.
        self._log_dir = Path(tempfile.mkdtemp(prefix="flywheel-desktop-logs-"))
        self._log_dir.chmod(0o711)
        # The window manager's configuration, bound read-only into the sandbox.
        self._wm_dir = Path(tempfile.mkdtemp(prefix="flywheel-desktop-wm-"))
        self._task: TaskSpec | None = None
        self._steps = 0
        self.last_action_kind: str | None = None  # OSWorld 'infeasible' is scored from it
        self.started_apps: tuple[str, ...] = ()  # what the last reset launched (its start state)
        self._mcp: Any = None
        self._frames: FrameRecorder | None = None
        self.boot_s: float | None = None

    # lifecycle -------------------------------------------------------------------------------

    def boot(self, network: bool = False, disk_mb: int | None = None) -> float:
        """Start Xvfb, the session's sandbox with openbox in it, and (optionally) x11vnc; return the
        boot time in seconds. `network`: the sandbox gets filtered egress (`SandboxPolicy.network`);
        `disk_mb`: the home's size cap (None: the config's `policy.disk_mb`)."""
        if self._x is not None:
            return self.boot_s or 0.0
        t0 = time.monotonic()
        cfg = self.config
        self.session_dir.mkdir(parents=True, exist_ok=True)
        disk_mb = cfg.policy.disk_mb if disk_mb is None else disk_mb
        self._box = Sandbox(self.session_dir, policy=replace(cfg.policy, network=network, disk_mb=disk_mb))
        try:
            uid = self._box.prepare()
            self._x = XServer(
                cfg.width,
                cfg.height,
                cfg.display_range,
                self._log_dir,
                self._log_dir / "x11",
                uid,
                glx=cfg.glx,
            )
            self._x.claim_display()
            # The box first (Xvfb runs in it), then what needs no display (D-Bus) while Xvfb starts,
            # then openbox and x11vnc together; each is waited for by its own readiness signal.
            self._start_box(self._box, self._x)
            self._x.spawn_xvfb(lambda argv, fds: self._spawn_in_box(argv, "xvfb.log", fds))
            bus = self._spawn_session_bus(self._box)
            self._x.wait_xvfb(cfg.boot_timeout_s)
            assert self._x.conn is not None
            if cfg.vnc:
                self._vnc = X11Vnc(
                    self._x.display,
                    cfg.vnc_socket_dir or default_socket_root(),
                    self._log_dir,
                    user=uid,
                    ipc_of=self._box.init_pid,
                    auth=self._x.auth_file,
                )
                self._vnc.spawn()
            self._x.start_wm(self._spawn_in_box, cfg.boot_timeout_s)
            if self._vnc is not None:
                self._vnc.wait_ready(cfg.boot_timeout_s)
            self._wait_session_bus(self._box, bus)
            self._input = XInput(self._x.conn, cfg.width, cfg.height)
            self._grabber = ScreenGrabber(self._x.display, cfg.jpeg_quality)
            if cfg.settle_quiet_s > 0:
                self._settler = ScreenSettler(self._x.display)
        except BaseException:
            self._shutdown()
            raise
        self.boot_s = time.monotonic() - t0
        return self.boot_s

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        """Boot (or reboot a used session), launch the task's apps, run its set-up steps.

        A reboot empties the session directory when this env created it; a directory the caller
        gave (shared with a terminal) is the caller's to manage.
        """
        if task.kind != "desktop":
            raise EnvError(f"DesktopEnv cannot run a {task.kind!r} task")
        network = bool(task.setup.get("network"))
        disk_mb = disk_mb_of(task.setup, self.config.policy.disk_mb)  # the task pool's cap
        if self._x is not None and (
            self.used
            or self._box is None
            or (self._box.policy.network, self._box.policy.disk_mb) != (network, disk_mb)
        ):
            self._discard_session()
        try:
            self.boot(network=network, disk_mb=disk_mb)
        except SandboxError as exc:
            if network:
                raise EnvError(f"task {task.task_id} asks for the network: {exc}") from exc
            raise
        self._task = task
        self._steps = 0
        self.last_action_kind = None
        apps = list(task.setup.get("apps", self.config.apps))
        self._offer_apps(apps)
        for name in apps:
            self.launch(name)
        self.started_apps = tuple(apps)
        if task.source == "osworld":
            from workers.envs import osworld

            osworld.run_setup(osworld.setup_steps(task), runner=self, bundle_dir=osworld.bundle_dir_of(task))
        return self.observe()

    @property
    def used(self) -> bool:
        """Whether a task ran here since the last boot (its next reset reboots)."""
        return self._steps > 0 or self._task is not None

    def recycle(self) -> bool:
        """Between leases (the env host calls it on idle envs): a used session is shut down and a
        fresh one booted now, so the next reset finds it ready. Returns whether it rebooted."""
        if self._x is None or not self.used:
            return False
        self._discard_session()
        self.boot()
        return True

    def _discard_session(self) -> None:
        self._shutdown()
        if self._owns_dir:
            shutil.rmtree(self.session_dir, ignore_errors=True)

    def close(self) -> None:
        self._shutdown()
        shutil.rmtree(self._log_dir, ignore_errors=True)
        shutil.rmtree(self._wm_dir, ignore_errors=True)
        if self._owns_dir:
            shutil.rmtree(self.session_dir, ignore_errors=True)

    def is_alive(self) -> bool:
        return self._x is not None and self._x.alive()

    # the protocol ----------------------------------------------------------------------------

    def observe(self, image_format: ImageFormat | None = None) -> Observation:
        self._check_alive()
        assert self._grabber is not None and self._x is not None
        clock = time.monotonic()
        try:
            data, timings = self._grabber.capture(image_format or self.config.image_format)
        except Exception as exc:  # mss raises ScreenShotError; a dead server shows up here first
            if not self.is_alive():
                raise EnvCrashed(f"Xvfb {self._x.display} died") from exc
            raise EnvError(f"screenshot failed: {exc}") from exc
        return Observation(
            screenshot=data,
            width=self.config.width,
            height=self.config.height,
            image_format=image_format or self.config.image_format,
            instruction=self._task.instruction if self._task else "",
            clock=clock,
            timings_ms=timings,
        )

    def step(self, action: Action) -> StepResult:
        self._check_alive()
        assert self._input is not None
        self._steps += 1
        self.last_action_kind = action.kind
        t0 = time.perf_counter()
        try:
            done, info = execute_action(self.config, self._input, action, self.mcp_toolbox)
        except (ConnectionClosedError, DisplayError, BrokenPipeError) as exc:
            raise EnvCrashed(f"X connection lost: {exc}") from exc
        except EnvError as exc:
            if not self.is_alive():
                raise EnvCrashed("Xvfb died during the action") from exc
            return StepResult(
                observation=self.observe(), info={"error": str(exc), "action": action.to_json()}
            )
        input_ms = (time.perf_counter() - t0) * 1000
        settle_ms = 0.0
        if self._settler is not None and self.config.settle_quiet_s > 0:
            try:
                settle_ms = self._settler.wait(self.config.settle_quiet_s, self.config.settle_max_s) * 1000
            except (ConnectionClosedError, DisplayError, OSError) as exc:
                raise EnvCrashed(f"X connection lost while settling: {exc}") from exc
        obs = self.observe()
        info["timings_ms"] = {"input": input_ms, "settle": settle_ms, **obs.timings_ms}
        if self._box is not None and (notice := self._box.disk_notice()) is not None:
            info["disk_full"] = notice
        return StepResult(observation=obs, done=done, info=info)

    def evaluate(self) -> float:
        """The task's verifier score: its OSWorld evaluator for source 'osworld'; 0.0 without one."""
        self._check_alive()
        from workers.envs import osworld

        return osworld.task_score(self._task, runner=self)

    # session services ------------------------------------------------------------------------

    @property
    def display(self) -> str:
        if self._x is None:
            raise EnvError("desktop not booted")
        return self._x.display

    @property
    def sandbox(self) -> Sandbox:
        """The session's sandbox (a terminal can share it: `TerminalEnv(sandbox=...)`)."""
        self._check_alive()
        assert self._box is not None
        return self._box

    @property
    def vnc_target(self) -> VncTarget | None:
        return self._vnc.target if self._vnc is not None else None

    def ensure_vnc(self) -> VncTarget | None:
        """Restart x11vnc if it died (the port may change, so tokens must be minted again)."""
        self._check_alive()
        if self._vnc is None or self._vnc.alive():
            return self.vnc_target
        self._vnc.stop()
        return self._vnc.start(self.config.boot_timeout_s)

    @property
    def xinput(self) -> XInput:
        self._check_alive()
        assert self._input is not None
        return self._input

    def app_env(self) -> dict[str, str]:
        """Environment for processes in this desktop's sandbox: its DISPLAY, the session as HOME."""
        osworld = self._task is not None and self._task.source == "osworld"
        return box_env(
            display=self.display, box=self._box, bus=self._bus, osworld=osworld, extra=self.config.extra_env
        )

    def launch(self, name: str, wait: bool = True) -> None:
        """Start a desktop app ('xterm', 'chromium', 'editor') in the sandbox and wait for its window."""
        self._check_alive()
        assert self._x is not None
        spec = app_spec(name, self.session_dir, self.config.width, self.config.height)
        proc = self._spawn_in_box(list(spec.argv), f"{spec.name}.log")
        if wait:
            self._x.wait_for_window(spec.wm_class, self.config.app_timeout_s)
            if name == "xterm":
                # The window maps before its shell runs; input typed earlier would be echoed twice.
                wait_until(
                    lambda: has_descendant(proc.pid, "bash"), self.config.app_timeout_s, "the xterm shell"
                )

    @property
    def command_home(self) -> str:
        return SANDBOX_HOME

    def run_command(
        self,
        command: str | list[str],
        shell: bool = False,
        timeout_s: float = 30.0,
        separate_stderr: bool = False,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run a command in the session's sandbox (DISPLAY set, cwd = the session's home), as OSWorld
        set-up and result getters do. Memory is bounded by the sandbox, not per command;
        `max_output` raises the bytes of output kept (a file read whole by an evaluator)."""
        self._check_alive()
        assert self._box is not None
        if not isinstance(command, str) and shell:
            command = " ".join(command)
        limits = Limits(timeout_s=timeout_s, memory_mb=0)
        if max_output is not None:
            limits = replace(limits, max_output=max_output)
        return self._box.run(command, limits=limits, env=self.app_env(), separate_stderr=separate_stderr)

    def terminal_transcript(self) -> str | None:
        """The text of the terminal in the active window, or None when it is not one of the
        session's terminals (`workers.envs.desktop.session.terminal_transcript`)."""
        return terminal_transcript(self.run_command)

    def spawn_command(self, command: str | list[str], shell: bool = False) -> None:
        """Start a long-running command (OSWorld 'launch') in the sandbox without waiting for it; it
        ends when the session closes at the latest."""
        self._check_alive()
        if isinstance(command, str):
            argv = ["/bin/sh", "-c", command]
        else:
            argv = ["/bin/sh", "-c", " ".join(command)] if shell else list(command)
        self._spawn_in_box(argv, "launch.log")

    def mcp_toolbox(self) -> Any:
        """The session's MCP client (started on first use)."""
        if self._mcp is None:
            from workers.envs.mcp_tools.client import McpToolbox

            self._mcp = McpToolbox(self.session_dir)
        return self._mcp

    # take-over frames ----------------------------------------------------------------------

    def frames_start(self) -> int:
        """Start recording the screen in the background (take-over); returns frames so far (1)."""
        self._check_alive()
        assert self._x is not None
        self.frames_stop()
        self._frames = FrameRecorder(self._x.display, self.config.jpeg_quality).start()
        if self._frames.error:
            raise EnvError(self._frames.error)
        return self._frames.count()

    def frames_before(self, times: list[float]) -> list[bytes | None]:
        """For each `time.monotonic()` stamp, the last recorded screen at or before it."""
        if self._frames is None:
            raise EnvError("no take-over recording: call frames_start() first")
        return self._frames.before(times)

    def frames_stop(self) -> None:
        if self._frames is not None:
            self._frames.stop()
            self._frames = None

    # internals -------------------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self._x is None:
            raise EnvError("desktop not booted; call reset() or boot() first")
        if not self._x.alive():
            raise EnvCrashed(f"Xvfb {self._x.display} is not running")

    def _start_box(self, box: Sandbox, x: XServer) -> None:
        """Start the session's sandbox with its X socket directory and cookie, and the window
        manager's config."""
        write_config(self._wm_dir)
        box.binds["/tmp/.X11-unix"] = x.socket_dir
        box.ro_binds[XAUTHORITY_INSIDE] = x.auth_file
        box.env["XAUTHORITY"] = XAUTHORITY_INSIDE
        box.ro_binds[CONFIG_INSIDE] = self._wm_dir
        from workers.envs.osworld import pyautogui_dir

        if (py_dir := pyautogui_dir()) is not None:  # OSWorld's pyautogui set-up steps (osworld-apps)
            box.ro_binds[PY_INSIDE] = py_dir
        box.env["DISPLAY"] = self.display
        box.start(self.config.boot_timeout_s)

    def _spawn_session_bus(self, box: Sandbox) -> bool:
        """Start the session's own D-Bus when dbus-daemon is installed; `_wait_session_bus` waits."""
        proc = spawn_session_bus(box, self._log_dir / "dbus.log")
        self._bus = None if proc is None else SESSION_BUS  # apps started from now on find it once it listens
        if proc is not None:
            self._apps.append(proc)
        return proc is not None

    def _wait_session_bus(self, box: Sandbox, started: bool) -> None:
        if started and not wait_session_bus(box, self.config.boot_timeout_s, self._log_dir / "dbus.log"):
            self._bus = None

    def _spawn_in_box(
        self, argv: list[str], log_name: str = "openbox.log", pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen[bytes]:
        assert self._box is not None
        proc = self._box.spawn(argv, env=self.app_env(), log_path=self._log_dir / log_name, pass_fds=pass_fds)
        self._apps.append(proc)
        return proc

    def _offer_apps(self, apps: list[str]) -> None:
        """The desktop's right-click menu lists the task's apps (and nothing else)."""
        assert self._box is not None
        entries = [
            (name, app_spec(name, self.session_dir, self.config.width, self.config.height).argv)
            for name in apps
        ]
        write_menu(self._wm_dir, entries)
        self._box.run(["openbox", "--reconfigure"], limits=Limits(timeout_s=5.0), env=self.app_env())

    def _shutdown(self) -> None:
        self.frames_stop()
        if self._mcp is not None:
            self._mcp.close()
            self._mcp = None
        if self._grabber is not None:
            try:
                self._grabber.close()
            except Exception:
                pass
            self._grabber = None
        if self._settler is not None:
            self._settler.close()
            self._settler = None
        if self._vnc is not None:
            self._vnc.stop()
            self._vnc = None
        if self._box is not None:
            # Whatever the session started, however it started it, ends at once (and Xvfb, which
            # runs as the session's uid); stopping the apps one by one first costs seconds.
            self._box.close()
            self._box = None
        for proc in self._apps:
            stop(proc)  # reaps the host-side nsenter of each (already ended with the box)
        self._apps.clear()
        if self._x is not None:
            self._x.stop()
            self._x = None
        self._input = None
        self._task = None
        self._steps = 0
