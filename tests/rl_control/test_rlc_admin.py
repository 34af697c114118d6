"""Django admin pages of runs, metrics and alerts."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from rl_control import services
from rl_control.models import RunAlert, RunMetric

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(make_run):
    run = make_run(name="admin-run")
    services.metrics_record(run=run, step=1, policy_version=1, samples=8, values={"policy/entropy": 0.001})
    return {"run": run, "runmetric": RunMetric.objects.get(), "runalert": RunAlert.objects.get()}


@pytest.mark.parametrize("model", ["run", "runmetric", "runalert"])
def test_admin_pages_load_for_the_admin_role(users, rows, model: str) -> None:
    client = Client()
    client.force_login(users["admin"])
    changelist = client.get(reverse(f"admin:rl_control_{model}_changelist"))
    assert changelist.status_code == 200
    assert str(rows[model].pk) in changelist.content.decode()
    change = client.get(reverse(f"admin:rl_control_{model}_change", args=[rows[model].pk]))
    assert change.status_code == 200


@pytest.mark.parametrize("role", ["researcher", "annotator"])
def test_admin_is_for_staff_only(users, rows, role: str) -> None:
    client = Client()
    client.force_login(users[role])
    response = client.get(reverse("admin:rl_control_run_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_run_filters_in_admin(users, make_run, rows) -> None:
    services.run_launch(run=make_run(name="launched-one"))
    client = Client()
    client.force_login(users["admin"])
    body = client.get(reverse("admin:rl_control_run_changelist") + "?status__exact=running").content.decode()
    assert "launched-one" in body and "admin-run" not in body
