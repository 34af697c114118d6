"""Researcher dashboards in Chromium against a live ASGI server (uvicorn, websockets included).

The test process plays the trainer: it records metrics through the real service
(services.metrics_record → PostgreSQL → Redis channel layer → the server's run consumer → the
browser), as the RL engine does. Launch form (field errors from the server, then a valid launch),
points arriving live, an entropy-collapse alert, pause and resume, an episode replay with real
screenshots, and a comparison of two runs. Needs the built frontend (`npm --prefix frontend run
build`). Screenshots go to $FLYWHEEL_E2E_SCREENSHOTS or a temp dir.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from playwright.sync_api import Browser, Page, expect

from rl_control import services
from rl_control.models import Run
from tests.annotation.conftest import _kill
from tests.conftest import PASSWORD
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.store import services as store

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SERVE = (
    "import sys, uvicorn\n"
    "from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler\n"
    "from webapp.asgi import application\n"
    "uvicorn.run(ASGIStaticFilesHandler(application), host='127.0.0.1', port=int(sys.argv[1]), log_level='warning')\n"
)
FORM = """<html><body style="margin:0;font:16px sans-serif;background:#fafafa">
<div style="background:#ffd;padding:12px 16px;height:26px">Tick the box, then press Done.</div>
<div style="padding:24px 16px"><label><input id="box" type="checkbox"> I agree</label><br><br>
<button id="done" style="font-size:16px;padding:6px 18px">Done</button></div></body></html>"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def asgi_server(transactional_db) -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)], env=env, cwd=settings.BASE_DIR, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, "uvicorn exited"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _kill(proc)


def _sign_in(browser: Browser, base: str, username: str) -> Page:
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(f"{base}/login/?next=/runs/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/runs/")
    return page


def _shot(page: Page, path: Path) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=True)


@pytest.fixture
def trainer() -> Iterator[ThreadPoolExecutor]:
    """A thread to call the services from, as the trainer process would: Playwright's sync API keeps
    an event loop in the test's thread, where the services' channel-layer publish cannot run."""
    pool = ThreadPoolExecutor(max_workers=1)
    yield pool
    pool.submit(lambda: connection.close()).result()  # the thread's own connection
    pool.shutdown()


def _record(trainer: ThreadPoolExecutor, run: Run, step: int, **extra: float) -> None:
    """One trainer step through the real recording service."""
    trainer.submit(_record_now, run, step, extra).result()


def _record_now(run: Run, step: int, extra: dict[str, float]) -> None:
    services.metrics_record(
        run=run, step=step, policy_version=step, samples=64 * (step + 1), wall=2.0 * step,
        values={"policy/entropy": 1.2 - 0.02 * step, "outcome/reward_mean": 0.05 * step,
                "outcome/verified_success_rate": min(1.0, 0.04 * step), "value/explained_variance": 0.5,
                **extra},
    )  # fmt: skip


def _episode(browser: Browser, run: Run, task) -> int:
    """A real episode: screenshots of a page in Chromium before each action, the clicks at the
    elements' real centres, and per-step RL figures as the trainer stores them."""
    page = browser.new_page(viewport={"width": 480, "height": 300})
    page.set_content(FORM)
    t = store.trajectory_create(task=task, source="rl", run_id=run.pk, policy_version="4")
    for i, selector in enumerate(["#box", "#done"]):
        box = page.locator(selector).bounding_box()
        assert box is not None
        x, y = round(box["x"] + box["width"] / 2), round(box["y"] + box["height"] / 2)
        png = page.screenshot()
        store.step_append(
            trajectory=t, screenshot=png, image_format="png",
            fields={"thought": f"I click {selector}.", "action": [{"kind": "click", "point": [x, y]}],
                    "action_text": f"click(start_box='({x},{y})')", "coord_convention": "screen",
                    "screen_width": 480, "screen_height": 300, "reward": 1.0 if i == 1 else 0.0,
                    "done": i == 1, "policy_version": "4",
                    "rl": {"value": 0.3 + 0.4 * i, "advantage": 0.25 - 0.1 * i, "lambda": 0.975,
                           "ratio": 1.05 + 0.3 * i, "clipped": i == 1}},
        )  # fmt: skip
        page.mouse.click(x, y)
    page.close()
    store.trajectory_finish(trajectory=t, status="completed", final_reward=1.0)
    return t.pk


