"""`TerminalEnv`: a confined shell in the session directory, plus API and MCP tool calls (SPEC §3)."""

from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workers.actions.types import TERMINAL_KINDS, Action
from workers.envs.base import EnvError, EnvKind, ImageFormat, Observation, StepResult, TaskSpec
from workers.envs.desktop.capture import encode
from workers.envs.sandbox import CommandResult, Limits, Sandbox, SandboxPolicy, sandbox_available
from workers.envs.sandbox.home import disk_mb_of
from workers.envs.sandbox.run import SANDBOX_HOME
from workers.envs.terminal.api_actions import TERMINAL_API, ApiRegistry
from workers.envs.terminal.render import render_terminal

MAX_TRANSCRIPT_CHARS = 200_000
ENDING_KINDS = TERMINAL_KINDS - {"ask_user"}  # a shell has no user to ask: ask_user is refused
CLEAR_LINE_HOTKEYS = frozenset({("ctrl", "c"), ("ctrl", "u")})


@dataclass(frozen=True)
class TerminalConfig:
    """session_dir: the session's home (a temp dir deleted on close if None; while the box lives a
    tmpfs of `policy.disk_mb`, or of the task's `setup["disk_mb"]`, lies over it with a copy of what it
    held, and what the session writes there ends with the box); limits: per command;
    policy: the session sandbox's limits; width/height: size of the rendered screenshot;
    wait_s: how long `wait()` sleeps."""

    session_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    width: int = 1280
    height: int = 800
    image_format: ImageFormat = "jpeg"
    wait_s: float = 1.0


