"""Every preset's defaults train the starter (issue 34, "Done when"): a researcher opens the launch
form of `make up`'s stack, picks a preset, names the run, picks `demo-miniwob` and presses Create run,
touching nothing else (the defaults the form shows for the embedded starter, the RL start checkpoint
of a fresh install). Within 10 minutes of the launch the run has a trained version (policy version
≥ 1, an update that changed the weights) and its reward chart has a point, drawn from the real
trainer's metrics over the run page's socket. Then the run is stopped, so the next preset's run gets
the machine. Nothing is played: the web server, Celery workers, env host and policy servers are the
stack's own processes.

Each journey takes minutes (slow). On a loaded 2-core machine the time to a trained version is
printed per preset; the bound is the issue's 10 minutes.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from rl_control.presets import PRESETS
from tests.e2e.journeys import chart_points, submit_launch
from tests.e2e.live_stack import LiveStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TRAINED_WITHIN_S = 600  # the 10 minutes, from the press of Create run that launched the run
CHART = "outcome/reward_mean"


# What each update cost (where the minutes went), printed per preset: the trainer's own figures.
TIMELINE = ("efficiency/update_s", "efficiency/weight_sync_s", "efficiency/trainer_idle_frac",
            "outcome/episodes", "outcome/reward_mean", "value/pretraining")  # fmt: skip


def _update_timeline(api: httpx.Client, run_id: int) -> str:
    """One line per recorded update: its wall-clock time and the TIMELINE figures."""
    body = api.get(
        f"/api/rl/runs/{run_id}/metrics/", params={"names": ",".join(TIMELINE), "x": "wall"}
    ).json()
    rows: dict[float, dict[str, float]] = {}
    for series in body["series"]:
        for x, y in zip(series["x"], series["y"], strict=True):
            rows.setdefault(x, {})[series["name"].split("/")[-1]] = round(y, 2)
    return "\n".join(f"  update at wall {x:.0f}: {figures}" for x, figures in sorted(rows.items()))


@pytest.mark.timeout(1500)  # `make up` (the session's first test) + the launch + 10 minutes + the stop
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_defaults_train_the_starter_from_the_basic_form(
    preset: str, live_stack: LiveStack, browser: Browser, shots: Path
) -> None:
    api = live_stack.api("researcher")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    live_stack.login(page, "researcher")
    page.goto(f"{live_stack.base_url}/runs/new/")
    expect(page.get_by_test_id("launch-form")).to_be_visible()
    page.get_by_test_id("field-preset").select_option(preset)
    # the run starts from the starter, and the form says its defaults are the starter's
    expect(page.get_by_test_id("field-start-checkpoint")).to_contain_text(
        re.compile(r"RL start: starter-\w+")
    )
    expect(page.get_by_test_id("preset-description")).to_contain_text("embedded model")
    page.get_by_test_id("field-name").fill(f"defaults of {preset}")
    pool = page.get_by_test_id("field-pool")
    pool.select_option(
        label=next(t for t in pool.locator("option").all_text_contents() if t.startswith("demo-miniwob"))
    )
    page.screenshot(path=str(shots / f"defaults-{preset}-form.png"), full_page=True)
    started = submit_launch(page)
    run_id = int(re.search(r"/runs/(\d+)/", page.url).group(1))
    expect(page.get_by_test_id("run-status")).to_contain_text("running")
    run = api.get(f"/api/rl/runs/{run_id}/").json()
    assert run["preset"] == preset, run

    # a trained version (the API) and a point on the reward chart (the page, live), within 10 minutes
    deadline, trained_s, charted_s = started + TRAINED_WITHIN_S, None, None
    while time.monotonic() < deadline and (trained_s is None or charted_s is None):
        run = api.get(f"/api/rl/runs/{run_id}/").json()
        assert run["status"] in ("created", "running"), f"{preset}: the run ended: {run}"
        if trained_s is None and run["policy_version"] >= 1:
            trained_s = time.monotonic() - started
        if charted_s is None and chart_points(page, CHART) > 0:
            charted_s = time.monotonic() - started
        page.wait_for_timeout(2000)
    page.screenshot(path=str(shots / f"defaults-{preset}-run.png"), full_page=True)
    print(
        f"\n{preset}: first chart point after {charted_s and round(charted_s)} s, trained version after "
        f"{trained_s and round(trained_s)} s; at the end {run['updates_done']} updates, version "
        f"{run['policy_version']}, progress {run.get('progress')!r}, wait {run.get('wait_reason')!r}"
    )
    print(_update_timeline(api, run_id))
    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("run-status")).to_contain_text("stopped")
    page.close()
    assert charted_s is not None, f"{preset}: no point on the {CHART} chart in {TRAINED_WITHIN_S} s: {run}"
    assert trained_s is not None, f"{preset}: no trained version in {TRAINED_WITHIN_S} s: {run}"
