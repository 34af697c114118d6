"""The team's load on a running stack (`bench team`, benchmarks/team.py): asyncio actors that do
what the people do, through the same REST calls and websockets as the pages, each signed in through
the login form (session cookie + CSRF), every answer counted in one `Tally`.

- annotators: start the next assigned session, keep its websocket open (heartbeats, as the page
  does), and per step think, then accept a candidate, edit it into their own click, or override;
  finish (or submit when the environment is done); some think aloud (audio chunks uploaded during
  the episode, the live transcript awaited on the socket);
- reviewers: take the next trajectory, read it, submit a verdict for every step;
- dashboards (researchers): watch a run's page (its websocket, and the run and metrics reads the
  page makes), and export the store now and then (an export job, and the streamed export);
- the runs' researcher: launches the runs through the API, the second once the first has episodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets

ACCEPTABLE = {"click", "hover", "type", "key", "scroll", "drag", "hotkey"}  # not wait(), not finished()


@dataclass
class Tally:
    """Everything the actors saw. `decisions`: (trajectory, step index, obs_version) of every
    decision the API answered 200, to be found stored exactly once afterwards."""

    http: Counter[str] = field(default_factory=Counter)  # "<status> <METHOD> <path with <id>>"
    transport_errors: Counter[str] = field(default_factory=Counter)
    ws_errors: Counter[str] = field(default_factory=Counter)
    decide_ms: list[float] = field(default_factory=list)
    decide_phases_ms: dict[str, list[float]] = field(default_factory=dict)  # Server-Timing, and "outside"
    decisions: list[tuple[int, int, int]] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)  # decisions by kind, sessions, reviews, exports
    asr_lag_s: list[float] = field(default_factory=list)
    asr_pending: int = 0  # chunks uploaded whose transcript never came
    runs: list[dict[str, Any]] = field(default_factory=list)  # id, launched_at, first_episode_s
    launch_refusals: list[str] = field(default_factory=list)  # the first few refused launches' answers
    failures_at: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, what): 5xx, no answer
    failure_details: dict[str, list[str]] = field(default_factory=dict)  # the first answers of each 5xx kind

    def count(self, response: httpx.Response) -> None:
        path = re.sub(r"/\d+", "/<id>", response.request.url.path)
        what = f"{response.status_code} {response.request.method} {path}"
        self.http[what] += 1
        if response.status_code >= 500:
            self.failures_at.append((time.monotonic(), what))
            if len(said := self.failure_details.setdefault(what, [])) < 3:
                with contextlib.suppress(httpx.ResponseNotRead):  # a streamed answer: no body kept
                    said.append(response.text[:300])

    @property
    def http_5xx(self) -> int:
        return sum(n for key, n in self.http.items() if key.startswith("5"))


class Person:
    """One signed-in user: an httpx client with the session cookie, and its websockets."""

    def __init__(self, base: str, username: str, password: str, tally: Tally) -> None:
        self.base, self.username, self.password, self.tally = base, username, password, tally
        # Idle connections are dropped before uvicorn's 5 s keep-alive ends them: a request sent on a
        # connection the server is closing at that instant gets no answer (a browser retries it).
        self.client = httpx.AsyncClient(base_url=base, timeout=120, limits=httpx.Limits(keepalive_expiry=3.0))
        self.headers: dict[str, str] = {}

    async def login(self) -> None:
        page = await self.client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if token is None:
            raise RuntimeError(f"no login form at {self.base}/login/")
        await self.client.post("/login/", data={"username": self.username, "password": self.password,
                                                "csrfmiddlewaretoken": token.group(1)},
                               headers={"Referer": f"{self.base}/login/"})  # fmt: skip
        if "sessionid" not in self.client.cookies:
            raise RuntimeError(f"sign-in as {self.username} failed")
        self.headers = {"X-CSRFToken": self.client.cookies.get("csrftoken") or "", "Referer": f"{self.base}/"}

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """One request; None when it got no answer (counted as a transport error)."""
        try:
            headers = {**self.headers, **kwargs.pop("headers", {})}
            response = await self.client.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            what = f"{method} {re.sub(r'/[0-9]+', '/<id>', path)}: {type(exc).__name__}"
            self.tally.transport_errors[what] += 1
            self.tally.failures_at.append((time.monotonic(), f"no answer {what}"))
            return None
        self.tally.count(response)
        return response

    def socket(self, path: str) -> Any:
        cookie = "; ".join(f"{k}={v}" for k, v in self.client.cookies.items())
        url = self.base.replace("http", "ws", 1) + path
        return websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": self.base},
                                  max_size=None, open_timeout=60)  # fmt: skip

    async def close(self) -> None:
        await self.client.aclose()


def _json(response: httpx.Response | None) -> Any:
    if response is None:
        return None
    try:
        return response.json()
    except ValueError:
        return None


# ------------------------------------------------------------------ annotators


class SessionSocket:
    """An annotation session's websocket, read in the background: the candidates per screen version,
    the think-aloud chunks transcribed, errors and unexpected closes counted; a heartbeat every 10 s."""

    def __init__(self, ws: Any, tally: Tally) -> None:
        self.ws, self.tally = ws, tally
        self.candidates: dict[int, dict[str, Any]] = {}
        self.changed = asyncio.Event()
        self.uploaded: dict[int, float] = {}  # chunk index -> when its upload was answered
        self.closing = False
        self.tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._beat())]

    def _candidates(self, version: int, status: str, items: list[dict[str, Any]]) -> None:
        if status in ("ready", "failed"):
            self.candidates[version] = {"status": status, "items": items}

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "error":
                    self.tally.ws_errors[f"annotation: {message.get('detail')}"] += 1
                elif kind == "annotation.state":
                    c = message["state"]["candidates"]
                    self._candidates(c["obs_version"], c["status"], c.get("items") or [])
                elif kind == "annotation.candidates":
                    self._candidates(message["obs_version"], message.get("status", "ready"),
                                     message.get("candidates") or [])  # fmt: skip
                elif kind == "annotation.thinkaloud":
                    self._transcribed(message["state"])
                self.changed.set()
        except websockets.ConnectionClosed as exc:
            if not self.closing:
                self.tally.ws_errors[
                    f"annotation socket closed: {exc.rcvd.code if exc.rcvd else 'no code'}"
                ] += 1

    def _transcribed(self, state: dict[str, Any]) -> None:
        for chunk in state.get("chunks") or []:
            sent = self.uploaded.pop(chunk["index"], None)
            if sent is not None and chunk.get("transcribed"):
                self.tally.asr_lag_s.append(time.monotonic() - sent)
            elif sent is not None:
                self.uploaded[chunk["index"]] = sent

    async def _beat(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                await asyncio.sleep(10)
                await self.ws.send(json.dumps({"type": "heartbeat"}))

    async def wait_candidates(self, version: int, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while version not in self.candidates and time.monotonic() < deadline:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), max(0.01, deadline - time.monotonic()))
        return self.candidates.get(version)

    async def close(self, transcripts_wait_s: float) -> None:
        """Close once the uploaded chunks' transcripts are in (or `transcripts_wait_s` passed)."""
        deadline = time.monotonic() + transcripts_wait_s
        while self.uploaded and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        self.tally.asr_pending += len(self.uploaded)
        self.closing = True
        for task in self.tasks[1:]:
            task.cancel()
        await self.ws.close()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def _decision(rng: random.Random, candidates: dict[str, Any] | None, obs: dict[str, Any]) -> dict[str, Any]:
    """What an annotator decides: accept a candidate that executes (60 %), edit one into a click
    of their own (20 %), or override (the rest, and whenever no candidate is usable)."""
    w, h = int(obs.get("width") or 160), int(obs.get("height") or 210)
    own = f"click(start_box='({rng.randrange(10, max(11, w - 10))},{rng.randrange(60, max(61, h - 10))})')"
    usable = [
        c for c in (candidates or {}).get("items") or []
        if not c.get("parse_error") and c.get("actions")
        and all(a.get("kind") in ACCEPTABLE for a in c["actions"])
    ]  # fmt: skip
    roll = rng.random()
    if usable and roll < 0.6:
        return {"kind": "accept", "index": usable[0]["index"]}
    if usable and roll < 0.8 and usable[0].get("convention") == "screen":
        return {"kind": "edit", "index": usable[0]["index"], "thought": "Aim at this instead.",
                "action_text": own}  # fmt: skip
    return {"kind": "override", "thought": "I click here.", "action_text": own, "convention": "screen"}


