"""Against the stack `make up` starts (tests/e2e/live_stack.py): the fleet page shows the env host's
warm pool live (a lease taken elsewhere appears without reload, named by its owner) and Watches the
desktop read-only; the launch form asks the basics, folds the rest under Advanced, asks the group
size once, shows the server's errors next to their fields and creates the run."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.live_stack import LiveStack
from workers.envs.leases import LeaseRegistry, redis_client

pytestmark = pytest.mark.e2e


def _registry(stack: LiveStack) -> LeaseRegistry:
    return LeaseRegistry(redis_client(stack.env["REDIS_URL"]), prefix="flywheel:fleet")


def test_fleet_page_live_and_watch(live_stack: LiveStack, browser: Browser, shots: Path) -> None:
    reg = _registry(live_stack)
    deadline = time.monotonic() + 120
    while reg.idle_count("desktop") < 1 or reg.idle_count("browser") < 1:
        assert time.monotonic() < deadline, live_stack.log("envhost1")
        time.sleep(1)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    live_stack.login(page, "researcher")
    page.get_by_role("link", name="Fleet").click()
    expect(page.get_by_test_id("fleet-link")).to_have_text("live", timeout=20_000)
    expect(page.get_by_test_id("host-envhost1")).to_contain_text("alive")
    # a queue's state is a phrase ("3 waiting, oldest 12 s"): its pill keeps the words as written
    expect(page.get_by_test_id("queue-asr").locator(".badge")).to_have_css("text-transform", "none")
    lease = reg.acquire(kind="browser", owner="rl:987654:0:1", ttl_s=60)
    assert lease is not None
    try:
        row = page.get_by_test_id(f"env-{lease.env_id}")
        expect(row).to_contain_text("leased", timeout=15_000)  # no reload: the socket followed the lease
        expect(page.get_by_test_id(f"owner-{lease.env_id}")).to_have_text("rl #987654 (gone)")
    finally:
        reg.release(lease_id=lease.lease_id)
    expect(page.get_by_test_id(f"env-{lease.env_id}")).to_contain_text("idle", timeout=15_000)
    desktop = page.locator("button[data-testid^='watch-desktop-']:not([disabled])").first
    desktop.click()
    expect(page.get_by_test_id("watch-state")).to_have_text(re.compile("^connected"), timeout=30_000)
    page.screenshot(path=str(shots / "fleet-watch.png"), full_page=True)
    page.close()


def test_launch_form_basics_advanced_errors_and_create(
    live_stack: LiveStack, browser: Browser, shots: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    live_stack.login(page, "researcher")
    page.goto(f"{live_stack.base_url}/runs/new/")
    form = page.get_by_test_id("launch-form")
    expect(form).to_be_visible()
    page.get_by_label("Preset", exact=True).select_option("grpo-dart")
    advanced = page.get_by_test_id("advanced")
    expect(advanced).not_to_have_attribute("open", "")
    for label in ("Environments in parallel", "Group size (rollouts per task)", "Stop after this many updates",
                  "Policy endpoints (external servers)", "Judge endpoint (OpenAI-compatible)"):  # fmt: skip
        expect(page.get_by_test_id("section-basic").get_by_label(label, exact=True)).to_be_visible()
    assert page.locator("[name='grpo.rollouts_per_task']").count() == 0  # the group size is asked once
    assert page.locator("label", has_text=re.compile(r"^\w+\.\w+$")).count() == 0  # no config key as a label

    pool = page.get_by_label("Task pool", exact=True)
    pool.select_option(label=pool.locator("option", has_text="demo-miniwob").first.inner_text())
    page.get_by_label("Name", exact=True).fill("e2e form run")
    page.get_by_label("Environments in parallel", exact=True).fill("0")
    page.get_by_label("Group size (rollouts per task)", exact=True).fill("1")
    advanced.locator("summary").click()
    page.get_by_test_id("field-grpo.clip_low").fill("-1")
    advanced.locator("summary").click()  # folded again: the error must unfold it
    page.get_by_test_id("field-launch").uncheck()
    page.get_by_test_id("launch-submit").click()
    expect(page.get_by_test_id("error-env.parallel_envs")).to_contain_text("greater than or equal to 1")
    expect(page.get_by_test_id("error-grpo.clip_low")).not_to_be_empty()
    expect(page.get_by_test_id("error-curation.rollouts_max")).not_to_be_empty()
    expect(advanced).to_have_attribute("open", "")  # an error under Advanced (grpo's N ≥ 2) opens it
    page.screenshot(path=str(shots / "launch-form-errors.png"), full_page=True)

    page.get_by_label("Environments in parallel", exact=True).fill("2")
    page.get_by_label("Group size (rollouts per task)", exact=True).fill("4")
    page.get_by_test_id("field-grpo.clip_low").fill("0.2")
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"), timeout=30_000)
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    run = live_stack.api("researcher").get(f"/api/rl/runs/{run_id}/").json()
    assert run["preset"] == "grpo-dart" and run["status"] == "created"
    assert run["config"]["env"]["parallel_envs"] == 2
    assert run["config"]["curation"]["rollouts_max"] == run["config"]["grpo"]["rollouts_per_task"] == 4
    assert run["config"]["judge"]["url"] == ""

    page.goto(f"{live_stack.base_url}/runs/new/?fork={run_id}")
    expect(page.get_by_test_id("preset-description")).to_contain_text("preset Step-wise GRPO (DART)")
    page.get_by_test_id("field-launch").uncheck()
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"), timeout=30_000)
    child = int(page.url.rstrip("/").rsplit("/", 1)[1])
    forked = live_stack.api("researcher").get(f"/api/rl/runs/{child}/").json()
    assert forked["preset"] == "grpo-dart" and forked["parent"] == run_id
    page.close()
