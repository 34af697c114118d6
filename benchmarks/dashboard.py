"""RL benchmarks. `run_dashboard_downsample`: serve one 1,000,000-point metric series downsampled.

Runs in its own database, `<name>_bench_dashboard`: migrated, one run with 1M rows of one metric
(plus a second metric of the same length, interleaved as a trainer writes them) loaded by COPY;
then, in a `manage.py shell` on that database, the real services pack the series into blocks
(services.metrics_compact, as metrics_record does every 256 steps) and the real read path of
`GET /api/rl/runs/<id>/metrics/` — selectors.metric_series (blocks + tail into numpy, min/max
downsampling) plus JSON encoding — is timed (without HTTP and authentication).

`run_dashboard`: the figures of SPEC §10 (`bench dashboard`). After `run_dashboard_downsample`, in
the same database, `measure_live_in_bench_db` starts uvicorn (the real ASGI app: session auth,
the run consumer, the Redis channel layer), signs a researcher in, and:
  - latency: one websocket client listens to a run while a trainer thread records metrics through
    the real service (services.metrics_record: insert, commit, publish on commit); the time from just
    before the call to the `run.metrics` message being parsed in the client, p50 / p95 (the client
    stands in for the browser: same socket, same JSON);
  - sockets: `DashboardBenchConfig.sockets` clients connect at once, each gets its status snapshot, then one recorded
    step must reach every one of them; any failed connect, missing snapshot or missing message
    counts as an error.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from django.conf import settings

from benchmarks.harness.database import database_url, free_port, recreate_database
from benchmarks.harness.platform_config import DashboardBenchConfig
from benchmarks.harness.stats import percentile


def _copy_block(run_id: int, names: list[bytes], start: int, values: np.ndarray) -> bytes:
    """Binary COPY rows (run_id, name, step, policy_version, samples, wall, value) for the steps
    start .. start + len(values) − 1, the names interleaved per step as a trainer writes them.

    Built by numpy in one go: one record per step holding one row per name (fixed layout, since
    each name has a fixed length). `values` has shape (steps, len(names)).
    """
    n = values.shape[0]
    row_fields = []
    for k, name in enumerate(names):
        row_fields.append((f"r{k}", [
            ("ncols", ">i2"), ("l_run", ">i4"), ("run", ">i8"), ("l_name", ">i4"), ("name", f"S{len(name)}"),
            ("l_step", ">i4"), ("step", ">i4"), ("l_ver", ">i4"), ("ver", ">i4"), ("l_samples", ">i4"),
            ("samples", ">i8"), ("l_wall", ">i4"), ("wall", ">f8"), ("l_value", ">i4"), ("value", ">f8"),
        ]))  # fmt: skip
    rec = np.zeros(n, dtype=np.dtype(row_fields))
    steps = np.arange(start, start + n)
    for k, name in enumerate(names):
        r = rec[f"r{k}"]
        r["ncols"], r["l_run"], r["run"], r["l_name"], r["name"] = 7, 8, run_id, len(name), name
        r["l_step"], r["step"], r["l_ver"], r["ver"] = 4, steps, 4, steps
        r["l_samples"], r["samples"], r["l_wall"], r["wall"] = 8, steps * 64, 8, steps * 0.5
        r["l_value"], r["value"] = 8, values[:, k]
    return rec.tobytes()


def _fill(conn: psycopg.Connection, run_id: int, n: int, names: tuple[str, ...]) -> None:
    """`n` steps of each of `names` for the run.

    The series index is dropped during the load and rebuilt after (as a restore would), then the
    table is vacuumed: on a live server autovacuum keeps the visibility map current, which is what
    lets the series read be an index-only scan.
    """
    index_row = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'runmetric_series'"
    ).fetchone()
    if index_row is None:
        raise RuntimeError("bench database is not migrated")
    index_sql = str(index_row[0])
    conn.execute("DROP INDEX runmetric_series")
    rng = np.random.default_rng(0)
    encoded = [name.encode() for name in names]
    chunk = 200_000
    with conn.cursor().copy(
        "COPY rl_control_runmetric (run_id, name, step, policy_version, samples, wall, value)"
        " FROM STDIN (FORMAT binary)"
    ) as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8)  # signature, flags, no header extension
        for start in range(0, n, chunk):
            steps = np.arange(start, min(n, start + chunk))
            entropy = 1.0 + 0.5 * np.exp(-steps / (n / 5)) + 0.05 * rng.standard_normal(steps.size)
            reward = 1.0 - np.exp(-steps / (n / 3)) + 0.1 * rng.standard_normal(steps.size)
            values = np.column_stack([entropy, reward])[:, : len(names)]
            copy.write(_copy_block(run_id, encoded, start, values))
        copy.write(b"\xff\xff")
    conn.commit()  # the deferred foreign-key checks run here; CREATE INDEX refuses pending ones
    conn.execute(index_sql)
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE rl_control_runmetric")
    conn.autocommit = False


def _bench_db_env(db_url: str) -> dict[str, str]:
    """The environment of a child process working on the bench database (production-like settings)."""
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        "DEBUG": "false",
    }


def _in_bench_db(env: dict[str, str], part: str, call: str) -> dict[str, Any]:
    """Run `call` (a measure_* function of this module) in `manage.py shell` with `env`; its one JSON line."""
    code = f"from benchmarks.dashboard import measure_in_bench_db, measure_live_in_bench_db; {call}"
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], env=env,
                            capture_output=True, text=True, cwd=settings.BASE_DIR)  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(
            f"bench dashboard: the {part} part failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def measure_in_bench_db(run_id: int, n: int, repeats: int, names: tuple[str, ...], points: int) -> None:
    """Runs inside `manage.py shell` on the bench database: pack blocks with the real service, then
    time the real read path of the series endpoint (`points` out of `n` of the first name). Prints
    one JSON line."""
    from rl_control.selectors import metric_series
    from rl_control.services import metrics_compact

    t0 = time.perf_counter()
    blocks = sum(metrics_compact(run_id=run_id, name=name, up_to_step=n) for name in names)
    compact_s = time.perf_counter() - t0
    timings: dict[str, list[float]] = {"step": [], "wall": []}
    out: dict[str, Any] = {}
    metric_series(run_id=run_id, names=[names[0]], points=points)  # warm the cache once
    for _ in range(repeats):
        for x in timings:
            start = time.perf_counter()
            out = metric_series(run_id=run_id, names=[names[0]], x=x, points=points)
            json.dumps(out)
            timings[x].append((time.perf_counter() - start) * 1000)
    (series,) = out["series"]
    every = timings["step"] + timings["wall"]
    print(json.dumps({
        "downsample_1m_ms": round(statistics.median(timings["step"]), 1),
        "downsample_1m_wall_axis_ms": round(statistics.median(timings["wall"]), 1),
        "downsample_1m_p95_ms": round(percentile(every, 0.95), 1),
        "points_in": series["total"],
        "points_out": len(series["x"]),
        "blocks": blocks,
        "compact_s": round(compact_s, 2),
    }))  # fmt: skip


def run_dashboard_downsample(config: DashboardBenchConfig) -> dict[str, Any]:
    db_name = f"{settings.DATABASES['default']['NAME']}_bench_dashboard"
    db_url = database_url(db_name)
    recreate_database(db_name)
    env = _bench_db_env(db_url)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], env=env, check=True,
                   capture_output=True, cwd=settings.BASE_DIR)  # fmt: skip
    create = (
        "from rl_control.models import Run; from django.utils import timezone;"
        " print(Run.objects.create(name='bench', status='running', started_at=timezone.now(),"
        " resumed_at=timezone.now()).pk)"
    )
    created = subprocess.run([sys.executable, "manage.py", "shell", "-c", create], env=env, check=True,
                             capture_output=True, text=True, cwd=settings.BASE_DIR)  # fmt: skip
    run_id = int(created.stdout.strip().splitlines()[-1])
    names, points, repeats = config.series_names, config.series_points, config.downsample_repeats
    with psycopg.connect(db_url.replace("postgres://", "postgresql://")) as conn:
        t0 = time.perf_counter()
        _fill(conn, run_id, points, names)
        fill_s = time.perf_counter() - t0
    figures = _in_bench_db(
        env,
        "downsample",
        f"measure_in_bench_db({run_id}, {points}, {repeats}, {names!r}, {config.requested_points})",
    )
    if figures["points_in"] != points:
        raise RuntimeError(f"served {figures['points_in']} points, expected {points}")
    return {
        **figures,
        "requested_points": config.requested_points,
        "repeats": repeats,
        "fill_s": round(fill_s, 1),
    }


async def _live_figures(
    port: int, cookie: str, run_id: int, record: Any, samples: int, sockets: int, connecting: int
) -> dict[str, Any]:
    import asyncio
    import threading

    import websockets

    url = f"ws://127.0.0.1:{port}/ws/rl/runs/{run_id}/"
    headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
    loop = asyncio.get_running_loop()

    def in_thread(fn: Any, *args: Any) -> asyncio.Future[Any]:
        """Run a recording call in a trainer thread (services publish with async_to_sync)."""
        future: asyncio.Future[Any] = loop.create_future()

        def work() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:  # handed back to the loop
                loop.call_soon_threadsafe(future.set_exception, exc)
            else:
                loop.call_soon_threadsafe(future.set_result, result)

        threading.Thread(target=work, daemon=True).start()
        return future

    # --- latency: metric written by the trainer -> parsed in a connected client
    latencies: list[float] = []
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        snapshot = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if snapshot.get("type") != "run.status":
            raise RuntimeError(f"expected the status snapshot, got {snapshot}")
        for step in range(samples):
            started = await in_thread(record, step)
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if msg.get("type") == "run.metrics" and msg.get("step") == step:
                    latencies.append((time.perf_counter() - started) * 1000)
                    break
            await asyncio.sleep(0.01)

    # --- many sockets at once
    errors = 0
    conns: list[Any] = []

    # Dashboards open over time, not in one instant: at most `connecting` handshakes are in flight
    # (each one reads the session, the user and the run); all of them stay open together.
    gate = asyncio.Semaphore(connecting)

    async def connect() -> Any:
        async with gate:
            ws = await websockets.connect(url, additional_headers=headers, max_size=None, open_timeout=60)
            first = json.loads(await asyncio.wait_for(ws.recv(), 60))
        if first.get("type") != "run.status":
            raise RuntimeError("no snapshot")
        return ws

    t0 = time.perf_counter()
    results = await asyncio.gather(*(connect() for _ in range(sockets)), return_exceptions=True)
    connect_s = time.perf_counter() - t0
    kinds: dict[str, int] = {}
    for r in results:
        if isinstance(r, BaseException):
            errors += 1
            kinds[type(r).__name__] = kinds.get(type(r).__name__, 0) + 1
        else:
            conns.append(r)
    step = samples + 10

    async def receive(ws: Any) -> bool:
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if msg.get("type") == "run.metrics" and msg.get("step") == step:
                return True

    started = await in_thread(record, step)
    got = await asyncio.gather(*(receive(ws) for ws in conns), return_exceptions=True)
    fanout_s = time.perf_counter() - started
    for g in got:
        if g is not True:
            errors += 1
            name = f"receive:{type(g).__name__}"
            kinds[name] = kinds.get(name, 0) + 1
    await asyncio.gather(*(ws.close() for ws in conns), return_exceptions=True)
    return {
        "metric_to_browser_p50_ms": round(statistics.median(latencies), 1),
        "metric_to_browser_p95_ms": round(percentile(latencies, 0.95), 1),
        "metric_to_browser_max_ms": round(max(latencies), 1),
        "latency_samples": len(latencies),
        "sockets": sockets,
        "socket_errors": errors,
        "socket_error_kinds": kinds,
        "sockets_connect_s": round(connect_s, 2),
        "sockets_fanout_s": round(fanout_s, 2),
    }


def signed_in_session(username: str, password: str) -> str:
    """The key of a stored session for `username`, as a sign-in through the login form leaves it: the
    backend recorded is the one that authenticated the user (the model backend; axes' backend only
    counts failures and cannot load a user, so a session naming it fails every request)."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, authenticate
    from django.contrib.sessions.backends.db import SessionStore

    user = authenticate(None, username=username, password=password)
    if user is None:
        raise RuntimeError(f"bench dashboard: {username} cannot sign in")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = user.backend
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return str(session.session_key)