@dataclass(frozen=True)
class AnnotatorPlan:
    think_s: tuple[float, float]
    steps: tuple[int, int]
    candidates_wait_s: float
    chunk_s: float
    transcripts_wait_s: float


async def annotator(person: Person, plan: AnnotatorPlan, stop_at: float, speech: list[bytes] | None,
                    seed: int) -> None:  # fmt: skip
    rng = random.Random(seed)
    while time.monotonic() < stop_at:
        started = await person.call("POST", "/api/annotation/sessions/", json={})
        state = _json(started)
        if started is None or started.status_code != 201 or not state:
            await asyncio.sleep(2.0)
            continue
        person.tally.kinds["sessions"] += 1
        try:
            async with person.socket(f"/ws/annotation/sessions/{state['id']}/") as ws:
                sock = SessionSocket(ws, person.tally)
                talk = asyncio.create_task(_think_aloud(person, state["id"], sock, plan, speech, rng))
                try:
                    await _episode(person, state, sock, plan, stop_at, rng)
                finally:
                    talk.cancel()
                    await asyncio.gather(talk, return_exceptions=True)
                    if speech:
                        await person.call(
                            "POST", f"/api/annotation/sessions/{state['id']}/thinkaloud/finish/"
                        )
                    await sock.close(plan.transcripts_wait_s if speech else 0.0)
        except (OSError, websockets.InvalidHandshake, TimeoutError) as exc:
            person.tally.ws_errors[f"annotation connect: {type(exc).__name__}"] += 1
            await person.call("POST", f"/api/annotation/sessions/{state['id']}/abandon/")


