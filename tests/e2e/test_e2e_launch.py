"""A researcher's RL runs on the platform as `make up` starts it (issue 19): launched from the form,
trained by the real engine (the run's own policy server, rollout workers on the env host's Chromium,
the trainer worker), its charts drawn from the trainer's metrics as they arrive, its configured
entropy-collapse alert firing live, its episodes listed as they come and replayed, paused (its policy
server stops), resumed from the same version, exported (CSV, TensorBoard), forked into a second real
run and compared with it; and a desktop run Watched read-only from its run page. Nothing is played by
the test."""

from __future__ import annotations

import csv
import io
import re
import struct
import time

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.journeys import chart_points, submit_launch, wait_chart_points, wait_run
from tests.e2e.live_stack import LiveStack

pytestmark = [pytest.mark.e2e]

FIRST_METRIC_S = 420  # a loaded 2-core machine: server start, trainer load, 4 short episodes, an update


def _open_advanced(page: Page) -> None:
    for summary in page.locator("summary").all():
        if summary.is_visible() and "advanced" in (summary.text_content() or "").lower():
            parent_open = summary.evaluate("el => el.parentElement.open")
            if not parent_open:
                summary.click()


def _fill(page: Page, field: str, value: str) -> None:
    page.get_by_test_id(f"field-{field}").fill(value)


def _server_of(api: httpx.Client, run_id: int) -> str | None:
    return (api.get(f"/api/rl/runs/{run_id}/").json().get("serving") or {}).get("urls", [None])[0]