def measure_live_in_bench_db(samples: int, sockets: int, connecting: int) -> None:
    """Runs inside `manage.py shell` on the bench database (see the module docstring). Prints one JSON line."""
    import asyncio
    import signal

    from django.conf import settings as dj
    from django.db import connection
    from django.utils import timezone

    from rl_control import services
    from rl_control.models import Run
    from webapp.accounts.roles import Role
    from webapp.accounts.services import user_create

    # A run id no other database uses: the Redis channel layer (group rl-run-<id>) is shared.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('rl_control_run', 'id'), %s)",
            [900_000 + os.getpid() % 90_000],
        )
    user = user_create(username=f"bench-{os.getpid()}", password="bench-pw-1", roles=[Role.RESEARCHER])
    cookie = f"{dj.SESSION_COOKIE_NAME}={signed_in_session(user.username, 'bench-pw-1')}"
    now = timezone.now()
    run = Run.objects.create(
        name="bench-live", status="running", started_at=now, resumed_at=now, created_by=user
    )

    def record(step: int) -> float:
        started = time.perf_counter()
        services.metrics_record(
            run=run, step=step, policy_version=step, samples=64 * step,
            values={"policy/entropy": 1.0 + 0.001 * step, "outcome/reward_mean": 0.01 * step, "policy/kl": 0.02},
        )  # fmt: skip
        connection.close()  # this thread's connection; the next call runs in a new thread
        return started

    port = free_port()
    serve = (
        "import sys, uvicorn\n"
        "uvicorn.run('project.asgi:application', host='127.0.0.1', port=int(sys.argv[1]), log_level='warning',"
        " ws_max_queue=64, backlog=4096)\n"
    )
    server_log = tempfile.NamedTemporaryFile(prefix="bench-dashboard-uvicorn-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-c", serve, str(port)], env=os.environ.copy(), cwd=dj.BASE_DIR,
                            start_new_session=True, stdout=server_log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        import socket

        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start") from None
                time.sleep(0.1)
        figures = asyncio.run(_live_figures(port, cookie, run.pk, record, samples, sockets, connecting))
        time.sleep(3)  # let the server finish the disconnects before it is stopped
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    server_log.close()
    text = Path(server_log.name).read_text(errors="replace")
    # Server-side failures count too (an exception in a consumer is an error the client may not see).
    figures["server_errors"] = text.count("Exception in ASGI application")
    figures["socket_errors"] += figures["server_errors"]
    if figures["server_errors"]:
        figures["server_log"] = server_log.name
    else:
        Path(server_log.name).unlink()
    print(json.dumps(figures))


def run_dashboard(quick: bool) -> dict[str, Any]:
    """`bench dashboard`: 1M-point downsample, metric-to-client latency, concurrent sockets."""
    config = DashboardBenchConfig.for_run(quick)
    downsample = run_dashboard_downsample(config)
    env = _bench_db_env(database_url(f"{settings.DATABASES['default']['NAME']}_bench_dashboard"))
    live = _in_bench_db(
        env,
        "live",
        f"measure_live_in_bench_db({config.latency_samples}, {config.sockets}, {config.connecting})",
    )
    return {
        "metric_to_browser_p50_ms": live.pop("metric_to_browser_p50_ms"),
        "metric_to_browser_p95_ms": live.pop("metric_to_browser_p95_ms"),
        "downsample_1m_ms": downsample.pop("downsample_1m_ms"),
        "sockets": live.pop("sockets"),
        "socket_errors": live.pop("socket_errors"),
        **live,
        **downsample,
        "config": asdict(config),
    }
