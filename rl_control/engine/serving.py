"""A run's own policy serving (issue 19 item 1): the servers its rollouts sample from.

Embedded model (the default): the trainer task of the run starts `serving.servers` policy servers
(workers.policy.server, one process each, in their own session) on free ports of the trainer's
machine, with the weights the run serves now (its newest trainer save, else its start checkpoint),
and registers them on the run's `EngineState.servers`. Each server

- answers as model `run<id>` and labels what it serves `run<id>-v<n>`, so a sample names the run and
  version that made it (`keys.version_of` accepts nothing else);
- takes new weights only with the run's own secret (`EngineState.serve_secret`, handed to the
  process in its environment): no other run and no other caller can swap them;
- lives while its lifeline, the Redis key `<prefix>:run:<id>:serve:lifeline`, does: the trainer sets
  it, the rollouts and the `engine_watch` beat renew it while the run runs, and pause / stop / finish
  / fail delete it (`serving_stop`), so the servers exit within seconds wherever they run; a run that
  resumes gets fresh servers from its next trainer chunk.

External servers (vLLM, or an embedded server someone else runs): the run names them in
`serving.endpoints`; the engine samples from them and pushes weights to each with its own key
(`endpoint_secret`: derived from the run's secret and the URL, shown to researchers on the run's page
to configure the server with), never the annotation server's secret. Nothing is started or stopped
for them. A platform-owned server (the annotation model's, a registered model endpoint, any run's own
server, the web server, the VNC proxy, Redis, PostgreSQL) cannot be named (`platform_endpoint_problem`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from rl_control.engine.keys import key, rds
from rl_control.models import EngineState, Run
from webapp.priority import prioritized
from workers.policy.hf_vlm.lora import adapter_of
from workers.policy.openai_client import OpenAIClient
from workers.rl.run_config import ServingSettings

log = logging.getLogger(__name__)
LIFELINE_TTL_S = 45.0
# Server processes this worker process started (reaped when they exit, so none stays a zombie).
_children: dict[int, subprocess.Popen] = {}


class ServingError(RuntimeError):
    """The run's policy servers cannot be started or do not answer."""


def serving_settings(run: Run) -> ServingSettings:
    return ServingSettings.model_validate(run.config.get("serving") or {})


def external_urls(run: Run) -> list[str]:
    return serving_settings(run).urls()


def lora_models(run: Run) -> bool:
    """The run's endpoints are stock vLLM taking each version as a LoRA adapter named after it: a
    rollout asks for model `run<id>-v<n>` of the version it samples (its answer names it back)."""
    return bool(external_urls(run)) and serving_settings(run).endpoint_api == "vllm_lora"


def version_label(run_id: int, version: int) -> str:
    return f"run{run_id}-v{version}"


