"""Runtime LoRA loading in our policy server (issue 23): a LoRA-trained version of the tiny
Qwen2.5-VL is pushed as its adapter alone (vLLM's `/v1/load_lora_adapter` contract) while the base
stays loaded; the served log-probs equal the merged checkpoint's; adapters of another base, missing
directories and callers without the weights secret are refused; `--adapter` starts a server with one."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from PIL import Image

from workers.policy.hf_vlm.lora import adapter_base, adapter_of
from workers.policy.hf_vlm.model import HFVLMPolicy, encode_prompt, load_vlm, score
from workers.policy.hf_vlm.tiny import build_tiny_checkpoint
from workers.policy.openai_client import OpenAIClient, OpenAIHTTPError
from workers.policy.prompts import data_url
from workers.policy.server import PolicyHTTPServer, start_server
from workers.rl.config import RLConfig
from workers.rl.trainer.vlm import VLMPolicyTrainer

SECRET = "lora-secret"
LOGPROB_TOL = 1e-4


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The base and two LoRA versions saved by the VLM trainer (adapters moved off zero)."""
    root = tmp_path_factory.mktemp("lora")
    base = build_tiny_checkpoint(root / "base", seed=0)
    trainer = VLMPolicyTrainer(base, RLConfig.model_validate({"algorithm": "grpo"}), vlm={"lora_rank": 4})
    out = {"base": base}
    torch.manual_seed(0)
    for v in (1, 2):
        with torch.no_grad():
            for name, p in trainer.model.named_parameters():
                if "lora_B" in name:
                    p.add_(torch.randn_like(p) * 0.2)
        trainer.save(root / f"v{v}", v)
        out[f"v{v}"] = root / f"v{v}"
    return out


@pytest.fixture
def server(versions: dict[str, Path]) -> Iterator[PolicyHTTPServer]:
    srv, _ = start_server(
        HFVLMPolicy.from_pretrained(versions["base"], seed=0), model_name="run1",
        checkpoint=str(versions["base"]), weights_secret=SECRET,
    )  # fmt: skip
    yield srv
    srv.shutdown()
    srv.server_close()


def _messages() -> list[dict]:
    out = io.BytesIO()
    Image.new("RGB", (160, 210), (200, 40, 40)).save(out, "PNG")
    return [{"role": "user", "content": [{"type": "text", "text": "Click OK."},
             {"type": "image_url", "image_url": {"url": data_url(out.getvalue(), "png")}}]}]  # fmt: skip


def test_a_version_is_served_as_its_adapter_on_the_loaded_base(
    server: PolicyHTTPServer, versions: dict[str, Path]
) -> None:
    parts = adapter_of(versions["v2"])
    assert parts is not None and parts[0] == versions["base"].resolve()
    assert Path(adapter_base(parts[1])).resolve() == versions["base"].resolve()
    base_model = server.service.policy.model
    client = OpenAIClient(server.url, api_key=SECRET)
    try:
        for v in ("v1", "v2"):
            answer = client.load_lora_adapter(f"run1-{v}", str(versions[v] / "adapter"))
            assert answer["model_version"] == f"run1-{v}" and answer["swap_ms"] > 0
        served = server.service.policy.model
        assert served.get_base_model() is base_model  # the base was never reloaded
        assert len(served.peft_config) == 1  # the previous adapter was dropped
        card = client.models()[0]
        assert card["model_version"] == "run1-v2" and card["adapter"].endswith("v2/adapter")
        body = client.chat(_messages(), "run1", n=1, temperature=1.0, max_tokens=12,
                           return_tokens_as_token_ids=True).body  # fmt: skip
    finally:
        client.close()
    content = body["choices"][0]["logprobs"]["content"]
    ids = [int(t["token"].split(":")[1]) for t in content]
    assert body["model_version"] == "run1-v2"
    # the merged directory (what vLLM or a full reload would serve) gives the same log-probs
    model, tokenizer, image_processor = load_vlm(versions["v2"])
    with torch.no_grad():
        merged = score(model, encode_prompt(tokenizer, image_processor, _messages()), ids, 1.0).logprobs
    assert (merged - torch.tensor([t["logprob"] for t in content])).abs().max() < LOGPROB_TOL


def test_adapter_loading_refuses_what_does_not_fit(
    server: PolicyHTTPServer, versions: dict[str, Path], tmp_path: Path
) -> None:
    url = f"{server.url}/v1/load_lora_adapter"
    body = {"lora_name": "x", "lora_path": str(versions["v1"] / "adapter")}
    assert httpx.post(url, json=body).status_code == 403  # no weights secret
    auth = {"Authorization": f"Bearer {SECRET}"}
    missing = httpx.post(url, json={"lora_name": "x", "lora_path": str(tmp_path)}, headers=auth)
    assert missing.status_code == 400 and "adapter_config.json" in missing.json()["error"]["message"]
    assert httpx.post(url, json={"lora_path": str(tmp_path)}, headers=auth).status_code == 400
    other = tmp_path / "other"
    shutil.copytree(versions["v1"] / "adapter", other)
    config = json.loads((other / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "another-base")
    (other / "adapter_config.json").write_text(json.dumps(config))
    refused = httpx.post(url, json={"lora_name": "x", "lora_path": str(other)}, headers=auth)
    assert refused.status_code == 400 and "trained on" in refused.json()["error"]["message"]
    gone = httpx.post(f"{server.url}/v1/unload_lora_adapter", json={"lora_name": "nope"}, headers=auth)
    assert gone.status_code == 404
    assert OpenAIClient(server.url, api_key=SECRET).models()[0]["model_version"] == "0"  # nothing changed


def test_the_server_starts_with_an_adapter(versions: dict[str, Path]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "workers.policy.server", "--checkpoint", str(versions["base"]),
            "--adapter", str(versions["v1"] / "adapter"), "--version-label", "run1-v1", "--port", str(port),
            "--threads", "1"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "FLYWHEEL_POLICY_SECRET"}
    # Without a key (and without --open) the server does not start: it would answer every account.
    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "FLYWHEEL_POLICY_SECRET is not set" in refused.stderr
    proc = subprocess.Popen(argv, env={**env, "FLYWHEEL_POLICY_SECRET": SECRET},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # loading the VLM and its adapter on a busy 2-core machine
        while time.monotonic() < deadline:
            try:
                card = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2,
                                 headers={"Authorization": f"Bearer {SECRET}"}).json()["data"][0]  # fmt: skip
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                time.sleep(0.5)
        else:
            pytest.fail("the server did not come up")
        assert card["model_version"] == "run1-v1" and card["adapter"].endswith("v1/adapter")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_embedded_model_takes_no_adapter(checkpoints: dict[str, Path], versions: dict[str, Path]) -> None:
    from workers.policy.embedded.policy import EmbeddedPolicy

    srv, _ = start_server(EmbeddedPolicy.from_pretrained(checkpoints["v-a"]), weights_secret=SECRET)
    try:
        with pytest.raises(OpenAIHTTPError, match="no LoRA adapters"):
            OpenAIClient(srv.url, api_key=SECRET).load_lora_adapter("x", str(versions["v1"] / "adapter"))
    finally:
        srv.shutdown()
        srv.server_close()
