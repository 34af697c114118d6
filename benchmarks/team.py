"""`bench team [--quick]` (issue 37): a team on one install, as `make up` starts it.

The stack is `make up`'s processes, on free ports, in a database of its own (`<name>_bench_team`)
and a Redis database of its own (FLYWHEEL_TEAM_REDIS_DB of the configured Redis, default 11, flushed
first), owned by the bench: uvicorn (scripts/web.sh), the Celery workers of every queue sized as
scripts/up.sh sizes them for a team of N annotators (`worker_sizes`), beat, one env host (threads,
MiniWoB++ in Chromium) and the annotation model's policy server. On it, the actors of
benchmarks/team_load.py work for the window: N annotators (some thinking aloud), reviewers,
researchers watching run pages and exporting, and runs launched through the API (the second once the
first has episodes, i.e. while it trains).

Figures: `http_5xx` (answers ≥ 500, by endpoint in `http_5xx_by_endpoint`), `ws_errors`,
`lost_steps` (decisions answered 200 whose step is not in the database exactly once with that
screen version, checked after the stack stopped), `db_connections_max` (pg_stat_activity of the
bench's database, sampled every 0.5 s), `db_pool_max` (the connections the settings allow the stack:
each process's pool by its role, summed as docs/scale.md does), `decide_p95_ms` (the decide endpoint's answer time, which holds
no model time: candidates come later on the socket), `second_run_first_episode_s` (from the second
run's launch to its first finished episode; None when it had none in the window),
`asr_lag_p95_s` (chunk upload answered → its live transcript on the socket), `load_avg`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import redis
from django.conf import settings

from benchmarks import team_load as load
from benchmarks.harness.database import BenchDatabase, bench_database, free_port, redis_url
from benchmarks.harness.platform_config import TeamBenchConfig
from benchmarks.harness.processes import stop_all
from benchmarks.harness.stats import percentile
from benchmarks.team_figures import GOALS, chaos_figures, db_pool_max, met
from webapp.priority import prioritized

PASSWORD = "team-bench-pass-1"
TASKS = ("click-test", "click-button", "focus-text", "click-link")


def run_config(config: TeamBenchConfig) -> dict[str, Any]:
    """The runs' `config` (the grpo-dart preset's values for the rest): short episodes, small groups."""
    return {
        "env": {"parallel_envs": config.run_envs},
        "grpo": {"rollouts_per_task": 2},
        "curation": {"rollouts_max": 2, "step_cap": 4, "min_batch_trajectories": 4},
        "budget": {"max_updates": 10_000, "max_minutes": config.window_s / 60 + 5},
    }


_SETUP = """
import json, sys
from annotation.models import Assignment
from webapp.accounts.roles import Role
from webapp.accounts.services import user_create
from webapp.store.models import Task, TaskPool
p = json.loads(PARAMS)
pool = TaskPool.objects.create(name="team")
tasks = [Task.objects.create(pool=pool, external_id=f"{name}-{i}", instruction="", env_kind="browser",
                             source="miniwob", setup={"task": name})
         for i in range(p["copies"]) for name in p["tasks"]]
people = {"ann": Role.ANNOTATOR, "rev": Role.REVIEWER, "res": Role.RESEARCHER}
for prefix, role in people.items():
    for i in range(p[prefix]):
        user = user_create(username=f"{prefix}{i}", password=p["password"], roles=[role])
        if role == Role.ANNOTATOR:
            Assignment.objects.bulk_create([Assignment(user=user, task=t) for t in tasks])
