"""The launch form in Chromium is drawn from the run config's JSON schema (GET /api/rl/config-schema/):
labels and help in words, fixed-set fields as lists, the basics before "Advanced", PPO's own section;
the server's per-field errors show at their fields; a fork of a run stored before a field existed
shows that field at its default. Against Django's live server (no `make up`); needs the built
frontend (`npm --prefix frontend run build`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from rl_control import services
from rl_control.models import Run
from tests.conftest import PASSWORD
from tests.factories import TaskFactory, TaskPoolFactory

pytestmark = pytest.mark.e2e


def _sign_in(browser: Browser, base: str) -> Page:
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill("res")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("html")).to_have_attribute("data-bundle", "ready")
    return page


def test_the_launch_form_is_drawn_from_the_config_schema(browser, live_server, users, shots: Path) -> None:
    pool = TaskPoolFactory(name="form-pool")
    TaskFactory.create_batch(2, pool=pool, env_kind="browser")
    page = _sign_in(browser, live_server.url)
    page.goto(f"{live_server.url}/runs/new/")
    page.get_by_label("Preset", exact=True).select_option("grpo-dart")
    basic, advanced = page.get_by_test_id("section-basic"), page.get_by_test_id("advanced")
    for label in ("Environments in parallel", "Group size (rollouts per task)", "Stop after this many updates",
                  "Policy endpoints (external servers)", "Judge endpoint (OpenAI-compatible)"):  # fmt: skip
        expect(basic.get_by_label(label, exact=True)).to_be_visible()
    expect(advanced).not_to_have_attribute("open", "")
    assert page.locator("[name='grpo.rollouts_per_task']").count() == 0  # the group size is asked once
    assert page.locator("label", has_text=re.compile(r"^\w+\.\w+$")).count() == 0  # no config key as a label
    # Advanced: the sections' titles, each field's help and a fixed set offered as a list
    expect(page.get_by_test_id("section-grpo").locator("legend")).to_have_text("Step-wise GRPO")
    expect(page.locator("#help-grpo\\.beta_kl")).to_have_text(
        "weight of KL(π_θ ‖ π_ref); 0 drops the reference model"
    )
    expect(page.locator("#help-env\\.parallel_envs")).to_contain_text(
        "fitted to this start model"
    )  # the note on where the default comes from (the embedded starter's fit)
    kl = page.get_by_test_id("field-grpo.kl_estimator")
    expect(kl.locator("option")).to_have_text(["k1", "k2", "k3"])
    expect(kl).to_have_value("k3")

    page.get_by_label("Task pool", exact=True).select_option(label="form-pool (2 tasks)")
    page.get_by_label("Name", exact=True).fill("form run")
    page.get_by_label("Environments in parallel", exact=True).fill("0")
    page.get_by_label("Group size (rollouts per task)", exact=True).fill("1")
    advanced.locator("summary").click()
    page.get_by_test_id("field-grpo.clip_low").fill("-1")
    page.get_by_test_id("field-grpo.kl_estimator").select_option("k1")
    advanced.locator("summary").click()  # folded again: the error must unfold it
    page.get_by_test_id("field-launch").uncheck()
    page.get_by_test_id("launch-submit").click()
    expect(page.get_by_test_id("error-env.parallel_envs")).to_contain_text("greater than or equal to 1")
    expect(page.get_by_test_id("error-grpo.clip_low")).to_contain_text("greater than 0")
    expect(page.get_by_test_id("error-curation.rollouts_max")).not_to_be_empty()
    expect(advanced).to_have_attribute("open", "")
    page.screenshot(path=str(shots / "launch-form-schema-errors.png"), full_page=True)
    assert not Run.objects.exists()

    page.get_by_label("Environments in parallel", exact=True).fill("2")
    page.get_by_label("Group size (rollouts per task)", exact=True).fill("4")
    page.get_by_test_id("field-grpo.clip_low").fill("0.2")
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"), timeout=30_000)
    run = Run.objects.get()
    assert (run.preset, run.config["env"]["parallel_envs"], run.config["grpo"]["kl_estimator"]) == (
        "grpo-dart",
        2,
        "k1",
    )
    assert run.config["curation"]["rollouts_max"] == run.config["grpo"]["rollouts_per_task"] == 4

    # PPO: its own section, and no group size among the basics
    page.goto(f"{live_server.url}/runs/new/")
    page.get_by_label("Preset", exact=True).select_option("ppo-uitars2")
    expect(page.get_by_test_id("section-ppo").locator("legend")).to_have_text("PPO")
    assert page.get_by_test_id("section-grpo").count() == 0
    assert basic.get_by_label("Group size (rollouts per task)", exact=True).count() == 0

    # a run stored before env.priority and the judge section existed: its fork shows their defaults
    old = services.run_create(user=users["researcher"], name="old", preset="grpo-dart", pool=pool)
    del old.config["env"]["priority"], old.config["judge"]
    old.save(update_fields=["config"])
    page.goto(f"{live_server.url}/runs/new/?fork={old.pk}")
    expect(page.get_by_test_id("field-env.priority")).to_have_value("1")
    expect(page.get_by_test_id("field-judge.use")).to_have_value("no_verifier")
    page.get_by_test_id("field-launch").uncheck()
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"), timeout=30_000)
    fork = Run.objects.get(parent=old)
    assert fork.config["env"]["priority"] == 1 and fork.config["judge"]["use"] == "no_verifier"
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()
