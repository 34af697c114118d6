"""OSWorld task JSON (SPEC §5): parse, say what is unsupported, run set-up, evaluate.

Vocabulary (docs/osworld.md): metrics and most getters are OSWorld's own, from the pinned
`desktop-env` package (`workers.envs.osworld.vocab`), run against the session through an adapter;
the getters that talk to OSWorld's VM over HTTP (`vm_command_line`, `vm_command_error`,
`vlc_playing_info`) and `cloud_file` are the platform's: commands run in the session's sandbox
and files come from the task's bundle or the local mirror. `regex_match` is the platform's own
extra metric. Set-up / postconfig steps: `execute` / `command` (pyautogui scripts too, run by the
sandbox's Python against the session's display when `make osworld-apps` installed pyautogui),
`launch`, `sleep`, `open`, `download`, `activate_window`, `close_window`.

A task is supported only if every step, getter and metric it uses is (`check_supported`): a
program it starts must be installed (`make osworld-apps DOMAINS=...`), a URL it downloads must have
a local copy, a metric's Python dependencies must be installed.

OSWorld tasks assume the user `user` with home /home/user; the sandbox has /home/user (the session's
home), and `echo password | sudo -S` / `sudo` are dropped (there is no sudo in a session's sandbox).

Task code never runs on the host: every command (set-up, `launch`, postconfig, result getters)
runs in the session's sandbox through the runner (`workers.envs.sandbox`). A `download` / `open`
of a local file reads only from the task's own bundle directory (`setup['bundle_dir']`, set by
whoever stored the task's files); a `file://` path anywhere else — /etc/shadow, the project tree,
another task's files, a symlink out — is refused with the reason. A web URL is served from the
bundle (`<bundle>/<host>/<path>` or `<bundle>/<file name>`) or the admin's mirror
(`OSWORLD_MIRROR_DIR/<host>/<path>`, the layout `wget -x` writes); with no local copy it is refused
with that reason (sessions have no network).

Modules: `support` (what a task needs and whether it runs here), `setup` (set-up steps),
`evaluate` (getters and metrics), `files` (bundle and mirror), `commands` (the VM's commands on a
session), `vocab` (desktop-env's getters and metrics), `check` (the no-action check), `solutions`
(our own tasks' scripted solutions), `vm` (the seam for real VMs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import (
    INFEASIBLE,
    OSWORLD_HOME,
    CommandRunner,
    OSWorldError,
)
from workers.envs.osworld.evaluate import (
    EvalReport,
    MetricOutcome,
    evaluate,
    evaluate_report,
    regex_match,
    task_score,
)
from workers.envs.osworld.files import local_copy, mirror_dir, pyautogui_dir
from workers.envs.osworld.setup import run_setup
from workers.envs.osworld.support import (
    bundle_dir_of,
    check_supported,
    evaluator_of,
    setup_steps,
    task_spec_from_json,
)

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "osworld_examples"

__all__ = [
    "INFEASIBLE",
    "OSWORLD_HOME",
    "CommandRunner",
    "EvalReport",
    "MetricOutcome",
    "OSWorldError",
    "bundle_dir_of",
    "check_supported",
    "evaluate",
    "evaluate_report",
    "evaluator_of",
    "load_examples",
    "local_copy",
    "mirror_dir",
    "pyautogui_dir",
    "regex_match",
    "run_setup",
    "setup_steps",
    "task_score",
    "task_spec_from_json",
]


def load_examples() -> list[dict[str, Any]]:
    """The bundled example `os` tasks (workers/envs/osworld_examples/*.json)."""
    return [json.loads(p.read_text()) for p in sorted(EXAMPLES_DIR.glob("*.json"))]
