"""Demo data: one user per role, a MiniWoB++ pool and an OSWorld pool, tasks assigned to the annotator.

Idempotent: running it again resets the demo passwords and roles, updates the demo tasks in place
and adds only missing assignments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotation.models import Assignment
from webapp.accounts.roles import Role
from webapp.accounts.services import user_create
from webapp.store.importers.services import task_import_run
from webapp.store.importers.types import ImportResult
from webapp.store.models import Task

# (username, password, roles). Demo only: these passwords are printed and must never reach production.
DEMO_USERS: list[tuple[str, str, list[Role]]] = [
    ("annotator", "annotator", [Role.ANNOTATOR]),
    ("reviewer", "reviewer", [Role.REVIEWER]),
    ("reviewer2", "reviewer2", [Role.REVIEWER]),
    ("researcher", "researcher", [Role.RESEARCHER]),
    ("admin", "admin", [Role.ADMIN]),
]
DEMO_MINIWOB_POOL = "demo-miniwob"
DEMO_MINIWOB_TASKS = [
    "click-test", "click-button", "click-link", "focus-text", "enter-text", "click-dialog", "click-tab",
    "click-checkboxes",
]  # fmt: skip
DEMO_OSWORLD_POOL = "demo-osworld"
# The OSWorld environment ships its examples here; our own two shell-checked tasks are the fallback.
OSWORLD_EXAMPLES_DIR = Path(settings.BASE_DIR) / "workers" / "envs" / "osworld_examples"
FALLBACK_OSWORLD_DIR = Path(__file__).resolve().parent / "fixtures" / "osworld"


@dataclass
class DemoSummary:
    logins: list[tuple[str, str, str]] = field(default_factory=list)  # username, password, roles
    pools: dict[str, ImportResult] = field(default_factory=dict)
    osworld_dir: Path | None = None
    assigned_new: int = 0
    assigned_total: int = 0


def osworld_examples_dir() -> Path:
    """The environment's example folder when it holds task files, else the bundled fixtures."""
    if OSWORLD_EXAMPLES_DIR.is_dir() and any(OSWORLD_EXAMPLES_DIR.rglob("*.json")):
        return OSWORLD_EXAMPLES_DIR
    return FALLBACK_OSWORLD_DIR


@transaction.atomic
def demo_setup() -> DemoSummary:
    """Create (or refresh) the demo users, pools, tasks and the annotator's assignments."""
    summary = DemoSummary()
    users = {}
    for username, password, roles in DEMO_USERS:
        users[username] = user_create(username=username, password=password, roles=roles)
        summary.logins.append((username, password, ", ".join(r.value for r in roles)))

    summary.pools[DEMO_MINIWOB_POOL] = task_import_run(
        pool_name=DEMO_MINIWOB_POOL, create_pool=True, miniwob=DEMO_MINIWOB_TASKS
    )
    summary.osworld_dir = osworld_examples_dir()
    summary.pools[DEMO_OSWORLD_POOL] = task_import_run(
        pool_name=DEMO_OSWORLD_POOL, create_pool=True, paths=[summary.osworld_dir], fmt="osworld"
    )

    annotator = users["annotator"]
    tasks = Task.objects.filter(pool__name__in=[DEMO_MINIWOB_POOL, DEMO_OSWORLD_POOL], enabled=True)
    for task in tasks:
        _, created = Assignment.objects.get_or_create(user=annotator, task=task)
        summary.assigned_new += int(created)
    summary.assigned_total = Assignment.objects.filter(user=annotator, task__in=tasks).count()
    return summary