print(json.dumps({"pool": pool.pk}))
"""


CELERY = [sys.executable, "-m", "celery", "-A", "webapp"]
ROLLOUT_CONCURRENCY = 2  # scripts/up.sh's FLYWHEEL_ROLLOUT_CONCURRENCY default


def worker_sizes(annotators: int) -> list[tuple[str, str, int, str]]:
    """(name, queues, processes, CPU priority class) of each Celery worker as scripts/up.sh starts
    them for a team of `annotators` (FLYWHEEL_ANNOTATORS); its env host has annotators + rollout + 4
    threads."""
    return [
        ("default", "default,export", 2 + annotators // 4, "normal"),
        ("env", "env", 2, "normal"),
        ("asr-live", "asr.live", (annotators + 3) // 4, "interactive"),
        ("asr", "asr", 1, "low"),
        ("rollout", "rollout", ROLLOUT_CONCURRENCY, "background"),
        ("train", "train", 1, "background"),
    ]


class TeamStack:
    """`make up`'s processes for the bench (see the module docstring); `stop()` ends them all."""

    def __init__(self, config: TeamBenchConfig, db: BenchDatabase) -> None:
        self.config, self.db = config, db
        self.tmp = Path(tempfile.mkdtemp(prefix="flywheel-bench-team-"))
        self.port, self.policy_port = free_port(), free_port()
        self.host = f"team{uuid.uuid4().hex[:6]}"
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.programs: dict[str, tuple[list[str], dict[str, str]]] = {}  # name -> (command, environment)
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        self.pool_roles: list[tuple[str, int]] = []  # (DB_POOL_ROLE, processes) of each program
        self.cpu_window: dict[str, float] = {}  # CPU seconds each program used in the window
        self.env = {
            **db.env,
            "REDIS_URL": redis_url(config.redis_db),
            "MEDIA_ROOT": str(self.tmp / "media"),
            "FLEET_REDIS_PREFIX": f"bench:fleet:{self.host}",
            "RL_REDIS_PREFIX": f"bench:rl:{self.host}",
            "RL_CHECKPOINT_ROOT": str(self.tmp / "rl"),
            "POLICY_BASE_URL": f"http://127.0.0.1:{self.policy_port}/v1",
            "PUBLIC_BASE_URL": self.base,
        }

    def manage(self, *args: str, **extra: str) -> str:
        out = subprocess.run([sys.executable, "manage.py", *args], env={**self.env, **extra},
                             cwd=settings.BASE_DIR, check=True, capture_output=True, text=True)  # fmt: skip
        return out.stdout

    def spawn(self, name: str, role: str, processes: int, priority: str, *cmd: str, **extra: str) -> None:
        """Start one of the stack's programs as up.sh starts it: in a session of its own at the CPU
        priority class up.sh gives it (webapp.priority, scripts/priority.sh), with its database pool
        role; its `processes` (a prefork worker's children) each hold a pool of that role's size."""
        self.pool_roles.append((role, processes))
        self.programs[name] = (prioritized(priority, list(cmd)), {**self.env, **extra, "DB_POOL_ROLE": role})
        self._launch(name)

    def _launch(self, name: str) -> None:
        cmd, env = self.programs[name]
        log = open(self.tmp / f"{name}.log", "ab")
        proc = subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        self.running[name] = proc

    def restart(self, names: list[str], timeout_s: float = 60.0) -> float:
        """SIGTERM the programs `names` (a Celery worker's warm shutdown: it finishes the tasks it
        runs and hands back the ones it reserved), wait for them to end, start them again as they
        were started; returns the seconds they were down."""
        t0 = time.monotonic()
        procs = [self.running[name] for name in names]
        stop_all(procs, timeout_s=timeout_s)
        self.procs = [p for p in self.procs if p not in procs]
        for name in names:
            self._launch(name)
        return time.monotonic() - t0

    def start(self) -> int:
        """Set up the people and tasks, start the processes; returns the pool's id."""
        redis.Redis.from_url(self.env["REDIS_URL"]).flushdb()
        self.manage("policy_init", "--promote")
        c = self.config
        params = {"copies": c.task_copies, "tasks": list(TASKS), "ann": c.annotators, "rev": c.reviewers,
                  "res": c.dashboards + 1, "password": PASSWORD}  # fmt: skip
        out = self.manage("shell", "-c", f"PARAMS = {json.dumps(params)!r}\n{_SETUP}")
        pool = int(json.loads(out.strip().splitlines()[-1])["pool"])
        web = [str(settings.BASE_DIR / "scripts" / "web.sh"), "--host", "127.0.0.1", "--port", str(self.port),
               "--no-access-log"]  # fmt: skip
        self.spawn("web", "web", 1, "interactive", *web, UVICORN=str(Path(sys.executable).parent / "uvicorn"))
        for name, queues, concurrency, priority in worker_sizes(c.annotators):
            self.spawn(f"worker-{name}", "worker", concurrency, priority, *CELERY, "worker", "-l", "warning", "-n", f"{name}-{self.host}@%h",
                       "-Q", queues, "-c", str(concurrency))  # fmt: skip
        self.spawn("beat", "command", 1, "normal", *CELERY, "beat", "-l", "warning", "--schedule",
                   str(self.tmp / "beat-schedule"))  # fmt: skip
        self.spawn("envhost", "envhost", 1, "interactive", *CELERY, "worker", "-l", "warning", "-n", f"{self.host}@%h", "-Q", f"env.{self.host}",
                   "-P", "threads", "-c", str(c.annotators + ROLLOUT_CONCURRENCY + 4), FLYWHEEL_ENV_HOST=self.host,
                   FLEET_WARM_POOL=f"browser={min(c.browsers, 4)}", FLEET_CAPACITY=f"browser={c.browsers}")  # fmt: skip
        self.spawn("policy", "command", 1, "interactive", sys.executable, "manage.py", "serve_policy", "--port",
                   str(self.policy_port))  # fmt: skip
        return pool

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by each program with its descendants (the env
        host's Chromium, a prefork worker's children); the runs' policy servers, which a worker
        starts, apart; and the bench's own process (the actors, standing in for the team's browsers)."""
        out: Counter[str] = Counter()
        for name, proc in self.running.items():
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(proc.pid)
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        server = "workers.policy.server" in " ".join(p.cmdline())
                        times = p.cpu_times()
                        out["run policy servers" if server else name] += times.user + times.system
        own = psutil.Process().cpu_times()
        out["bench actors"] = own.user + own.system
        return dict(out)

    def stop(self) -> None:
        stop_all(self.procs)

    def logs(self, lines: int = 20) -> str:
        return "\n".join(f"--- {p.name}\n" + "".join(p.read_text(errors="replace").splitlines(True)[-lines:])
                         for p in sorted(self.tmp.glob("*.log")))  # fmt: skip

    def error_lines(self) -> dict[str, int]:
        """Tracebacks in each process's log (a server-side failure the client may not see)."""
        return {p.stem: n for p in sorted(self.tmp.glob("*.log"))
                if (n := p.read_text(errors="replace").count("Traceback (most recent call last)"))}  # fmt: skip


