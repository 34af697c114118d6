"""Each role signs in through the real login form in Chromium and sees its own navigation and home.

Needs the built frontend (`npm --prefix frontend run build`, which `make test-e2e` runs first).
Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS or a fresh temp dir (printed at the end of the run).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.db import connection
from playwright.sync_api import Browser, Page, expect

from annotation.models import AsrSettings, Assignment
from tests.conftest import PASSWORD
from tests.factories import StepFactory, TaskFactory, TaskPoolFactory, TrajectoryFactory
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.e2e

NAV = {
    "annotator": ["Home", "Workspace"],
    "reviewer": ["Home", "Review"],
    "researcher": ["Home", "Runs", "Task pools", "Flywheel", "Fleet"],
    "admin": ["Home", "Workspace", "Review", "Runs", "Task pools", "Flywheel", "Fleet"],
}
USERNAMES = {"annotator": "ann", "reviewer": "rev", "researcher": "res", "admin": "adm"}


@pytest.fixture
def world(users) -> dict[str, object]:
    """A pool with tasks, an assignment, trajectories in every state the homes show, a checkpoint."""
    pool = TaskPoolFactory(name="miniwob-core", description="MiniWoB++ click and type tasks")
    tasks = [
        TaskFactory(pool=pool, external_id="click-button", instruction="Click the OK button",
                    attempts=20, successes=15, success_rate=0.75),
        TaskFactory(pool=pool, external_id="enter-text", instruction="Type the name and submit",
                    attempts=10, successes=2, success_rate=0.2),
    ]  # fmt: skip
    Assignment.objects.create(user=users["annotator"], task=tasks[0])
    mine = TrajectoryFactory(
        task=tasks[0], annotator=users["annotator"], source="annotation", status="completed"
    )
    StepFactory(trajectory=mine, index=0)
    queued = TrajectoryFactory(task=tasks[1], source="annotation", status="completed", review_state="pending")
    StepFactory(trajectory=queued, index=0)
    TrajectoryFactory(task=tasks[1], source="rl", status="completed", final_reward=1.0, validation=1)
    Checkpoint.objects.create(version="sft-0001", path="checkpoints/sft-0001")
    return {"pool": pool, "tasks": tasks}


def _sign_in(browser: Browser, base: str, role: str, shots: Path) -> Page:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{base}/")
    expect(page).to_have_url(f"{base}/login/?next=/")
    if role == "annotator":
        page.screenshot(path=str(shots / "login.png"))
    page.get_by_label("Username").fill(USERNAMES[role])
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/")
    expect(page.locator("html")).to_have_attribute("data-bundle", "ready")
    return page


@pytest.mark.parametrize("role", list(NAV))
def test_role_signs_in_and_sees_its_nav_and_home(browser, live_server, world, shots, role: str) -> None:
    page = _sign_in(browser, live_server.url, role, shots)
    expect(page.get_by_test_id("username")).to_have_text(USERNAMES[role])
    expect(page.get_by_test_id("nav").get_by_role("link")).to_have_text(NAV[role])
    expect(page.get_by_test_id("tools").get_by_role("link", name="API docs")).to_be_visible()

    section = page.get_by_test_id(f"home-{role}")
    expect(section).to_be_visible()
    if role == "annotator":
        expect(section.get_by_role("link", name="Start annotating")).to_have_attribute("href", "/workspace/")
        expect(section.locator("table").first).to_contain_text("click-button")  # the assigned task
        expect(section).not_to_contain_text("enter-text")  # not assigned to them
        expect(section.locator("table").nth(1)).to_contain_text("Click the OK button")  # their trajectory
    elif role == "reviewer":
        expect(section.locator("table")).to_contain_text("enter-text")
        expect(section.locator("table")).to_contain_text("pending")
    elif role == "researcher":
        expect(section.get_by_role("link", name="Open runs")).to_have_attribute("href", "/runs/")
        expect(section.locator("table").first.locator("tbody tr")).to_have_count(3)
    else:
        expect(section.locator("table").first).to_contain_text("miniwob-core")
        expect(page.get_by_test_id("users")).to_contain_text("ann")
        expect(page.get_by_test_id("tools").get_by_role("link", name="Django admin")).to_be_visible()
    page.screenshot(path=str(shots / f"home-{role}.png"), full_page=True)
    assert page.errors == [], page.errors  # type: ignore[attr-defined]

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live_server.url}/login/")
    page.close()


def test_annotator_is_refused_researcher_pages(browser, live_server, world, shots) -> None:
    page = _sign_in(browser, live_server.url, "annotator", shots)
    response = page.goto(f"{live_server.url}/runs/")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", name="You don't have access to this page")).to_be_visible()
    expect(page.locator("main")).to_contain_text("Runs is open to: admin, researcher.")
    page.screenshot(path=str(shots / "forbidden-annotator-runs.png"), full_page=True)
    page.close()


def test_pools_page_lists_tasks_with_success_rates(browser, live_server, world, shots) -> None:
    page = _sign_in(browser, live_server.url, "researcher", shots)
    page.get_by_test_id("nav").get_by_role("link", name="Task pools").click()
    browser_section = page.get_by_test_id("pool-browser")
    expect(browser_section.get_by_role("link", name="miniwob-core")).to_have_class("active")
    rows = browser_section.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="click-button")).to_contain_text("75 %")
    expect(rows.filter(has_text="enter-text")).to_contain_text("20 %")
    page.screenshot(path=str(shots / "pools-researcher.png"), full_page=True)
    page.goto(f"{live_server.url}/runs/")  # the runs page lists runs and checkpoints
    expect(page.locator("main")).to_contain_text("sft-0001")
    page.screenshot(path=str(shots / "runs-researcher.png"), full_page=True)
    page.goto(f"{live_server.url}/flywheel/")  # its own e2e test is tests/flywheel/test_page_e2e.py
    expect(page.get_by_role("heading", name="V(s) = 1 rate per iteration")).to_be_visible()
    page.screenshot(path=str(shots / "flywheel-researcher.png"), full_page=True)
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()


def test_researcher_exports_and_gets_a_download_link(browser, live_server, world, shots, monkeypatch) -> None:
    from webapp.store.tasks import export_job_execute

    def run_soon(job_id: int) -> None:
        # No Celery worker in this test: build the archive in a thread, as a worker would, a moment later.
        def work() -> None:
            try:
                export_job_execute(job_id)
            finally:
                connection.close()

        threading.Timer(0.3, work).start()

    monkeypatch.setattr(export_job_execute, "delay", run_soon)
    page = _sign_in(browser, live_server.url, "researcher", shots)
    panel = page.get_by_test_id("export")
    expect(panel).to_contain_text("No exports yet")
    panel.get_by_label("Format").select_option("sharegpt")
    panel.get_by_role("button", name="Start export").click()
    job = panel.locator(".job").first
    expect(job).to_contain_text("sharegpt")
    # The test server speaks no websocket, so the panel falls back to polling the job.
    expect(job).to_have_attribute("data-status", "succeeded", timeout=15_000)
    job_id = job.get_attribute("data-job-id")
    expect(job.get_by_role("link", name="Download")).to_have_attribute(
        "href", f"{live_server.url}/api/export-jobs/{job_id}/download/"
    )
    expect(job).to_contain_text("3 / 3 trajectories")
    page.screenshot(path=str(shots / "export-researcher.png"), full_page=True)
    page.close()


def test_admin_chooses_the_think_aloud_model_on_home(browser, live_server, world, shots, users) -> None:
    """The admin's home lists the Whisper models with their measured cost and switches the one in
    use through PUT /api/annotation/thinkaloud/asr/ (a choice of base, made where it was installed,
    is switched back to tiny.en; base's row says whether this machine has it)."""
    AsrSettings.objects.create(pk=1, model="base", updated_by=users["admin"])
    page = _sign_in(browser, live_server.url, "admin", shots)
    card = page.get_by_test_id("asr-model")
    expect(card.get_by_role("heading", name="Think-aloud speech model")).to_be_visible()
    expect(card.get_by_test_id("asr-in-use")).to_contain_text("In use: base (chosen by an admin")
    expect(card.locator("tbody tr")).to_have_count(2)
    expect(card.get_by_test_id("asr-state-base")).to_have_text("in use")
    card.get_by_test_id("asr-choose-tiny.en").click()
    expect(card.get_by_test_id("asr-saved")).to_contain_text("tiny.en transcribes think-aloud")
    expect(card.get_by_test_id("asr-in-use")).to_contain_text("In use: tiny.en (chosen by an admin")
    expect(card.get_by_test_id("asr-state-tiny.en")).to_have_text("in use")
    assert AsrSettings.objects.get(pk=1).model == "tiny.en"
    page.screenshot(path=str(shots / "home-admin-asr-model.png"), full_page=True)
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()