async def _episode(person: Person, state: dict[str, Any], sock: SessionSocket, plan: AnnotatorPlan,
                   stop_at: float, rng: random.Random) -> None:  # fmt: skip
    sid, tid = state["id"], state["trajectory_id"]
    url = f"/api/annotation/sessions/{sid}/decide/"
    obs = state["observation"]
    for _ in range(rng.randint(*plan.steps)):
        await asyncio.sleep(rng.uniform(*plan.think_s))
        if time.monotonic() >= stop_at:
            break
        candidates = await sock.wait_candidates(obs["obs_version"], plan.candidates_wait_s)
        body = {**_decision(rng, candidates, obs), "obs_version": obs["obs_version"]}
        answer = await _decide(person, url, body, tid)
        if answer is not None and answer.status_code == 400 and body["kind"] != "override":
            body = {**_decision(rng, None, obs), "obs_version": obs["obs_version"]}  # it did not execute
            answer = await _decide(person, url, body, tid)
        result = _json(answer)
        if answer is None or answer.status_code != 200 or not result:
            return
        if result["done"]:
            if result["state"]["observation"].get("env_done"):  # not closed by our own finish
                await person.call("POST", f"/api/annotation/sessions/{sid}/submit/")
            person.tally.kinds["episodes_done"] += 1
            return
        obs = result["state"]["observation"]
    body = {"kind": "finish", "answer": "", "thought": "Done.", "obs_version": obs["obs_version"]}
    if (answer := await _decide(person, url, body, tid)) is not None and answer.status_code == 200:
        person.tally.kinds["episodes_finished"] += 1