async def _ready(stack: TeamStack, deadline: float) -> None:
    """Wait until the web server, the policy server, the env host's warm browsers and every worker
    answer."""
    warm = min(stack.config.browsers, 4)
    async with httpx.AsyncClient(timeout=10) as client:
        while True:
            try:
                web = (await client.get(f"{stack.base}/login/")).status_code == 200
                health = stack.env["POLICY_BASE_URL"].removesuffix("/v1") + "/health"  # open without its key
                model = (await client.get(health)).status_code == 200
            except httpx.HTTPError:
                web = model = False
            if web and model:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not come up\n{stack.logs()}")
            await asyncio.sleep(1.0)
    person = load.Person(stack.base, "res0", PASSWORD, load.Tally())
    await person.login()
    # and every worker consumes its queues (the fleet page's list): at background priority on a
    # loaded machine the train and rollout workers came up minutes after the rest, and a launch
    # before that is refused (the preflight needs them), which is start-up, not a team at work
    queues = {q for _, names, _, _ in worker_sizes(stack.config.annotators) for q in names.split(",")}
    while True:
        fleet = (await person.client.get("/api/fleet/")).json()
        consumed = {q["queue"] for q in fleet.get("queues") or [] if q.get("workers")}
        if (fleet.get("counts") or {}).get("idle", 0) >= warm and queues <= consumed:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the env host's browsers did not boot or {queues - consumed} has no worker\n{stack.logs()}"
            )
        await asyncio.sleep(2.0)
    await person.close()