def root_of(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


# ------------------------------------------------------------------------------------ lifeline


def lifeline_key(run_id: int) -> str:
    return key(run_id, "serve", "lifeline")


def lifeline_set(run_id: int) -> None:
    rds().set(lifeline_key(run_id), f"{time.time():.0f}", ex=int(LIFELINE_TTL_S))


def lifeline_renew(run_id: int) -> bool:
    """Extend the lifeline if it exists (never brings back one a pause deleted); True if it did."""
    return bool(rds().set(lifeline_key(run_id), f"{time.time():.0f}", ex=int(LIFELINE_TTL_S), xx=True))


def serving_stop(run_id: int) -> None:
    """The run paused or ended: its own servers exit (their lifeline is gone) and are forgotten, so
    no rollout samples from them any more; a resumed run starts new ones."""
    rds().delete(lifeline_key(run_id))
    EngineState.objects.filter(run_id=run_id).update(servers=[])


# ------------------------------------------------------------------------------------- reading


def serving_urls(run: Run) -> list[str]:
    """The `…/v1` URLs the run's rollouts sample from now ([] while its own servers are starting)."""
    external = external_urls(run)
    if external:
        return external
    servers = EngineState.objects.filter(run=run).values_list("servers", flat=True).first() or []
    return [s["url"] for s in servers if s.get("url")]


def serving_current(run: Run, version: int) -> set[str]:
    """The run's own servers that serve `version` now (nothing to push to them)."""
    if external_urls(run):
        return set()
    secret = serving_key(run.pk, "")
    label = version_label(run.pk, version)
    return {url for url in serving_urls(run) if _served(url, run.pk, secret) == label}


def serving_key(run_id: int, url: str) -> str:
    """The key the run's clients send to `url`: an external endpoint's own (`endpoint_secret`), else
    the run's secret (its own servers answer nobody without it: completions, model card, weights)."""
    state = EngineState.objects.filter(run_id=run_id).first()
    if state is None:
        return ""
    if url and url in external_urls(state.run):
        return endpoint_secret(state, url)
    return state.serve_secret


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"} if secret else {}


def _served(url: str, run_id: int, secret: str, timeout_s: float = 3.0) -> str | None:
    """The version label `url` serves if it is one of run `run_id`'s own servers, else None."""
    try:
        response = httpx.get(f"{root_of(url)}/v1/models", headers=_auth(secret), timeout=timeout_s)
        cards = response.json().get("data") or [] if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    card = cards[0] if cards and isinstance(cards[0], dict) else {}
    return str(card.get("model_version", "")) if card.get("id") == f"run{run_id}" else None


def endpoint_answers(url: str, key: str = "", timeout_s: float = 5.0) -> str | None:
    """None when an OpenAI-compatible server answers `GET /v1/models` at `url` (with the endpoint's
    `key`, as vLLM `--api-key` asks it), else why not."""
    try:
        response = httpx.get(f"{root_of(url)}/v1/models", headers=_auth(key), timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{url} does not answer ({type(exc).__name__})"
    if response.status_code != 200:
        return f"{url} answered HTTP {response.status_code} to GET /v1/models"
    return None


# ------------------------------------------------------------------------------------- starting


def run_secret(state: EngineState) -> str:
    """The run's weights secret, made once (the first writer wins)."""
    if not state.serve_secret:
        EngineState.objects.filter(pk=state.pk, serve_secret="").update(serve_secret=secrets.token_hex(32))
        state.serve_secret = EngineState.objects.values_list("serve_secret", flat=True).get(pk=state.pk)
    return state.serve_secret


def endpoint_secret(state: EngineState, url: str) -> str:
    """The weights key of one external endpoint of the run: what its server must be started with
    (vLLM `--api-key`, our server's FLYWHEEL_POLICY_SECRET). Each endpoint of each run has its own,
    so a server a researcher controls learns no key that opens any other server."""
    digest = hmac.new(run_secret(state).encode(), f"endpoint {url.strip()}".encode(), hashlib.sha256)
    return digest.hexdigest()


def endpoint_secrets(run: Run) -> list[dict[str, str]]:
    """[{url, key}] of the run's external endpoints ([] for a run serving itself). The run's secret
    is made when the run is created (`run_secret_make`); a run made before then gets it at launch."""
    state = EngineState.objects.filter(run=run).exclude(serve_secret="").first()
    if state is None:
        return []
    return [{"url": url, "key": endpoint_secret(state, url)} for url in external_urls(run)]


def run_secret_make(run: Run) -> None:
    """Give a new run its secret now, so the keys of its endpoints can be shown before it launches."""
    state, _ = EngineState.objects.get_or_create(run=run)
    run_secret(state)


# ------------------------------------------------------------------ platform-owned endpoints


def _host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url if "://" in url else f"tcp://{url}")
        port = parts.port or {"https": 443, "http": 80, "ws": 80, "wss": 443}.get(parts.scheme)
    except ValueError:
        return None
    return (parts.hostname or "", port) if parts.hostname and port else None


def _addresses(host: str) -> set[str]:
    try:
        return {
            str(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
            for info in socket.getaddrinfo(host, None)
        }
    except (OSError, ValueError):
        return set()


def _is_local(addresses: set[str]) -> bool:
    """Any of `addresses` is this machine: loopback, 0.0.0.0 / ::, or one of its own addresses."""
    own = _addresses(socket.gethostname())
    return any(
        ipaddress.ip_address(a).is_loopback or ipaddress.ip_address(a).is_unspecified or a in own
        for a in addresses
    )


def _platform_servers() -> list[tuple[str, str]]:
    """(URL, what it is) of every server the platform owns."""
    from webapp.store.models import Checkpoint

    db = settings.DATABASES["default"]
    owned = [
        (settings.POLICY_BASE_URL, "the annotation model's policy server"),
        (settings.PUBLIC_BASE_URL, "this platform's web server"),
        (settings.VNC_PROXY_LISTEN, "the platform's VNC proxy"),
        (settings.REDIS_URL, "the platform's Redis"),
        (f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}", "the platform's PostgreSQL"),
    ]
    for version, url in Checkpoint.objects.exclude(endpoint_url="").values_list("version", "endpoint_url"):
        owned.append((url, f"the registered model server of checkpoint {version}"))
    for run_id, servers in EngineState.objects.exclude(servers=[]).values_list("run_id", "servers"):
        owned += [(s["url"], f"run {run_id}'s own policy server") for s in servers if s.get("url")]
    return owned


def platform_endpoint_problem(url: str) -> str | None:
    """Why `url` may not be a run's endpoint (it is a server the platform owns), or None.

    Hosts compare by address (a name, 127.0.0.1, localhost and this machine's own addresses are all
    this machine), ports exactly. Pushing weights there would hand that server the run's key and let
    the run sample from (or replace) a model it does not own."""
    mine = _host_port(url)
    if mine is None:
        return None
    addresses = _addresses(mine[0])
    local = _is_local(addresses)
    for owned_url, what in _platform_servers():
        theirs = _host_port(owned_url)
        if theirs is None or theirs[1] != mine[1]:
            continue
        their_addresses = _addresses(theirs[0])
        same_host = theirs[0] == mine[0] or bool(addresses & their_addresses)
        if same_host or (local and _is_local(their_addresses)):
            return f"{url} is {what}: a run's endpoints must be servers of its own"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((settings.RL_POLICY_BIND, 0))
        return int(s.getsockname()[1])


def _reap() -> None:
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            _children.pop(pid, None)


def _spawn(run_id: int, index: int, checkpoint: Path, label: str, secret: str) -> tuple[dict[str, Any], Path]:
    var = Path(settings.VAR_DIR)
    name = f"policy-run{run_id}-{index}"
    log_path = var / "log" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    lora = adapter_of(checkpoint)  # a LoRA version: the base plus its adapter (later ones swap in)
    served = (
        ["--checkpoint", str(lora[0]), "--adapter", str(lora[1])]
        if lora
        else ["--checkpoint", str(checkpoint)]
    )
    args = [
        sys.executable, "-m", "workers.policy.server", *served,
        "--host", settings.RL_POLICY_BIND, "--port", str(port), "--model-name", f"run{run_id}",
        "--version-label", label, "--threads", str(settings.RL_POLICY_THREADS),
        "--lifeline-key", lifeline_key(run_id),
        # `make down` stops whatever has a pid file in var/run (the server removes it when it exits).
        "--pid-file", str(var / "run" / f"{name}.pid"),
    ]  # fmt: skip
    env = {
        **os.environ,
        "FLYWHEEL_POLICY_SECRET": secret,
        "FLYWHEEL_LIFELINE_REDIS": settings.REDIS_URL,
        "OMP_NUM_THREADS": str(settings.RL_POLICY_THREADS),
    }
    with open(log_path, "ab") as out:  # training's servers yield the CPU to annotators (background)
        proc = subprocess.Popen(prioritized("background", args), env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=settings.BASE_DIR)  # fmt: skip
    _children[proc.pid] = proc
    entry = {"url": f"http://{settings.RL_POLICY_HOST}:{port}/v1", "host": socket.gethostname(),
             "pid": proc.pid, "started": time.time()}  # fmt: skip
    return entry, log_path


def _wait_up(entries: list[tuple[dict[str, Any], Path]], run_id: int, label: str, secret: str) -> list[str]:
    """Wait for freshly started servers; returns the problems of those that did not come up."""
    deadline = time.monotonic() + settings.RL_POLICY_START_S
    pending = list(entries)
    problems: list[str] = []
    while pending and time.monotonic() < deadline:
        for item in list(pending):
            entry, log_path = item
            if _served(entry["url"], run_id, secret, timeout_s=2.0) == label:
                pending.remove(item)
                continue
            proc = _children.get(entry["pid"])
            if proc is not None and proc.poll() is not None:
                pending.remove(item)
                tail = log_path.read_text(errors="replace")[-800:] if log_path.exists() else ""
                problems.append(f"the policy server for {entry['url']} exited ({proc.returncode}): {tail}")
        time.sleep(0.25)
    problems += [f"the policy server at {e['url']} did not answer within {settings.RL_POLICY_START_S:.0f} s"
                 for e, _ in pending]  # fmt: skip
    return problems


def serving_ensure(run: Run, state: EngineState, checkpoint: Path, version: int) -> set[str]:
    """Make sure the run's servers answer; start those that do not with `checkpoint` as version
    `version`. Returns the URLs started now (they serve `checkpoint` already). Raises ServingError.
    One caller at a time per run (the launch's `serving_start` and the trainer may both ask)."""
    with rds().lock(key(run.pk, "serve:lock"), timeout=600.0, blocking_timeout=600.0):
        return _serving_ensure(run, state, checkpoint, version)


def _serving_ensure(run: Run, state: EngineState, checkpoint: Path, version: int) -> set[str]:
    if external_urls(run):
        for url in external_urls(run):
            if problem := endpoint_answers(url, endpoint_secret(state, url)):
                raise ServingError(f"policy endpoint {problem}")
        return set()
    _reap()
    lifeline_set(run.pk)
    secret = run_secret(state)
    label = version_label(run.pk, version)
    wanted = serving_settings(run).servers
    current = list(EngineState.objects.values_list("servers", flat=True).get(pk=state.pk) or [])
    keep: list[dict[str, Any]] = []
    for entry in current[:wanted]:
        if _served(entry.get("url", ""), run.pk, secret) is not None:
            keep.append(entry)
    started: set[str] = set()
    for attempt in range(2):  # a second try covers a port taken between choosing and binding it
        fresh = [_spawn(run.pk, len(keep) + i, checkpoint, label, secret) for i in range(wanted - len(keep))]
        problems = _wait_up(fresh, run.pk, label, secret)
        for entry, _ in fresh:
            if _served(entry["url"], run.pk, secret) == label:
                keep.append(entry)
                started.add(entry["url"])
        if len(keep) >= wanted:
            break
        if attempt == 1:
            raise ServingError("; ".join(problems) or "the run's policy servers did not start")
    EngineState.objects.filter(pk=state.pk).update(servers=keep)
    state.servers = keep
    return started


def serving_push(
    run: Run, state: EngineState, path: Path, version: int, *, skip: frozenset[str] | set[str] = frozenset()
) -> float:
    """Load `path` as version `version` on every server of the run, one after the other (seed 002
    §3.5), with the run's secret; seconds taken. A server that died is started again with it.

    A LoRA version goes as its adapter (`/v1/load_lora_adapter`: the base stays loaded), else the
    whole directory (`/v1/load_weights`); external endpoints take what `serving.endpoint_api` says."""
    started = time.perf_counter()
    external = external_urls(run)
    urls = external or [s["url"] for s in state.servers]
    label = version_label(run.pk, version)
    vllm_lora = lora_models(run)
    lost = False
    for url in urls:
        if url in skip:
            continue
        secret = endpoint_secret(state, url) if external else run_secret(state)
        client = OpenAIClient(root_of(url), api_key=secret, max_retries=1)
        try:
            if vllm_lora:
                _push_vllm_lora(client, run.pk, path, version)
            else:
                _push(client, path, label, lora=not external)
        except Exception as exc:
            if external:
                raise ServingError(f"policy endpoint {url} refused the weights: {exc}") from exc
            log.warning("run %s: policy server %s did not take version %s (%s); starting it again",
                        run.pk, url, version, exc)  # fmt: skip
            lost = True
        finally:
            client.close()
    if lost:
        serving_ensure(run, state, path, version)
    return time.perf_counter() - started


def _push(client: OpenAIClient, path: Path, label: str, *, lora: bool) -> None:
    """Our server: the adapter alone when the version has one and the server's base is its base
    (a 400 says it is not: the whole merged directory then), else the whole directory."""
    from workers.policy.openai_client import OpenAIHTTPError

    parts = adapter_of(path) if lora else None
    if parts is not None:
        try:
            client.load_lora_adapter(label, str(parts[1]))
            return
        except OpenAIHTTPError as exc:
            if exc.status != 400:
                raise
            log.info("%s: %s; loading the merged weights", label, exc.message)
    client.load_weights(str(path), version=label)


def _push_vllm_lora(client: OpenAIClient, run_id: int, path: Path, version: int) -> None:
    """Stock vLLM (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): the version's adapter is
    loaded as model `run<id>-v<n>` (the rollouts ask for that model, and vLLM names it in its answer,
    which is how a sample knows its version); the one before the previous is unloaded, so a rollout
    still sampling from the previous version finishes."""
    from workers.policy.openai_client import OpenAIHTTPError

    parts = adapter_of(path)
    if parts is None:
        raise ServingError(
            f"{path} holds no LoRA adapter: vLLM's runtime LoRA loading needs vlm.lora_rank > 0"
        )
    client.load_lora_adapter(version_label(run_id, version), str(parts[1]))
    if version >= 2:
        try:
            client.unload_lora_adapter(version_label(run_id, version - 2))
        except OpenAIHTTPError as exc:
            if exc.status not in (400, 404):  # never loaded here (a server added later): nothing to drop
                raise