@pytest.mark.skip(
    reason="written for the old launch form (every section open, no preflight) with the test playing the "
    "trainer; the form and a real run are covered on make up's stack by test_e2e_launch.py and "
    "test_e2e_fleet_launch.py. Its alert / replay / compare checks are to be moved onto a real run."
)
def test_researcher_launches_watches_controls_replays_and_compares(
    browser, asgi_server, users, shots, trainer
) -> None:
    # Run ids far from other test databases' (they share the Redis channel layer, group rl-run-<id>).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('rl_control_run', 'id'), %s)",
            [700_000 + os.getpid() % 100_000],
        )
    pool = TaskPoolFactory(name="miniwob-e2e")
    task = TaskFactory(pool=pool, external_id="click-checkbox", instruction="Tick the box, then press Done.")
    page = _sign_in(browser, asgi_server, "res")

    # --- launch form: server validation per field, then a valid launch
    page.get_by_test_id("launch-link").click()
    expect(page.get_by_test_id("launch-form")).to_be_visible()
    page.get_by_test_id("field-preset").select_option("grpo-dart")
    expect(page.get_by_test_id("preset-description")).to_contain_text("grpo")
    expect(page.get_by_test_id("section-grpo")).to_contain_text("clip_low")
    # a new run starts from the checkpoint promoted to "RL start" unless another is picked
    expect(page.get_by_test_id("field-start-checkpoint")).to_contain_text("promoted to RL start")
    page.get_by_test_id("field-name").fill("e2e grpo")
    page.get_by_test_id("field-grpo.clip_low").fill("-1")
    page.get_by_test_id("launch-submit").click()
    expect(page.get_by_test_id("error-grpo.clip_low")).not_to_be_empty()
    _shot(page, shots / "runs-launch-errors.png")
    page.get_by_test_id("field-grpo.clip_low").fill("0.2")
    page.get_by_test_id("launch-submit").click()
    expect(page.get_by_test_id("error-pool")).to_contain_text("choose a task pool")
    expect(page.get_by_test_id("error-grpo.clip_low")).to_be_empty()
    page.get_by_test_id("field-pool").select_option(label="miniwob-e2e (1 tasks)")
    page.get_by_test_id("field-budget.max_updates").fill("50")
    # a field with a fixed set of values is a list of them
    schedule = page.get_by_test_id("field-grpo.lr_schedule")
    expect(schedule).to_have_value("constant")
    expect(page.get_by_test_id("section-grpo")).to_contain_text(
        "the thought's own sampling temperature"
    )  # help
    assert schedule.locator("option").all_text_contents() == ["constant", "linear", "cosine"]
    schedule.select_option("cosine")
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get(name="e2e grpo")
    assert run.status == "running" and run.config["budget"]["max_updates"] == 50
    assert run.config["grpo"]["lr_schedule"] == "cosine"
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    expect(page.get_by_test_id("link-state")).to_contain_text("live")

    # --- points arrive live over the websocket
    for step in range(5):
        _record(trainer, run, step)
    chart = page.get_by_test_id("chart-policy/entropy")
    expect(chart).to_have_attribute("data-points", "5")
    expect(page.get_by_test_id("group-outcome")).to_be_visible()
    for step in range(5, 12):
        _record(trainer, run, step)
    expect(chart).to_have_attribute("data-points", "12")
    expect(page.get_by_test_id("last-policy/entropy")).to_contain_text("@ 11")
    trainer.submit(
        services.run_progress, run=run, updates_done=12, episodes_done=40, policy_version=12, samples=768
    ).result()
    expect(page.get_by_test_id("counter-updates")).to_have_text("12")
    expect(page.get_by_test_id("counter-success")).to_have_text("44 %")
    # entropy collapses: the alert shows up live with its threshold
    _record(trainer, run, 12, **{"policy/entropy": 0.01})
    expect(page.get_by_test_id("alert-entropy_collapse")).to_contain_text("0.05")
    expect(chart).to_have_attribute("data-points", "13")
    # x axis by samples reloads the downsampled series from the server
    page.get_by_test_id("x-axis").select_option("samples")
    expect(page.get_by_test_id("last-policy/entropy")).to_contain_text("@ 832")
    page.get_by_test_id("x-axis").select_option("step")
    expect(page.get_by_test_id("last-policy/entropy")).to_contain_text("@ 12")
    # smoothing draws a smoothed line over the faint raw one; a drag zooms every chart together
    page.get_by_test_id("smoothing").fill("0.6")
    expect(chart).to_have_attribute("data-lines", "2")
    plot = chart.locator(".u-over")
    box = plot.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    expect(chart).to_have_attribute("data-zoom", re.compile(r"^2\.\d+,7\.\d+$"))
    expect(page.get_by_test_id("chart-outcome/reward_mean")).to_have_attribute(
        "data-zoom", re.compile(r"^2\.\d+,7\.\d+$")
    )
    page.wait_for_timeout(300)
    _shot(page, shots / "runs-live.png")
    page.get_by_test_id("reset-zoom").click()
    expect(page.get_by_test_id("chart-outcome/reward_mean")).not_to_have_attribute(
        "data-zoom", re.compile(".*")
    )

    # --- pause and resume
    page.get_by_test_id("action-pause").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("paused")
    run.refresh_from_db()
    assert run.status == "paused"
    page.get_by_test_id("action-resume").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    run.refresh_from_db()
    assert run.status == "running"

    # --- fork: the form starts from the run's settings; the fork records its parent
    page.get_by_test_id("action-fork").click()
    expect(page.get_by_test_id("field-budget.max_updates")).to_have_value("50")
    page.get_by_test_id("field-name").fill("e2e fork")
    page.get_by_test_id("field-seed").fill("9")
    page.get_by_test_id("field-launch").uncheck()
    page.get_by_test_id("launch-submit").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork = Run.objects.get(name="e2e fork")
    assert fork.parent_id == run.pk and fork.config["seed"] == 9 and fork.status == "created"
    expect(page.get_by_test_id("run-head")).to_contain_text(f"fork of #{run.pk}")
    expect(page.get_by_test_id("action-launch")).to_be_visible()
    page.goto(f"{asgi_server}/runs/{run.pk}/")

    # --- replay an episode
    episode_id = _episode(browser, run, task)
    page.reload()
    page.get_by_test_id(f"replay-{episode_id}").click()
    expect(page).to_have_url(f"{asgi_server}/replay/{episode_id}/")
    expect(page.get_by_test_id("filmstrip").locator("img")).to_have_count(2)
    expect(page.get_by_test_id("stage").locator("img")).to_have_js_property("complete", True)
    assert page.get_by_test_id("stage").locator("img").evaluate("img => img.naturalWidth") == 480
    expect(page.get_by_test_id("stage").locator(".rv-mark")).to_have_count(1)
    expect(page.get_by_test_id("step-panel")).to_contain_text("Step 1 of 2")
    expect(page.get_by_test_id("fig-value")).to_have_text("0.3")
    page.keyboard.press("ArrowRight")
    expect(page.get_by_test_id("step-panel")).to_contain_text("Step 2 of 2")
    expect(page.get_by_test_id("thought")).to_have_text("I click #done.")
    expect(page.get_by_test_id("fig-clipped")).to_have_text("yes")
    expect(page.get_by_test_id("fig-ratio")).to_have_text("1.35")
    expect(page.get_by_test_id("fig-version")).to_have_text("4")
    _shot(page, shots / "runs-replay.png")
    page.keyboard.press("Home")
    expect(page.get_by_test_id("step-panel")).to_contain_text("Step 1 of 2")

    # --- compare with a second run
    other = services.run_create(
        user=users["researcher"], name="e2e sync", preset="sync-baseline", pool=pool, config={"seed": 3}
    )
    services.run_launch(run=other)
    for step in range(8):
        trainer.submit(
            services.metrics_record, run=other, step=step, policy_version=step, samples=32 * step,
            wall=3.0 * step, values={"outcome/verified_success_rate": 0.02 * step},
        ).result()  # fmt: skip
    page.goto(f"{asgi_server}/runs/")
    page.get_by_test_id(f"select-{run.pk}").check()
    page.get_by_test_id(f"select-{other.pk}").check()
    expect(page.get_by_test_id(f"run-row-{run.pk}")).to_contain_text("entropy collapse")
    _shot(page, shots / "runs-list.png")
    page.get_by_test_id("compare-selected").click()
    expect(page).to_have_url(f"{asgi_server}/runs/compare/?runs={run.pk},{other.pk}")
    diff = page.get_by_test_id("config-diff")
    expect(diff).to_contain_text("mode")
    expect(diff).to_contain_text("seed")
    compare_chart = page.get_by_test_id("chart-compare")
    expect(compare_chart).to_have_attribute("data-points", "21")  # 13 + 8 verified-success points
    page.wait_for_timeout(300)
    _shot(page, shots / "runs-compare.png")
    assert page.errors == [], page.errors  # type: ignore[attr-defined]
    page.close()