class TerminalEnv:
    """Commands are typed: `type` text accumulates on the prompt line and each newline (or an
    'enter' hotkey) runs the line in the session's sandbox (`workers.envs.sandbox`). The working
    directory carries over between commands; each command is a fresh shell, but what a command
    leaves running in the background lives on until the session closes."""

    kind: EnvKind = "terminal"

    def __init__(
        self,
        config: TerminalConfig | None = None,
        api: ApiRegistry = TERMINAL_API,
        sandbox: Sandbox | None = None,
    ) -> None:
        """With `sandbox` (a running desktop's, `DesktopEnv.sandbox`) the terminal works in that
        session: its home, files and processes; the desktop owns it and closes it."""
        if not sandbox_available():
            raise EnvError(
                "the terminal sandbox needs bwrap with user namespaces, run as root (with CAP_SYS_ADMIN)"
            )
        self.config = config or TerminalConfig()
        self._owns_dir = self.config.session_dir is None and sandbox is None
        if sandbox is not None:
            self.session_dir = sandbox.home
        else:
            self.session_dir = self.config.session_dir or Path(tempfile.mkdtemp(prefix="flywheel-terminal-"))
        self.session_dir.mkdir(parents=True, exist_ok=True)
        self._api = api
        self._owns_box = sandbox is None
        self._box = sandbox or Sandbox(self.session_dir, policy=self.config.policy)
        self._cwd = SANDBOX_HOME
        self._pending = ""
        self._transcript = ""
        self._task: TaskSpec | None = None
        self._closed = False
        self._mcp: Any = None
        self.last_action_kind: str | None = None  # OSWorld 'infeasible' is scored from it

    # the protocol ----------------------------------------------------------------------------

    def reset(self, task: TaskSpec, seed: int | None = None) -> Observation:
        if task.kind != "terminal":
            raise EnvError(f"TerminalEnv cannot run a {task.kind!r} task")
        self._check_open()
        policy = replace(self._box.policy, disk_mb=disk_mb_of(task.setup, self.config.policy.disk_mb))
        if self._owns_box and (self._task is not None or policy != self._box.policy):
            # A new task on a used session: nothing of the last one keeps running, and the home
            # starts empty when this env made it (a caller's directory is the caller's). A task
            # whose pool caps the home at another size gets a box of that size.
            self._box.close()
            if self._owns_dir and self._task is not None:
                shutil.rmtree(self.session_dir, ignore_errors=True)
                self.session_dir.mkdir(parents=True)
            self._box = Sandbox(self.session_dir, policy=policy)
        self._box.start()
        self._task = task
        self.last_action_kind = None
        self._cwd, self._pending, self._transcript = SANDBOX_HOME, "", ""
        if task.source == "osworld":
            from workers.envs import osworld

            osworld.run_setup(osworld.setup_steps(task), runner=self, bundle_dir=osworld.bundle_dir_of(task))
        return self.observe()

    def step(self, action: Action) -> StepResult:
        self._check_open()
        self.last_action_kind = action.kind
        info: dict[str, Any] = {"action": action.to_json()}
        try:
            done = self._execute(action, info)
        except EnvError as exc:
            info["error"] = str(exc)
            done = False
        if (notice := self._box.disk_notice()) is not None:
            info["disk_full"] = notice
        return StepResult(observation=self.observe(), done=done, info=info)

    def observe(self, image_format: ImageFormat | None = None) -> Observation:
        self._check_open()
        fmt = image_format or self.config.image_format
        screen = self._screen_text()
        t0 = time.perf_counter()
        image = render_terminal(screen, self.config.width, self.config.height)
        t1 = time.perf_counter()
        data = encode(image, fmt)
        t2 = time.perf_counter()
        return Observation(
            screenshot=data,
            width=self.config.width,
            height=self.config.height,
            image_format=fmt,
            instruction=self._task.instruction if self._task else "",
            terminal_output=screen,
            clock=time.monotonic(),
            timings_ms={"render": (t1 - t0) * 1000, "encode": (t2 - t1) * 1000},
        )

    def evaluate(self) -> float:
        """The task's verifier score: its OSWorld evaluator for source 'osworld'; 0.0 without one."""
        self._check_open()
        from workers.envs import osworld

        return osworld.task_score(self._task, runner=self)

    def close(self) -> None:
        if self._mcp is not None:
            self._mcp.close()
            self._mcp = None
        self._closed = True
        if self._owns_box:
            self._box.close()
        if self._owns_dir:
            shutil.rmtree(self.session_dir, ignore_errors=True)

    def is_alive(self) -> bool:
        return not self._closed

    # session services ------------------------------------------------------------------------

    @property
    def command_home(self) -> str:
        return SANDBOX_HOME

    def run_command(
        self,
        command: str | list[str],
        shell: bool = False,
        timeout_s: float | None = None,
        separate_stderr: bool = False,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run a command in the sandbox without touching the transcript (set-up, evaluators);
        `max_output` raises the bytes of output kept (a file read whole by an evaluator)."""
        self._check_open()
        self._box.start()
        text = command if isinstance(command, str) else shlex.join(command)
        limits = self.config.limits
        if timeout_s is not None:
            limits = replace(limits, timeout_s=timeout_s)
        if max_output is not None:
            limits = replace(limits, max_output=max_output)
        return self._box.run(text, limits=limits, separate_stderr=separate_stderr)

    def terminal_transcript(self) -> str:
        """Everything the terminal shows, its prompt and pending input included (OSWorld's
        vm_terminal_output reads a terminal's whole text)."""
        return self._screen_text()

    def spawn_command(self, command: str | list[str], shell: bool = False) -> None:
        """Start a background program in the session's sandbox (it ends when the session closes)."""
        self._check_open()
        self._box.start()
        argv = ["/bin/sh", "-c", command if isinstance(command, str) else shlex.join(command)]
        self._box.spawn(argv)

    def mcp_toolbox(self) -> Any:
        if self._mcp is None:
            from workers.envs.mcp_tools.client import McpToolbox

            self._mcp = McpToolbox(self.session_dir)
        return self._mcp

    # internals -------------------------------------------------------------------------------

    def _execute(self, action: Action, info: dict[str, Any]) -> bool:
        kind = action.kind
        if kind == "type":
            if action.text is None:
                raise EnvError("type needs text")
            self._type(action.text, info)
        elif kind == "hotkey":
            self._hotkey(action.keys or (), info)
        elif kind == "api_call":
            info["api"] = {"name": action.name, "arguments": action.arguments or {}}
            info["api"]["result"] = self._api.call(self.session_dir, action.name, action.arguments)
        elif kind == "mcp_call":
            info["mcp"] = self.mcp_toolbox().call_action(action)
        elif kind == "wait":
            time.sleep(self.config.wait_s)
        elif kind in ENDING_KINDS:
            if action.text is not None:
                info["answer"] = action.text
            return True
        else:
            raise EnvError(f"action {kind!r} is not supported on the terminal")
        return False

    def _type(self, text: str, info: dict[str, Any]) -> None:
        *complete, rest = (self._pending + text.replace("\r\n", "\n")).split("\n")
        self._pending = rest
        info["commands"] = [self._run_line(line) for line in complete]

    def _hotkey(self, keys: tuple[str, ...], info: dict[str, Any]) -> None:
        parts = tuple(p.lower() for k in keys for p in k.replace("+", " ").split())
        if parts in {("enter",), ("return",)}:
            self._type("\n", info)
        elif parts in CLEAR_LINE_HOTKEYS:
            self._append(f"{self._prompt()}{self._pending}^C\n")
            self._pending = ""
        else:
            raise EnvError(f"hotkey {' '.join(parts)!r} has no meaning in the terminal")

    def _run_line(self, line: str) -> dict[str, Any]:
        self._append(f"{self._prompt()}{line}\n")
        if not line.strip():
            return {"command": line, "returncode": 0}
        self._box.start()
        result = self._box.run(line, cwd=self._cwd, limits=self.config.limits, report_cwd=True)
        self._cwd = result.cwd
        self._append(result.output + ("" if result.output.endswith("\n") or not result.output else "\n"))
        if result.timed_out:
            self._append(f"[timed out after {self.config.limits.timeout_s:g}s]\n")
        if result.truncated:
            self._append(f"[output truncated at {self.config.limits.max_output} bytes]\n")
        return {
            "command": line,
            "returncode": result.returncode,
            "timed_out": result.timed_out,
            "truncated": result.truncated,
            "duration_s": round(result.duration_s, 4),
        }

    def _prompt(self) -> str:
        return f"session:{self._cwd.replace(SANDBOX_HOME, '~', 1)}$ "

    def _screen_text(self) -> str:
        return self._transcript + self._prompt() + self._pending

    def _append(self, text: str) -> None:
        self._transcript = (self._transcript + text)[-MAX_TRANSCRIPT_CHARS:]

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError("terminal session is closed")