# Real training on 2 cores (and `make up` when this test starts the session's stack): minutes.
@pytest.mark.timeout(1500)
def test_researcher_launches_watches_pauses_resumes_forks_and_stops_a_run(
    live_stack: LiveStack, browser: Browser, shots
) -> None:
    api = live_stack.api("researcher")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    live_stack.login(page, "researcher")
    page.goto(f"{live_stack.base_url}/runs/new/")
    expect(page.get_by_test_id("launch-form")).to_be_visible()
    page.get_by_test_id("field-preset").select_option("grpo-dart")
    # the form says which checkpoint a run starts from and how well it does on its pool
    expect(page.get_by_test_id("field-start-checkpoint")).to_contain_text(
        re.compile(r"RL start: starter-\w+ — \d+ % success on demo-miniwob")
    )
    page.get_by_test_id("field-name").fill("e2e live run")
    pool = page.get_by_test_id("field-pool")
    pool.select_option(
        label=next(t for t in pool.locator("option").all_text_contents() if t.startswith("demo-miniwob"))
    )
    _open_advanced(page)
    # the group size is asked once (curation.rollouts_max, mirrored into grpo.rollouts_per_task)
    for field, value in {"env.parallel_envs": "2", "curation.rollouts_max": "2", "curation.step_cap": "4",
                         "curation.min_batch_trajectories": "4", "budget.max_updates": "500",
                         # "Entropy collapse below": above any real entropy, so the alert fires on a real run
                         "alerts.entropy_min": "50", "alerts.entropy_max": "100"}.items():  # fmt: skip
        _fill(page, field, value)
    page.screenshot(path=str(shots / "launch-form.png"), full_page=True)
    started = submit_launch(page)
    run_id = int(re.search(r"/runs/(\d+)/", page.url).group(1))
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    expect(page.get_by_test_id("link-state")).to_contain_text("live")

    # the first metric point comes from the real trainer over the socket, without a reload
    try:
        wait_chart_points(page, "outcome/reward_mean", 0, FIRST_METRIC_S)
    except AssertionError:
        detail = api.get(f"/api/rl/runs/{run_id}/").json()
        raise AssertionError(
            f"no metric point: {detail.get('status')} {detail.get('error')}\n{live_stack.log('worker-train')}"
        ) from None
    first_metric_s = time.monotonic() - started
    url = _server_of(api, run_id)
    assert url, "the run names no policy server of its own"
    # the run's own server answers only with the run's key (another account of the machine gets 401)
    card = httpx.get(url.removesuffix("/v1") + "/v1/models", timeout=10)
    assert card.status_code == 401 and "X-Model-Version" not in card.headers, card.text
    points = wait_chart_points(page, "outcome/reward_mean", 1, FIRST_METRIC_S)  # charts move on their own
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "dashboard-live.png"), full_page=True)
    print(f"first metric point after {first_metric_s:.0f} s; {points} points")
    # Something trains: an update whose batch had a learning signal makes a new version (an update with
    # nothing to train on keeps it, so the rollouts in flight stay fresh and later batches train).
    trained = wait_run(api, run_id, lambda r: r["policy_version"] >= 1, FIRST_METRIC_S, "a trained version")
    # the configured alert fires on the trained update's entropy and shows up without a reload
    expect(page.get_by_test_id("alert-entropy_collapse").first).to_contain_text("50", timeout=30_000)
    # the episode list follows the run (it said "No episodes yet" for good when opened at launch)
    expect(page.get_by_test_id("episodes").locator("a[data-testid^='replay-']").first).to_be_visible(
        timeout=30_000
    )
    # and so does the checkpoint list: the trained version is listed without a reload
    expect(page.get_by_test_id("checkpoints")).to_contain_text(f"run{run_id}-v1", timeout=30_000)

    # pause: the trainer and rollouts stop, and so does the run's own policy server
    page.get_by_test_id("action-pause").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("paused")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url.removesuffix("/v1") + "/v1/models", timeout=2)
        except httpx.HTTPError:
            break
        time.sleep(1)
    else:
        raise AssertionError("the run's policy server kept serving after the pause")
    time.sleep(5)  # let an update in flight land
    paused = api.get(f"/api/rl/runs/{run_id}/").json()
    paused_points = chart_points(page, "outcome/reward_mean")
    assert paused["policy_version"] >= trained["policy_version"] and paused["updates_done"] >= 1, paused

    # resume: a new server with the committed weights; training continues from the same version and
    # the update count keeps growing
    page.get_by_test_id("action-resume").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    wait_chart_points(page, "outcome/reward_mean", paused_points, FIRST_METRIC_S)
    more = lambda r: r["updates_done"] > paused["updates_done"]  # noqa: E731
    resumed = wait_run(api, run_id, more, FIRST_METRIC_S, "an update after resume")
    assert resumed["policy_version"] >= paused["policy_version"], (paused, resumed)
    assert resumed["updates_done"] >= resumed["policy_version"]  # an update trains at most one version
    # every trained version is a checkpoint of the run, numbered on from the start without a gap or restart
    checkpoints = api.get(f"/api/rl/runs/{run_id}/checkpoints/").json()
    versions = sorted(
        int(c["version"].split("-v")[1]) for c in checkpoints if not c["version"].endswith("-ema")
    )
    assert versions == list(range(1, versions[-1] + 1)) and versions[-1] >= resumed["policy_version"], (
        f"versions skipped or restarted: {versions}"
    )
    page.screenshot(path=str(shots / "dashboard-resumed.png"), full_page=True)
    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("stopped")
    time.sleep(3)  # an update in flight lands or is dropped

    # CSV and TensorBoard exports hold every row the run recorded
    _exports_hold_every_row(live_stack, api, run_id)

    # replay one of its episodes from the run page: the real screenshots, step by step
    page.reload()
    with page.expect_response(lambda r: "episodes/pick/?which=best" in r.url):
        page.get_by_test_id("episode-pick").select_option("best")  # finished episodes, best reward first
    page.wait_for_timeout(300)
    link = page.get_by_test_id("episodes").locator("a[data-testid^='replay-']").first
    expect(link).to_be_visible()
    episode_id = int(link.get_attribute("data-testid").removeprefix("replay-"))
    steps = api.get(f"/api/rl/trajectories/{episode_id}/replay/").json()["steps"]
    shown = sum(1 for step in steps if step["screenshot_url"])
    assert shown >= 1, steps
    link.click()
    expect(page).to_have_url(f"{live_stack.base_url}/replay/{episode_id}/")
    expect(page.get_by_test_id("filmstrip").locator("img")).to_have_count(shown)
    stage = page.get_by_test_id("stage").locator("img").first
    expect(stage).to_have_js_property("complete", True)
    assert stage.evaluate("img => img.naturalWidth") > 0
    expect(page.get_by_test_id("step-panel")).to_contain_text(f"Step 1 of {len(steps)}")
    sampled = str(steps[0]["policy_version"])  # the version of the run that sampled the step
    assert sampled.isdigit() and int(sampled) <= api.get(f"/api/rl/runs/{run_id}/").json()["policy_version"]
    expect(page.get_by_test_id("fig-version")).to_have_text(sampled)
    page.screenshot(path=str(shots / "replay.png"), full_page=True)

    # fork from its newest checkpoint, launched at once: a second real run with charts of its own
    page.goto(f"{live_stack.base_url}/runs/{run_id}/")
    page.get_by_test_id("action-fork").click()
    expect(page.get_by_test_id("launch-form")).to_be_visible()
    page.get_by_test_id("field-name").fill("e2e live fork")
    submit_launch(page, away_from=run_id)
    fork_id = int(re.search(r"/runs/(\d+)/", page.url).group(1))
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    expect(page.get_by_test_id("run-head")).to_contain_text(f"fork of #{run_id}")
    fork = api.get(f"/api/rl/runs/{fork_id}/").json()
    assert fork["start_checkpoint"].startswith(f"run{run_id}-v")
    wait_chart_points(page, "outcome/verified_success_rate", 0, FIRST_METRIC_S)
    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("stopped")
    time.sleep(3)

    # compare the two real runs: the run list selects them, the overlay draws both
    page.goto(f"{live_stack.base_url}/runs/")
    # the list shows the run's alert count and its latest alert (here entropy collapse, or a later one)
    expect(page.get_by_test_id(f"run-row-{run_id}")).to_contain_text("⚠")
    alerts = api.get(f"/api/rl/runs/{run_id}/alerts/").json()
    kinds = {a["kind"] for a in (alerts["results"] if isinstance(alerts, dict) else alerts)}
    assert "entropy_collapse" in kinds, kinds
    page.get_by_test_id(f"select-{run_id}").check()
    page.get_by_test_id(f"select-{fork_id}").check()
    page.get_by_test_id("compare-selected").click()
    expect(page).to_have_url(re.compile(rf"/runs/compare/\?runs=({run_id},{fork_id}|{fork_id},{run_id})$"))
    metric = "outcome/verified_success_rate"
    expect(page.get_by_test_id("compare-metric")).to_have_value(metric)
    held = sum(_series_total(api, i, metric) for i in (run_id, fork_id))
    chart = page.get_by_test_id("chart-compare")
    expect(chart).to_have_attribute("data-lines", "2")
    expect(chart).to_have_attribute("data-points", str(held))
    page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "compare.png"), full_page=True)
    assert api.get(f"/api/rl/runs/{run_id}/").json()["status"] == "stopped"
    page.close()


