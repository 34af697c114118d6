"""`Task` row → the `TaskSpec` an environment runs (as its JSON wire form).

Importers keep each source's original config (e.g. OSWorld's `config` list under setup["osworld"]);
environments read a flat shape (setup["config"], verifier["func"], setup["task"]). This is the one
place that maps the first onto the second.
"""

from __future__ import annotations

import logging
from typing import Any

from webapp.store.models import Task

log = logging.getLogger(__name__)

# A person needs longer than a policy for one MiniWoB++ episode.
HUMAN_MINIWOB_EPISODE_MS = 15 * 60 * 1000


def task_step_budget(task: Task) -> int | None:
    """The task's own step budget, `setup["max_steps"]` (a positive int), or None when it has none.

    Runs cap every episode of the task at min(this, the run's step cap); a value that is not a
    positive int is ignored (logged), so one badly edited task cannot stop a run."""
    value = (task.setup or {}).get("max_steps")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        log.warning("task %s: setup.max_steps %r is not a positive int; ignored", task.pk, value)
        return None
    return value


def task_spec_wire(task: Task, *, for_human: bool = False) -> dict[str, Any]:
    setup: dict[str, Any] = dict(task.setup or {})
    verifier: dict[str, Any] = dict(task.verifier or {})
    if task.source == "osworld":
        config = setup.pop("osworld", setup.get("config", []))
        setup["config"] = config if isinstance(config, list) else []
        verifier = dict(verifier.get("osworld", verifier))
    elif task.source == "miniwob":
        setup.setdefault("task", (setup.get("miniwob") or {}).get("task") or task.external_id)
        if for_human:
            setup.setdefault("episode_max_time_ms", HUMAN_MINIWOB_EPISODE_MS)
    setup["disk_mb"] = task.pool.disk_mb  # the session's home cap is the pool's, whatever the task says
    return {
        "task_id": task.external_id,
        "instruction": task.instruction,
        "kind": task.env_kind,
        "source": task.source,
        "setup": setup,
        "verifier": verifier,
    }