def _speech(chunk_s: float) -> list[bytes]:
    """A few think-aloud chunks (espeak-ng speech padded to `chunk_s`, WebM/Opus as a browser sends)."""
    import numpy as np

    from workers.asr.audio import SAMPLE_RATE, encode_audio
    from workers.asr.synth import speak

    out = []
    for text in ("I click the button in the middle of the page", "now I look for the link at the top",
                 "this field should get the focus so I click it"):  # fmt: skip
        samples = np.zeros(int(chunk_s * SAMPLE_RATE), dtype=np.float32)
        voice = speak(text, "en-us", 170)[: samples.size]
        samples[: voice.size] = voice
        out.append(encode_audio(samples, "webm"))
    return out


def terminate_backends(db: BenchDatabase) -> int:
    """pg_terminate_backend every backend of the stack's role on the bench's database (the web
    process's, the workers', the env host's and the policy servers' pooled connections, idle or in a
    transaction); returns how many were terminated. The sampler's connection is to another database."""
    with psycopg.connect(database_url_of(db, "postgres"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
            [db.name],
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


ASR_WORKERS = ["worker-asr-live", "worker-asr"]


async def _chaos(stack: TeamStack, db: BenchDatabase, started: float, events: list[dict[str, Any]]) -> None:
    """The kill/restart journey (`--chaos`): at each planned share of the window, terminate every
    database backend of the stack ("pg") or SIGTERM the ASR workers and start them again ("asr")."""
    c = stack.config
    for what, share in sorted(c.chaos_plan, key=lambda x: x[1]):
        await asyncio.sleep(max(0.0, started + share * c.window_s - time.monotonic()))
        at = time.monotonic()
        event: dict[str, Any] = {"event": what, "at_s": round(at - started, 1), "monotonic": at}
        if what == "pg":
            event["backends_terminated"] = await asyncio.to_thread(terminate_backends, db)
        elif what == "asr":
            event["down_s"] = round(await asyncio.to_thread(stack.restart, ASR_WORKERS), 1)
        else:
            raise ValueError(f"unknown chaos event {what!r}")
        events.append(event)


async def _drive(stack: TeamStack, pool: int, tally: load.Tally, phases: dict[str, float],
                 events: list[dict[str, Any]]) -> None:  # fmt: skip
    """Sign everyone in and run the actors for the window; `phases` gets the stack's start-up time
    (`ready_s`) and the window's own length with the actors' wind-down (`window_s`)."""
    c = stack.config
    t0 = time.monotonic()
    await _ready(stack, time.monotonic() + c.ready_s)
    phases["ready_s"] = time.monotonic() - t0
    names = ([("ann", i) for i in range(c.annotators)] + [("rev", i) for i in range(c.reviewers)]
             + [("res", i) for i in range(c.dashboards + 1)])  # fmt: skip
    people = {f"{p}{i}": load.Person(stack.base, f"{p}{i}", PASSWORD, tally) for p, i in names}
    await asyncio.gather(*(p.login() for p in people.values()))
    speech = _speech(c.chunk_s)
    plan = load.AnnotatorPlan(think_s=c.think_s, steps=c.steps, candidates_wait_s=c.candidates_wait_s,
                              chunk_s=c.chunk_s, transcripts_wait_s=c.transcripts_wait_s)  # fmt: skip
    stop_at = time.monotonic() + c.window_s
    t0, cpu0 = time.monotonic(), stack.cpu_seconds()
    actors = [
        load.launch_runs(
            people["res0"],
            c.runs,
            pool,
            run_config(c),
            stop_at,
            c.second_run_after_s,
            c.second_run_by * c.window_s,
        )
    ]
    actors += [load.annotator(people[f"ann{i}"], plan, stop_at, speech if i % c.thinkaloud_every == 0 else None, i)
               for i in range(c.annotators)]  # fmt: skip
    actors += [load.reviewer(people[f"rev{i}"], stop_at, 1000 + i) for i in range(c.reviewers)]
    actors += [
        load.dashboard(people[f"res{i + 1}"], stop_at, i, c.export_every_s) for i in range(c.dashboards)
    ]
    if c.chaos:
        actors.append(_chaos(stack, stack.db, t0, events))
    try:
        await asyncio.gather(*actors)
    finally:
        for run in tally.runs:
            await people["res0"].call("POST", f"/api/rl/runs/{run['id']}/stop/")
        await asyncio.gather(*(p.close() for p in people.values()))
        phases["window_s"] = time.monotonic() - t0
        cpu = stack.cpu_seconds()  # a program restarted meanwhile (--chaos) counts from its restart
        used = {k: v - cpu0.get(k, 0.0) if v >= cpu0.get(k, 0.0) else v for k, v in cpu.items()}
        stack.cpu_window = {k: round(v, 1) for k, v in sorted(used.items(), key=lambda i: -i[1])}


class Sampler:
    """pg_stat_activity of the bench's database and the load average, every `every_s` in a thread."""

    def __init__(self, db: BenchDatabase, every_s: float = 0.5) -> None:
        self.db, self.every_s = db, every_s
        self.load_before = os.getloadavg()[0]  # set by the caller to the load before the stack started
        self.connections: list[int] = []
        self.load: list[float] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(database_url_of(self.db, "postgres"), autocommit=True) as conn:
            while not self.stopping.wait(self.every_s):
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.db.name])
                self.connections.append(int(row.fetchone()[0]))  # type: ignore[index]
                self.load.append(os.getloadavg()[0])

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)