async def _decide(person: Person, url: str, body: dict[str, Any], trajectory: int) -> httpx.Response | None:
    t0 = time.perf_counter()
    answer = await person.call("POST", url, json=body)
    if answer is not None and answer.status_code == 200:
        took = (time.perf_counter() - t0) * 1000
        person.tally.decide_ms.append(took)
        phases = server_timing(answer.headers.get("Server-Timing", ""))
        phases["outside"] = took - sum(phases.values())  # the request's wait in the web server, the network
        for name, ms in phases.items():
            person.tally.decide_phases_ms.setdefault(name, []).append(ms)
        person.tally.decisions.append((trajectory, int(answer.json()["step"]), int(body["obs_version"])))
        person.tally.kinds[f"decide_{body['kind']}"] += 1
    return answer


def server_timing(header: str) -> dict[str, float]:
    """{name: ms} of a Server-Timing header ("env;dur=12.5, store;dur=3")."""
    out: dict[str, float] = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";")
        found = re.search(r"dur=([0-9.]+)", rest)
        if name and found:
            out[name] = float(found.group(1))
    return out


async def _think_aloud(person: Person, sid: int, sock: SessionSocket, plan: AnnotatorPlan,
                       speech: list[bytes] | None, rng: random.Random) -> None:  # fmt: skip
    """Upload a chunk of speech every `chunk_s` while the episode lasts (as MediaRecorder does)."""
    if not speech:
        return
    began = time.monotonic()
    for index in range(100_000):
        await asyncio.sleep(plan.chunk_s)
        start = max(0.0, time.monotonic() - began - plan.chunk_s)
        answer = await person.call(
            "PUT", f"/api/annotation/sessions/{sid}/thinkaloud/chunks/{index}/?start_clock={start:.2f}",
            content=rng.choice(speech), headers={"Content-Type": "audio/webm"},
        )  # fmt: skip
        if answer is not None and answer.status_code in (200, 201):
            sock.uploaded[index] = time.monotonic()
            person.tally.kinds["chunks"] += 1


# ------------------------------------------------------------------ reviewers


async def reviewer(person: Person, stop_at: float, seed: int) -> None:
    rng = random.Random(seed)
    while time.monotonic() < stop_at:
        taken = _json(await person.call("POST", "/api/review/take/", json={}))
        if not taken or "review_id" not in taken:
            await person.call("GET", "/api/review/queue/")
            await asyncio.sleep(3.0)
            continue
        data = _json(await person.call("GET", f"/api/review/trajectories/{taken['trajectory_id']}/"))
        steps = int(((data or {}).get("trajectory") or {}).get("num_steps") or 0)
        await asyncio.sleep(rng.uniform(2.0, 5.0))
        verdict = "approve" if rng.random() < 0.8 else "reject"
        answer = await person.call("POST", f"/api/review/reviews/{taken['review_id']}/submit/", json={
            "verdict": verdict, "comment": "",
            "step_verdicts": [{"index": i, "verdict": "approve", "comment": ""} for i in range(steps)],
        })  # fmt: skip
        if answer is not None and answer.status_code == 200:
            person.tally.kinds["reviews"] += 1


# ------------------------------------------------------------------ researchers


async def dashboard(person: Person, stop_at: float, which: int, export_every_s: float) -> None:
    """Watch run `which` (of those launched) on its page; export every `export_every_s`."""
    next_export = time.monotonic() + export_every_s * (0.3 + 0.1 * which)
    while time.monotonic() < stop_at:
        runs = person.tally.runs
        if not runs:
            await person.call("GET", "/api/rl/runs/")
            await asyncio.sleep(3.0)
            continue
        run_id = runs[which % len(runs)]["id"]
        try:
            async with person.socket(f"/ws/rl/runs/{run_id}/") as ws:
                reader = asyncio.create_task(_watch(ws, person.tally))
                while time.monotonic() < stop_at and not reader.done():
                    await person.call("GET", f"/api/rl/runs/{run_id}/")
                    await person.call("GET", f"/api/rl/runs/{run_id}/metrics/",
                                      params={"names": "outcome/reward_mean", "points": 500})  # fmt: skip
                    if time.monotonic() >= next_export:
                        await _export(person, stop_at)
                        next_export = time.monotonic() + export_every_s
                    await asyncio.sleep(5.0)
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        except (OSError, websockets.InvalidHandshake, TimeoutError) as exc:
            person.tally.ws_errors[f"run connect: {type(exc).__name__}"] += 1
            await asyncio.sleep(2.0)


