"""The flywheel page in Chromium against a live ASGI server: the cycle at a glance, charts, then an
admin builds the next dataset and promotes a checkpoint from the browser. Needs the built frontend."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.conftest import PASSWORD
from tests.e2e.conftest import asgi_server, browser, shots  # noqa: F401  (fixtures)
from tests.flywheel.conftest import make_trajectory
from webapp.flywheel.services.datasets import dataset_build
from webapp.flywheel.services.promotion import checkpoint_promote
from webapp.flywheel.services.refresh import pool_refresh
from webapp.flywheel.services.validation import validate_pending
from webapp.store.checkpoints import checkpoint_create_initial
from webapp.store.models import Checkpoint, Trajectory

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_flywheel_page(browser: Browser, asgi_server: str, shots: Path, users, tasks, pool) -> None:  # noqa: F811
    init = checkpoint_create_initial(version="e2e-init")
    sft = Checkpoint.objects.create(
        version="e2e-sft-1",
        parent=init,
        path=init.path,
        metrics={"sft": {"dataset": 1, "examples": 40, "steps": 100, "loss_first": 3.2, "loss_last": 0.4}},
    )
    for checkpoint, rewards in ((init, [0, 0, 0, 1, 0, 0]), (sft, [1, 1, 0, 1, 1, 0])):
        for i, reward in enumerate(rewards):
            t = make_trajectory(tasks[i % 3], reward=reward, steps=1)
            Trajectory.objects.filter(pk=t.pk).update(checkpoint=checkpoint)
        validate_pending()
        dataset_build(name=f"after {checkpoint.version}")
        pool_refresh(pool=pool)
    checkpoint_promote(checkpoint=sft, targets=["annotation"])

    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{asgi_server}/login/?next=/flywheel/")
    page.get_by_label("Username").fill(users["admin"].username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("fw-annotation-model")).to_have_text("e2e-sft-1")
    expect(page.get_by_test_id("fw-v1-chart").locator("svg rect")).to_have_count(2)
    expect(page.get_by_test_id("fw-growth-chart").locator("svg rect")).to_have_count(4)
    expect(page.get_by_test_id("fw-difficulty").locator("table tbody tr")).to_have_count(2)
    expect(page.get_by_test_id("fw-datasets").locator("tbody tr")).to_have_count(2)
    page.screenshot(path=str(shots / "flywheel.png"), full_page=True)

    make_trajectory(tasks[0], reward=1.0, steps=1)
    page.locator('form[data-fw-action="validate"] button').click()
    expect(page.locator("[data-fw=action-status]")).to_contain_text('"v1":1')
    page.locator('form[data-fw-action="dataset"] button').click()
    expect(page.get_by_test_id("fw-datasets").locator("tbody tr")).to_have_count(3, timeout=15_000)
    page.locator('form[data-fw-action="promote"] select[name="checkpoint"]').select_option("e2e-init")
    page.locator('form[data-fw-action="promote"] button').click()
    expect(page.get_by_test_id("fw-annotation-model")).to_have_text("e2e-init", timeout=15_000)
    page.locator('form[data-fw-action="merge"] select[name="checkpoints"]').select_option(
        ["e2e-init", "e2e-sft-1"]
    )
    page.locator('form[data-fw-action="merge"] input[name="weights"]').fill("0.5,0.6")
    page.locator('form[data-fw-action="merge"] button').click()
    expect(page.locator("[data-fw=action-status]")).to_contain_text("sum to 1")
    page.screenshot(path=str(shots / "flywheel-after.png"), full_page=True)
    assert errors == []