def database_url_of(db: BenchDatabase, name: str | None = None) -> str:
    url = db.url.replace("postgres://", "postgresql://", 1)
    return url if name is None else url.rsplit("/", 1)[0] + f"/{name}"


def lost_steps(db: BenchDatabase, decisions: list[tuple[int, int, int]]) -> int:
    """Decisions answered 200 whose step is not stored exactly once, at its index, for its screen."""
    if not decisions:
        return 0
    with psycopg.connect(database_url_of(db)) as conn:
        rows = conn.execute(
            "SELECT s.trajectory_id, s.index, (s.decision_meta->>'obs_version')::int, count(*)"
            " FROM store_step s WHERE s.trajectory_id = ANY(%s) GROUP BY 1, 2, 3",
            [sorted({t for t, _, _ in decisions})],
        ).fetchall()
    stored = {(t, i, v): n for t, i, v, n in rows}
    return sum(1 for d in decisions if stored.get(d, 0) != 1)


def untranscribed_chunks(db: BenchDatabase) -> int:
    """Think-aloud chunks stored (their upload answered) that never got their live transcription."""
    with psycopg.connect(database_url_of(db)) as conn:
        row = conn.execute("SELECT count(*) FROM annotation_thinkaloudchunk WHERE NOT transcribed").fetchone()
    return int(row[0]) if row else 0