def _series_total(api: httpx.Client, run_id: int, name: str) -> int:
    body = api.get(f"/api/rl/runs/{run_id}/metrics/", params={"names": name, "x": "step"}).json()
    (series,) = body["series"]
    assert series["total"] >= 1, (run_id, series)
    return int(series["total"])


def _exports_hold_every_row(stack: LiveStack, api: httpx.Client, run_id: int) -> None:
    url = stack.env["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url) as conn:
        (stored,) = conn.execute(
            "SELECT count(*) FROM rl_control_runmetric WHERE run_id = %s", [run_id]
        ).fetchone()
    body = api.get(f"/api/rl/runs/{run_id}/export.csv").text
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == stored > 20, (len(rows), stored)
    assert {"policy/entropy", "outcome/reward_mean", "fleet/live"} <= {r["name"] for r in rows}
    data = api.get(f"/api/rl/runs/{run_id}/export.tfevents").content
    events, pos = 0, 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 12 + length + 4
        events += 1
    assert events == len(rows) + 1  # the file-version event, then one scalar per row


@pytest.mark.timeout(900)
def test_researcher_watches_a_desktop_run_from_its_run_page(
    live_stack: LiveStack, browser: Browser, shots
) -> None:
    """A run on the demo desktop pool: its run page lists the desktops it leases and Watches one
    read-only over the VNC proxy while the run plays on it."""
    api = live_stack.api("researcher")
    pools = api.get("/api/pools/").json()
    pools = pools.get("results", pools) if isinstance(pools, dict) else pools
    pool = next(p["id"] for p in pools if p["name"] == "demo-osworld")
    body = {"name": "e2e desktop watch", "preset": "grpo-dart", "pool": pool, "launch": True,
            "config": {"env": {"kind": "desktop", "parallel_envs": 1}, "curation": {"step_cap": 30},
                       "budget": {"max_updates": 50}}}  # fmt: skip
    deadline = time.monotonic() + 240
    while True:  # right after `make up` the env host may still be booting its desktops
        created = api.post("/api/rl/runs/", json=body)
        if created.status_code != 400 or "can be leased" not in created.text or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        live_stack.login(page, "researcher")
        watch = page.get_by_test_id("fleet").locator("button[data-testid^='watch-']:not([disabled])").first
        # The panel lists the leases of the page's load (and of each update). A watch follows its
        # environment: when an episode ends (here after a few seconds) the desktop session is new, the
        # view drops and asks for a new grant by itself ("following the environment…"); the page is
        # loaded again only when the environment itself is gone (the view says so).
        deadline, seen = time.monotonic() + 300, []
        box, state = page.get_by_test_id("watch"), page.get_by_test_id("watch-state")
        while True:
            if not state.count():
                page.goto(f"{live_stack.base_url}/runs/{run_id}/")
                expect(page.get_by_test_id("run-status")).to_contain_text("running")
                page.wait_for_timeout(1500)
                if watch.count():
                    watch.click()
                    expect(box).not_to_contain_text("Connecting to the desktop", timeout=30_000)  # the grant
            if state.count():
                seen.append(state.inner_text())
                # connected, and the desktop's framebuffer arrived: noVNC sizes its canvas to the screen
                if seen[-1].startswith("connected") and page.evaluate(
                    "() => { const c = document.querySelector(\"[data-testid='watch'] canvas\");"
                    " return c !== null && c.width >= 320 && c.height >= 200; }"
                ):
                    break
            elif box.count():
                seen.append(box.inner_text()[:300])
            assert time.monotonic() < deadline, (seen, api.get(f"/api/rl/runs/{run_id}/fleet/").json())
            page.wait_for_timeout(1000)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(shots / "run-watch.png"), full_page=True)
    finally:
        api.post(f"/api/rl/runs/{run_id}/stop/")
        page.close()
