"""The embedded policy server and the OpenAI-compatible client over real HTTP, on live MiniWoB++
observations from Chromium: candidates with parsed actions, log-probs, token ids and the model
version; hot weight swaps; checkpoints that load back with transformers; clear errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from workers.envs.base import TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.base import HistoryItem, PolicyError
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.openai_client import (
    EMBEDDED,
    OpenAIClient,
    OpenAIHTTPError,
    OpenAIPolicy,
    OpenAIUnavailable,
)
from workers.policy.server import PolicyHTTPServer, start_server

SECRET = "s3cret-weights"


def _task(name: str) -> TaskSpec:
    return TaskSpec(task_id=name, instruction="", kind="browser", source="miniwob")


@pytest.fixture(scope="module")
def server(checkpoints: dict[str, Path]) -> Iterator[PolicyHTTPServer]:
    policy = EmbeddedPolicy.from_pretrained(checkpoints["v-a"], seed=0)
    srv, _ = start_server(policy, checkpoint=str(checkpoints["v-a"]), weights_secret=SECRET)
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def client_policy(server: PolicyHTTPServer) -> Iterator[OpenAIPolicy]:
    policy = OpenAIPolicy(f"{server.url}/", "flywheel-embedded", profile=EMBEDDED, api_key=SECRET)
    yield policy
    policy.client.close()


def test_kept_alive_responses_come_without_waiting_for_a_delayed_ack(server: PolicyHTTPServer) -> None:
    """A response's headers and body are two writes: with Nagle's algorithm the body waited for the
    client's delayed ACK of the headers, so once the connection left quick-ACK mode (after a few
    requests) every response took at least 40 ms (Linux's minimum delayed-ACK time)."""
    with httpx.Client(base_url=server.url) as http:
        elapsed = []
        for _ in range(30):
            started = time.perf_counter()
            assert http.get("/health").status_code == 200
            elapsed.append(time.perf_counter() - started)
    assert sorted(elapsed)[len(elapsed) // 2] < 0.03, elapsed


def test_four_candidates_for_a_live_miniwob_observation(
    server: PolicyHTTPServer, client_policy: OpenAIPolicy, miniwob: MiniWoBEnv, checkpoints: dict[str, Path]
) -> None:
    server.service.load_weights({"path": str(checkpoints["v-a"])})
    obs = miniwob.reset(_task("click-button"), seed=11)
    assert obs.elements and obs.screenshot[:2] == b"\xff\xd8"  # live JPEG with its element list
    history = [HistoryItem("Look at the buttons.", "wait()", obs.screenshot)]
    candidates = client_policy.propose(obs, history, n=4, temperature=1.0)
    assert len(candidates) == 4
    tok = server.service.policy.tokenizer
    for c in candidates:
        assert c.model_version == "v-a"
        assert c.parsed.ok, c.raw_text  # grammar-constrained decoding always parses
        assert c.raw_text.startswith("Thought: ") and f"\nAction: {c.action_text}" in c.raw_text
        assert c.token_ids is not None and c.token_ids[-1] == tok.eos_id
        assert tok.decode(c.token_ids) == c.raw_text
        assert c.token_logprobs is not None and len(c.token_logprobs) == len(c.token_ids)
        assert all(lp <= 0.0 for lp in c.token_logprobs)
        assert c.logprob_sum == pytest.approx(sum(c.token_logprobs))
        assert c.image_size == (160, 210)
    # an untrained model at T=1 does not produce four identical answers
    assert len({c.raw_text for c in candidates}) > 1


def test_http_and_in_process_agree_at_temperature_zero(
    server: PolicyHTTPServer, client_policy: OpenAIPolicy, miniwob: MiniWoBEnv, checkpoints: dict[str, Path]
) -> None:
    server.service.load_weights({"path": str(checkpoints["v-a"])})
    obs = miniwob.reset(_task("click-link"), seed=4)
    remote = client_policy.propose(obs, [], n=2, temperature=0.0)
    local = EmbeddedPolicy.from_pretrained(checkpoints["v-a"]).propose(obs, [], n=1, temperature=0.0)[0]
    assert remote[0].raw_text == remote[1].raw_text == local.raw_text
    assert remote[0].token_ids == local.token_ids
    assert remote[0].token_logprobs == pytest.approx(local.token_logprobs, abs=1e-4)


def test_load_weights_changes_the_reported_version(
    server: PolicyHTTPServer, client_policy: OpenAIPolicy, miniwob: MiniWoBEnv, checkpoints: dict[str, Path]
) -> None:
    client = OpenAIClient(server.url, api_key=SECRET)
    client.load_weights(str(checkpoints["v-a"]))
    obs = miniwob.reset(_task("click-test"), seed=2)
    assert {c.model_version for c in client_policy.propose(obs, [], n=4)} == {"v-a"}
    swapped = client.load_weights(str(checkpoints["v-b"]))
    assert swapped["model_version"] == "v-b" and swapped["path"] == str(checkpoints["v-b"])
    assert {c.model_version for c in client_policy.propose(obs, [], n=4)} == {"v-b"}
    models = client.models()
    assert models[0]["model_version"] == "v-b" and models[0]["root"] == str(checkpoints["v-b"])
    # a bad path is refused with the server's reason and leaves the loaded model alone
    with pytest.raises(OpenAIHTTPError) as err:
        client.load_weights(str(checkpoints["v-b"] / "missing"))
    assert err.value.status == 400 and "config.json missing" in err.value.message
    assert client.models()[0]["model_version"] == "v-b"
    # a label names what is served (an RL run's "run<id>-v<n>"), swapped together with the weights
    assert client.load_weights(str(checkpoints["v-a"]), version="run3-v7")["model_version"] == "run3-v7"
    assert {c.model_version for c in client_policy.propose(obs, [], n=2)} == {"run3-v7"}
    client.close()


def test_load_weights_needs_the_servers_secret(
    server: PolicyHTTPServer, checkpoints: dict[str, Path]
) -> None:
    before = OpenAIClient(server.url, api_key=SECRET).models()[0]["model_version"]
    for key in (None, "wrong", SECRET + "x"):
        with pytest.raises(OpenAIHTTPError) as err:
            OpenAIClient(server.url, api_key=key, max_retries=0).load_weights(str(checkpoints["v-b"]), "evil")
        assert err.value.status == 403 and "secret" in err.value.message
    assert OpenAIClient(server.url, api_key=SECRET).models()[0]["model_version"] == before  # nothing swapped
    # a server started without a secret takes no weights at all
    policy = EmbeddedPolicy.from_pretrained(checkpoints["v-a"], seed=0)
    bare, _ = start_server(policy, checkpoint=str(checkpoints["v-a"]))
    try:
        with pytest.raises(OpenAIHTTPError) as err:
            OpenAIClient(bare.url, api_key="", max_retries=0).load_weights(str(checkpoints["v-b"]))
        assert err.value.status == 403
    finally:
        bare.shutdown()
        bare.server_close()


def test_checkpoints_load_back_with_transformers(checkpoints: dict[str, Path]) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    import workers.policy.embedded  # noqa: F401  (registers the Auto classes)
    from workers.policy.embedded.modeling import FlywheelPolicyModel

    config = AutoConfig.from_pretrained(checkpoints["v-b"])
    assert config.model_type == "flywheel_policy" and config.flywheel_version == "v-b"
    model = AutoModelForCausalLM.from_pretrained(checkpoints["v-b"])
    assert isinstance(model, FlywheelPolicyModel)
    assert (checkpoints["v-b"] / "model.safetensors").is_file()
    original = EmbeddedPolicy.from_pretrained(checkpoints["v-b"]).model.state_dict()
    loaded = model.state_dict()
    assert original.keys() == loaded.keys()
    assert all(torch.equal(original[k], loaded[k]) for k in original)
    other = EmbeddedPolicy.from_pretrained(checkpoints["v-a"]).model.state_dict()
    assert not all(torch.equal(original[k], other[k]) for k in original)


def test_server_answers_bad_requests_with_400_and_its_reason(
    server: PolicyHTTPServer, client_policy: OpenAIPolicy
) -> None:
    client = OpenAIClient(server.url, api_key=SECRET, max_retries=0)
    try:
        with pytest.raises(OpenAIHTTPError) as err:
            client.chat([{"role": "user", "content": "x"}], "m", n=0)
        assert err.value.status == 400 and "'n' must be an integer" in err.value.message
        with pytest.raises(OpenAIHTTPError, match="non-empty list"):
            client.chat([], "m")
        with pytest.raises(OpenAIHTTPError) as err:
            client.chat([{"role": "user", "content": "x"}], "m", thought_temperature=0)
        assert err.value.status == 400 and "'thought_temperature' must be a number" in err.value.message
        with pytest.raises(OpenAIHTTPError) as err:
            client.request("GET", "/v1/nothing")
        assert err.value.status == 404
    finally:
        client.close()


# --- a scripted OpenAI-compatible server for failure modes -------------------------------------


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next (status, body, headers) from `script` (the last repeats)."""

    daemon_threads = True

    def __init__(self, script: list[tuple[int, Any, dict[str, str]]]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), ScriptedHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ScriptedHandler(BaseHTTPRequestHandler):
    server: Scripted
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.server.requests.append(json.loads(self.rfile.read(length) or b"{}"))
        index = min(len(self.server.requests), len(self.server.script)) - 1
        status, body, headers = self.server.script[index]
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def start(script: list[tuple[int, Any, dict[str, str]]]) -> Scripted:
        srv = Scripted(script)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _completion(*texts: str, version: str = "ext-1") -> dict[str, Any]:
    return {
        "model": "ui-tars",
        "system_fingerprint": version,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25}]},
            }
            for i, text in enumerate(texts)
        ],
    }


def test_transient_errors_are_retried_with_backoff(scripted, miniwob: MiniWoBEnv) -> None:
    good = _completion("Thought: ok\nAction: click(start_box='(10,20)')")
    srv = scripted(
        [(503, {"error": {"message": "warming up"}}, {}), (429, {}, {"Retry-After": "0"}), (200, good, {})]
    )
    client = OpenAIClient(srv.url, max_retries=3, backoff_s=0.01)
    policy = OpenAIPolicy(srv.url, "ui-tars", client=client)
    obs = miniwob.reset(_task("click-test"), seed=1)
    [candidate] = policy.propose(obs, [], n=1)
    client.close()
    assert len(srv.requests) == 3
    assert candidate.model_version == "ext-1" and candidate.parsed.ok
    assert candidate.token_logprobs == [-0.5, -0.25] and candidate.logprob_sum == -0.75
    assert candidate.token_ids is None  # plain token strings, not "token_id:N"
    body = srv.requests[-1]
    assert body["n"] == 1 and body["logprobs"] is True and body["model"] == "ui-tars"
    # UI-TARS 1.5 receives the smart-resized screenshot as a base64 data URL
    assert body["messages"][-1]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_persistent_5xx_and_unreachable_servers_raise_unavailable(scripted) -> None:
    srv = scripted([(502, {"error": "bad gateway"}, {})])
    client = OpenAIClient(srv.url, max_retries=2, backoff_s=0.01)
    with pytest.raises(OpenAIUnavailable, match=r"after 3 attempts: HTTP 502: bad gateway"):
        client.chat([{"role": "user", "content": "x"}], "m")
    assert len(srv.requests) == 3
    client.close()

    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIClient(f"http://127.0.0.1:{port}", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(OpenAIUnavailable, match="ConnectError"):
        client.models()
    client.close()


def test_client_errors_are_not_retried(scripted) -> None:
    srv = scripted([(400, {"error": {"message": "n too large"}}, {})])
    client = OpenAIClient(srv.url, max_retries=3, backoff_s=0.01)
    with pytest.raises(OpenAIHTTPError, match="HTTP 400: n too large"):
        client.chat([{"role": "user", "content": "x"}], "m", n=99)
    assert len(srv.requests) == 1
    client.close()


def test_malformed_model_output(scripted, miniwob: MiniWoBEnv) -> None:
    obs = miniwob.reset(_task("click-test"), seed=1)
    # text that is not a valid action: a candidate with the grammar's error, never an exception
    srv = scripted([(200, _completion("I would click the button", "Action: click(start_box='(1,"), {})])
    policy = OpenAIPolicy(srv.url, "ui-tars", client=OpenAIClient(srv.url, max_retries=0))
    bad = policy.propose(obs, [], n=2)
    assert [c.parsed.ok for c in bad] == [False, False]
    assert all(c.parsed.error is not None and str(c.parsed.error) for c in bad)
    policy.client.close()
    # replies that are not completions at all raise PolicyError with what came back
    for body, message in [(b"<html>oops</html>", "non-JSON"), ({"object": "list"}, "no choices")]:
        srv = scripted([(200, body, {})])
        policy = OpenAIPolicy(srv.url, "ui-tars", client=OpenAIClient(srv.url, max_retries=0))
        with pytest.raises(PolicyError, match=message):
            policy.propose(obs, [], n=1)
        policy.client.close()
