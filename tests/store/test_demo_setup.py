"""`manage.py demo_setup`: users per role, two demo pools, assignments; idempotent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from annotation.models import Assignment
from demo.setup import DEMO_MINIWOB_TASKS, osworld_examples_dir
from webapp.accounts.roles import Role, user_roles
from webapp.store.models import Task, TaskPool

pytestmark = pytest.mark.django_db


def _run() -> str:
    out = StringIO()
    call_command("demo_setup", stdout=out)
    return out.getvalue()


def test_demo_setup_creates_everything_and_is_idempotent() -> None:
    first = _run()
    osworld_count = len(list(osworld_examples_dir().rglob("*.json")))
    assert "pool demo-miniwob: 8 created, 0 updated" in first
    assert f"pool demo-osworld: {osworld_count} created, 0 updated" in first
    for username in ("annotator", "reviewer", "reviewer2", "researcher", "admin"):
        assert f"{username:<12} password {username:<12}" in first

    expected_roles = {"annotator": Role.ANNOTATOR, "reviewer": Role.REVIEWER, "reviewer2": Role.REVIEWER,
                      "researcher": Role.RESEARCHER, "admin": Role.ADMIN}  # fmt: skip
    for username, role in expected_roles.items():
        user = authenticate(username=username, password=username)
        assert user is not None, username
        assert user_roles(user) == {role}
    assert authenticate(username="admin", password="admin").is_staff

    miniwob = set(Task.objects.filter(pool__name="demo-miniwob").values_list("external_id", flat=True))
    assert miniwob == set(DEMO_MINIWOB_TASKS)
    assert (
        Task.objects.filter(pool__name="demo-osworld", source="osworld", env_kind="desktop").count()
        == osworld_count
    )
    enabled_demo = Task.objects.filter(pool__name__in=["demo-miniwob", "demo-osworld"], enabled=True)
    assert enabled_demo.count() >= 8
    assigned = set(Assignment.objects.filter(user__username="annotator").values_list("task_id", flat=True))
    assert assigned == set(enabled_demo.values_list("pk", flat=True))

    counts = (TaskPool.objects.count(), Task.objects.count(), Assignment.objects.count())
    second = _run()
    assert "pool demo-miniwob: 0 created, 8 updated" in second
    assert f"pool demo-osworld: 0 created, {osworld_count} updated" in second
    assert "(0 new)" in second
    assert (TaskPool.objects.count(), Task.objects.count(), Assignment.objects.count()) == counts


def test_bundled_osworld_fixtures_import_as_supported_shell_tasks() -> None:
    from demo.setup import FALLBACK_OSWORLD_DIR
    from webapp.store.importers import task_import_run

    result = task_import_run(
        pool_name="fixtures", create_pool=True, paths=[FALLBACK_OSWORLD_DIR], fmt="osworld"
    )
    assert result.created == 2
    tasks = Task.objects.filter(pool__name="fixtures")
    assert all(t.supported and t.enabled for t in tasks), [t.unsupported_reasons for t in tasks]
    assert {t.verifier["osworld"]["result"]["type"] for t in tasks} == {"vm_command_line"}
