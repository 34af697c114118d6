"""Django admin: every store changelist loads for the admin role, filters, search and bulk actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client, RequestFactory
from django.urls import reverse

from tests.factories import StepFactory, TaskFactory, TaskPoolFactory, TrajectoryFactory
from webapp.store.models import Checkpoint, ExportJob, Task

pytestmark = pytest.mark.django_db

CHANGELISTS = ["taskpool", "task", "trajectory", "step", "checkpoint", "exportjob"]


@pytest.fixture
def admin_client(users: dict[str, Any]) -> Client:
    """Logged in as the admin *role* (staff with group permissions, not a superuser)."""
    client = Client()
    client.force_login(users["admin"])
    return client


@pytest.fixture
def store_rows(users: dict[str, Any]) -> dict[str, Any]:
    pool = TaskPoolFactory(name="admin-pool")
    easy = TaskFactory(pool=pool, external_id="easy-one", difficulty=0.1, tags=["starter"])
    hard = TaskFactory(
        pool=pool, external_id="hard-one", difficulty=0.9, supported=False, enabled=False,
        unsupported_reasons=["config[0]: setup step type 'chrome_open_tabs' is not supported locally"],
    )  # fmt: skip
    trajectory = TrajectoryFactory(task=easy, annotator=users["annotator"], source="annotation")
    shot = default_storage.save("screenshots/admin-test/step0.png", ContentFile(b"\x89PNG\r\n\x1a\nfake"))
    step = StepFactory(trajectory=trajectory, index=0, screenshot=shot)
    checkpoint = Checkpoint.objects.create(version="ckpt-admin-1", path="checkpoints/ckpt-admin-1")
    job = ExportJob.objects.create(created_by=users["admin"], format="jsonl", status="succeeded", progress=100.0,
                                   archive="exports/export-1-jsonl.zip")  # fmt: skip
    return {"pool": pool, "easy": easy, "hard": hard, "trajectory": trajectory, "step": step,
            "checkpoint": checkpoint, "job": job, "shot": shot}  # fmt: skip


@pytest.mark.parametrize("model", CHANGELISTS)
def test_changelist_loads_for_admin_role(
    admin_client: Client, store_rows: dict[str, Any], model: str
) -> None:
    response = admin_client.get(reverse(f"admin:store_{model}_changelist"))
    assert response.status_code == 200


@pytest.mark.parametrize("role", ["annotator", "reviewer", "nobody"])
def test_admin_site_refuses_non_staff_roles(
    users: dict[str, Any], store_rows: dict[str, Any], role: str
) -> None:
    client = Client()
    client.force_login(users[role])
    response = client.get(reverse("admin:store_task_changelist"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_change_pages_load(admin_client: Client, store_rows: dict[str, Any]) -> None:
    pages = {
        "taskpool": store_rows["pool"].pk, "task": store_rows["hard"].pk, "trajectory": store_rows["trajectory"].pk,
        "step": store_rows["step"].pk, "checkpoint": store_rows["checkpoint"].pk, "exportjob": store_rows["job"].pk,
    }  # fmt: skip
    for model, pk in pages.items():
        response = admin_client.get(reverse(f"admin:store_{model}_change", args=[pk]))
        assert response.status_code == 200, model


def test_trajectory_page_shows_steps_with_thumbnails(
    admin_client: Client, store_rows: dict[str, Any]
) -> None:
    response = admin_client.get(reverse("admin:store_trajectory_change", args=[store_rows["trajectory"].pk]))
    html = response.content.decode()
    assert f'src="/media/{store_rows["shot"]}"' in html
    assert "I should click the submit button." in html


def test_pool_list_shows_task_counts(admin_client: Client, store_rows: dict[str, Any]) -> None:
    html = admin_client.get(reverse("admin:store_taskpool_changelist")).content.decode()
    assert '<td class="field-task_count">2</td>' in html
    assert '<td class="field-enabled_count">1</td>' in html
    assert '<td class="field-unsupported_count">1</td>' in html


def test_task_list_flags_unsupported_with_reason(admin_client: Client, store_rows: dict[str, Any]) -> None:
    html = admin_client.get(reverse("admin:store_task_changelist")).content.decode()
    assert "UNSUPPORTED" in html
    assert "chrome_open_tabs" in html


@pytest.mark.parametrize(("query", "shown", "hidden"), [
    ({"difficulty_bucket": "hard"}, "hard-one", "easy-one"),
    ({"difficulty_bucket": "easy"}, "easy-one", "hard-one"),
    ({"supported__exact": "0"}, "hard-one", "easy-one"),
    ({"q": "starter"}, "easy-one", "hard-one"),
    ({"q": "hard-one"}, "hard-one", "easy-one"),
])  # fmt: skip
def test_task_filters_and_search(
    admin_client: Client, store_rows: dict[str, Any], query: dict[str, str], shown: str, hidden: str
) -> None:
    html = admin_client.get(reverse("admin:store_task_changelist"), query).content.decode()
    assert shown in html
    assert hidden not in html


def test_trajectory_filters(admin_client: Client, store_rows: dict[str, Any]) -> None:
    url = reverse("admin:store_trajectory_changelist")
    for query in ({"source__exact": "annotation"}, {"status__exact": "running"}, {"route__exact": "none"},
                  {"review_state__exact": "none"}, {"env_kind__exact": "browser"}, {"validation__isnull": "True"}):  # fmt: skip
        response = admin_client.get(url, query)
        assert response.status_code == 200
        assert "easy-one" in response.content.decode(), query
    assert "easy-one" not in admin_client.get(url, {"source__exact": "rl"}).content.decode()


def _action(client: Client, action: str, tasks: list[Task]) -> Any:
    return client.post(
        reverse("admin:store_task_changelist"),
        {"action": action, "_selected_action": [t.pk for t in tasks]},
        follow=True,
    )


def test_bulk_disable_and_enable_keep_unsupported_disabled(
    admin_client: Client, store_rows: dict[str, Any]
) -> None:
    easy, hard = store_rows["easy"], store_rows["hard"]
    _action(admin_client, "disable_tasks", [easy])
    easy.refresh_from_db()
    assert easy.enabled is False
    response = _action(admin_client, "enable_tasks", [easy, hard])
    easy.refresh_from_db()
    hard.refresh_from_db()
    assert easy.enabled is True
    assert hard.enabled is False
    assert "1 unsupported task(s) left disabled" in response.content.decode()


def test_bulk_rescore(admin_client: Client, store_rows: dict[str, Any]) -> None:
    easy = store_rows["easy"]
    Task.objects.filter(pk=easy.pk).update(difficulty_steps=30, difficulty_cross_page=True, difficulty=0.0)
    _action(admin_client, "rescore_difficulty", [easy])
    easy.refresh_from_db()
    assert easy.difficulty == pytest.approx(0.6)


def test_bulk_export_creates_export_jobs(
    admin_client: Client, users: dict[str, Any], store_rows: dict[str, Any]
) -> None:
    before = set(ExportJob.objects.values_list("pk", flat=True))
    response = _action(admin_client, "export_selection", [store_rows["easy"], store_rows["hard"]])
    jobs = ExportJob.objects.exclude(pk__in=before)
    assert jobs.exists()
    assert all(j.format == "jsonl" and j.created_by == users["admin"] and j.status == "queued" for j in jobs)
    selected = {store_rows["easy"].pk, store_rows["hard"].pk}
    if len(jobs) == 1:  # the filter takes a list of task ids
        assert {int(x) for x in jobs[0].filters["tasks"].split(",")} == selected
    else:
        assert {j.filters["task"] for j in jobs} == selected
    assert "export job(s) queued" in response.content.decode()


def test_export_job_is_read_only_with_download_link(
    admin_client: Client, users: dict[str, Any], store_rows: dict[str, Any]
) -> None:
    job = store_rows["job"]
    html = admin_client.get(reverse("admin:store_exportjob_changelist")).content.decode()
    assert f'href="/api/export-jobs/{job.pk}/download/"' in html
    page = admin_client.get(reverse("admin:store_exportjob_change", args=[job.pk])).content.decode()
    assert 'name="_save"' not in page
    request = RequestFactory().get("/")
    request.user = users["admin"]
    model_admin = admin.site._registry[ExportJob]
    assert model_admin.has_view_permission(request, job)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, job)
    assert admin_client.get(reverse("admin:store_exportjob_add")).status_code == 403
    admin_client.post(reverse("admin:store_exportjob_change", args=[job.pk]), {"status": "failed"})
    job.refresh_from_db()
    assert job.status == "succeeded"


def test_user_admin_shows_roles_and_filters_by_role(admin_client: Client, users: dict[str, Any]) -> None:
    url = reverse("admin:auth_user_changelist")
    html = admin_client.get(url).content.decode()
    assert '<td class="field-roles">reviewer</td>' in html
    reviewers = admin_client.get(url, {"role": "reviewer"}).content.decode()
    assert ">rev</a>" in reviewers
    assert ">ann</a>" not in reviewers
    nobody = admin_client.get(url, {"role": "none"}).content.decode()
    assert ">nobody</a>" in nobody
    assert ">rev</a>" not in nobody


def test_editing_a_task_rescores_it_and_keeps_unsupported_disabled(
    admin_client: Client, store_rows: dict[str, Any]
) -> None:
    for key, enabled in (("easy", True), ("hard", False)):
        task = store_rows[key]
        form = {
            "pool": task.pool_id, "external_id": task.external_id, "instruction": "Edited in admin",
            "env_kind": "browser", "source": "miniwob", "tags": "x,y", "enabled": "on", "importance": "2",
            "difficulty_steps": "15", "difficulty_cross_page": "on", "difficulty_prerequisites": "0",
            "setup": "{}", "verifier": "{}",
        }  # fmt: skip
        response = admin_client.post(reverse("admin:store_task_change", args=[task.pk]), form)
        assert response.status_code == 302, response.content.decode()[:2000]
        task.refresh_from_db()
        assert task.instruction == "Edited in admin"
        assert task.tags == ["x", "y"]
        assert task.difficulty == pytest.approx(0.4)
        assert task.enabled is enabled, "an unsupported task stays disabled even when ticked"