async def _watch(ws: Any, tally: Tally) -> None:
    try:
        async for raw in ws:
            message = json.loads(raw)
            if message.get("type") == "error":
                tally.ws_errors[f"run: {message.get('detail')}"] += 1
            tally.kinds["run_messages"] += 1
    except websockets.ConnectionClosed as exc:
        tally.ws_errors[f"run socket closed: {exc.rcvd.code if exc.rcvd else 'no code'}"] += 1


async def _export(person: Person, stop_at: float) -> None:
    """An export job of everything (JSONL), followed to its end; then the streamed export."""
    job = _json(await person.call("POST", "/api/export-jobs/", json={"format": "jsonl", "filters": {}}))
    if job and "id" in job:
        while time.monotonic() < stop_at + 60:
            row = _json(await person.call("GET", f"/api/export-jobs/{job['id']}/")) or {}
            if row.get("status") in ("succeeded", "failed", "cancelled"):
                person.tally.kinds[f"export_{row['status']}"] += 1
                break
            await asyncio.sleep(2.0)
    try:
        async with person.client.stream("GET", "/api/trajectories/export", params={"format": "jsonl"}) as r:
            async for _ in r.aiter_bytes():
                pass
            person.tally.count(r)
    except httpx.HTTPError as exc:
        person.tally.transport_errors[f"GET /api/trajectories/export: {type(exc).__name__}"] += 1


async def launch_runs(person: Person, count: int, pool: int, run_config: dict[str, Any], stop_at: float,
                      next_after_s: float, next_by_s: float) -> None:  # fmt: skip
    """Launch `count` runs through the API: the first at once, each next one `next_after_s` after
    the previous one's first finished episode (so it launches while that one trains), or
    `next_by_s` after the previous launch if that comes first; note when each gets its first."""
    for k in range(count):
        body = {"name": f"team run {k + 1}", "preset": "grpo-dart", "pool": pool, "launch": True,
                "config": run_config}  # fmt: skip
        while time.monotonic() < stop_at:
            launched_at = time.monotonic()
            answer = await person.call("POST", "/api/rl/runs/", json=body)
            if answer is not None and answer.status_code == 201:
                person.tally.runs.append({"id": answer.json()["id"], "launched_at": launched_at,
                                          "first_episode_s": None})  # fmt: skip
                break
            if answer is not None and len(person.tally.launch_refusals) < 3:
                person.tally.launch_refusals.append(f"{answer.status_code} {answer.text[:300]}")
            await asyncio.sleep(5.0)  # the preflight refuses while the env host boots
        if k + 1 < count:
            by = min(stop_at, time.monotonic() + next_by_s)
            if await _first_episodes(person, by):
                await asyncio.sleep(next_after_s)
    await _first_episodes(person, stop_at)
    for run in person.tally.runs:  # how long those without an episode waited: a lower bound
        run["waited_s"] = round(time.monotonic() - run.pop("launched_at"), 1)
        row = _json(await person.call("GET", f"/api/rl/runs/{run['id']}/")) or {}
        run.update({k: row.get(k) for k in ("status", "episodes_done", "updates_done", "error")})


async def _first_episodes(person: Person, until: float) -> bool:
    """Poll the launched runs until each has its first finished episode (or `until`)."""
    while time.monotonic() < until:
        waiting = [r for r in person.tally.runs if r["first_episode_s"] is None]
        for run in waiting:
            row = _json(await person.call("GET", f"/api/rl/runs/{run['id']}/")) or {}
            if int(row.get("episodes_done") or 0) > 0:
                run["first_episode_s"] = round(time.monotonic() - run["launched_at"], 1)
        if not waiting:
            return True
        await asyncio.sleep(1.0)
    return False
