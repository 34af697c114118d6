"""What a live dashboard receives equals what a finished run serves, and the run pages' access."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from project.routing import websocket_urlpatterns
from rl_control import selectors, services
from tests.conftest import PASSWORD


@pytest.mark.django_db(transaction=True)  # services publish on commit
def test_points_streamed_live_are_the_points_served_afterwards(users, make_run) -> None:
    """A client that only listens to `run.metrics` holds the same (x, y) series, on every x axis,
    as the series endpoint returns for the run afterwards (below the downsampling budget)."""
    run = make_run()
    services.run_launch(run=run)
    received: list[dict] = []

    async def scenario() -> None:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/rl/runs/{run.pk}/")
        ws.scope["user"] = users["researcher"]
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "run.status"
        for step in range(40):
            await database_sync_to_async(services.metrics_record)(
                run=run, step=step, policy_version=step // 4, samples=16 * step, wall=0.25 * step,
                values={"policy/entropy": 1.0 + ((step * 7919) % 13) / 10, "policy/kl": 0.001 * step},
            )  # fmt: skip
            received.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()

    async_to_sync(scenario)()
    assert [e["step"] for e in received] == list(range(40))
    for axis, key in [
        ("step", "step"),
        ("version", "policy_version"),
        ("samples", "samples"),
        ("wall", "wall"),
    ]:
        served = selectors.metric_series(
            run_id=run.pk, names=["policy/entropy", "policy/kl"], x=axis, points=1000
        )
        for series in served["series"]:
            live = sorted(
                ((float(e[key]), e["values"][series["name"]]) for e in received), key=lambda p: p[0]
            )
            assert list(zip(series["x"], series["y"], strict=True)) == live, (axis, series["name"])


@pytest.mark.django_db
def test_run_pages_render_for_researchers_only(users, make_run, pool) -> None:
    run = make_run()
    from webapp.store import services as store

    trajectory = store.trajectory_create(task=pool.tasks.first(), source="rl", run_id=run.pk)
    client = Client()
    client.login(username="res", password=PASSWORD)
    for url, view in [
        ("/runs/", "list"),
        ("/runs/new/", "launch"),
        ("/runs/compare/?runs=1,2", "compare"),
        (f"/runs/{run.pk}/", "run"),
        (f"/replay/{trajectory.pk}/", "replay"),
    ]:
        body = client.get(url).content.decode()
        assert f'data-runs-view="{view}"' in body, url
    assert f'data-run-id="{run.pk}"' in client.get(f"/runs/{run.pk}/").content.decode()
    assert client.get("/runs/999999/").status_code == 404
    assert client.get("/replay/999999/").status_code == 404
    annotator = Client()
    annotator.login(username="ann", password=PASSWORD)
    for url in ["/runs/new/", f"/runs/{run.pk}/", f"/replay/{trajectory.pk}/", "/runs/compare/"]:
        assert annotator.get(url).status_code == 403, url