def figures(config: TeamBenchConfig, tally: load.Tally, sampler: Sampler, lost: int,
            server_errors: dict[str, int], pool_roles: list[tuple[str, int]],
            untranscribed: int | None = None, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    runs = tally.runs
    decide = percentile(tally.decide_ms, 0.95) if tally.decide_ms else None
    asr = percentile(tally.asr_lag_s, 0.95) if tally.asr_lag_s else None
    out: dict[str, Any] = {
        "http_5xx": tally.http_5xx,
        "http_no_answer": sum(tally.transport_errors.values()),
        "ws_errors": sum(tally.ws_errors.values()),
        "lost_steps": lost,
        "db_connections_max": max(sampler.connections, default=0),
        "db_pool_max": db_pool_max(pool_roles, len(runs)),
        "decide_p95_ms": round(decide, 1) if decide is not None else None,
        "second_run_first_episode_s": runs[1]["first_episode_s"] if len(runs) > 1 else None,
        "asr_lag_p95_s": round(asr, 2) if asr is not None else None,
        "annotators": config.annotators,
        "runs": config.runs,
        "load_avg": {
            "before": round(sampler.load_before, 2),
            "max": round(max(sampler.load, default=0.0), 2),
            "mean": round(sum(sampler.load) / len(sampler.load), 2) if sampler.load else None,
            "cores": os.cpu_count(),
        },
    }
    out["goals"] = GOALS
    out["met"] = met(out)
    return {
        **out,
        "http_5xx_by_endpoint": {k: n for k, n in sorted(tally.http.items()) if k.startswith("5")},
        "http_5xx_details": tally.failure_details,
        "http_answers": sum(tally.http.values()),
        "transport_errors": dict(tally.transport_errors),
        "ws_error_kinds": dict(tally.ws_errors),
        "server_tracebacks": server_errors,
        "decisions": len(tally.decisions),
        "decide_phases_ms": {name: {"p50": round(percentile(v, 0.5), 1), "p95": round(percentile(v, 0.95), 1)}
                             for name, v in sorted(tally.decide_phases_ms.items()) if v},
        "decide_p50_ms": round(percentile(tally.decide_ms, 0.5), 1) if tally.decide_ms else None,
        "asr_lag_p50_s": round(percentile(tally.asr_lag_s, 0.5), 2) if tally.asr_lag_s else None,
        "asr_chunks_transcribed": len(tally.asr_lag_s),
        "asr_chunks_without_transcript": tally.asr_pending,
        "asr_chunks_untranscribed": untranscribed,  # in the database, after the stack stopped
        **chaos_figures(tally, events or []),
        "runs_at_end": runs,  # first_episode_s from launch; waited_s: launch to the window's end
        "run_launch_refusals": tally.launch_refusals,  # the first answers of refused launches
        "counts": dict(tally.kinds),
        "http_by_status": dict(Counter(key.split(" ", 1)[0] for key in tally.http.elements())),
        "db_connections_mean": round(sum(sampler.connections) / len(sampler.connections), 1)
        if sampler.connections else None,
        "config": asdict(config),
    }  # fmt: skip


def team_figures(config: TeamBenchConfig) -> dict[str, Any]:
    """Start the stack, drive the team for the window, stop the stack, check the database."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    phases: dict[str, float] = {}
    t0, load_before = time.monotonic(), os.getloadavg()[0]  # the machine's load without the stack
    db = bench_database("team")
    stack = TeamStack(config, db)
    tally = load.Tally()
    events: list[dict[str, Any]] = []
    try:
        pool = stack.start()
        phases["setup_s"] = time.monotonic() - t0
        with Sampler(db) as sampler:
            sampler.load_before = load_before
            asyncio.run(_drive(stack, pool, tally, phases, events))
    except Exception as exc:
        raise RuntimeError(f"bench team failed: {exc}\n{stack.logs()}") from exc
    finally:
        t1 = time.monotonic()
        stack.stop()
        phases["stop_s"] = time.monotonic() - t1
    out = figures(config, tally, sampler, lost_steps(db, tally.decisions), stack.error_lines(), stack.pool_roles,
                  untranscribed_chunks(db), events)  # fmt: skip
    # what the stack itself used of the machine's cores in the window (the rest: other sessions' load)
    cpu = {"by_program_s": stack.cpu_window, "stack_s": round(sum(stack.cpu_window.values()), 1),
           "machine_s": round(phases.get("window_s", 0.0) * (os.cpu_count() or 1), 1)}  # fmt: skip
    return {**out, "cpu_in_window": cpu, "phases_s": {k: round(v, 1) for k, v in phases.items()},
            "logs": str(stack.tmp)}  # fmt: skip


def run_team(quick: bool, chaos: bool = False) -> dict[str, Any]:
    return team_figures(TeamBenchConfig.for_run(quick, chaos=chaos))
