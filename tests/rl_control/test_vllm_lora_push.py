"""Weights to stock vLLM (issue 23): a run with `serving.endpoint_api = "vllm_lora"` pushes each
LoRA version to its endpoints as vLLM's runtime LoRA load and its rollouts ask for the version by
name.

vLLM itself cannot run on this machine (no GPU; its CPU build is not installed), so the endpoint
here is a small local HTTP server that checks requests against vLLM's documented contract only —
`POST /v1/load_lora_adapter` / `/v1/unload_lora_adapter` with `{"lora_name", "lora_path"}`
(docs/features/lora.md, `LoadLoRAAdapterRequest`), the adapter directory as vLLM's loader reads it
(peft's adapter_config.json, tensors named `base_model.model.<module>.lora_A|lora_B.weight` on
modules vLLM's Qwen2.5-VL takes LoRA on), duplicate names refused, unknown names 404, chat
completions naming the requested model. It is a fake of vLLM, allowed only because vLLM cannot run
here; everything of ours (trainer saves, engine push, rollout client) is real."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open

from rl_control.engine import serving
from rl_control.engine.keys import version_of
from rl_control.engine.rollout import policy_for
from rl_control.models import EngineState, Run
from workers.envs.base import Observation
from workers.policy.hf_vlm import profile_for
from workers.policy.hf_vlm.tiny import build_tiny_checkpoint
from workers.rl.config import RLConfig
from workers.rl.trainer.vlm import VLMPolicyTrainer

pytestmark = pytest.mark.django_db

# vLLM's Qwen2.5-VL LoRA targets (packed as qkv_proj / gate_up_proj from these HF names)
VLLM_LORA_MODULES = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


class VLLMContract(BaseHTTPRequestHandler):
    """Checks the shape of what reaches a stock vLLM (see the module docstring); no model runs."""

    server: Any
    protocol_version = "HTTP/1.1"

    def _reply(self, status: int, payload: Any, text: bool = False) -> None:
        data = (payload if text else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._reply(
            status, {"object": "error", "message": message, "type": "BadRequestError", "code": status}
        )

    def do_GET(self) -> None:
        names = ["base", *self.server.loaded]
        self._reply(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body))
        if self.path == "/v1/load_lora_adapter":
            self._load(body)
        elif self.path == "/v1/unload_lora_adapter":
            if body.get("lora_name") not in self.server.loaded:
                self._error(404, f"The lora adapter '{body.get('lora_name')}' cannot be found.")
                return
            del self.server.loaded[body["lora_name"]]
            self._reply(200, f"Success: LoRA adapter '{body['lora_name']}' removed successfully.", text=True)
        elif self.path == "/v1/chat/completions":
            model = body.get("model")
            if model != "base" and model not in self.server.loaded:
                self._error(404, f"The model `{model}` does not exist.")
                return
            token = {"token": "token_id:5", "logprob": -0.5, "bytes": [65], "top_logprobs": []}
            choice = {"index": 0, "message": {"role": "assistant", "content": "Action: wait()"},
                      "finish_reason": "stop", "logprobs": {"content": [token]}}  # fmt: skip
            self._reply(200, {"id": "x", "object": "chat.completion", "model": model, "choices": [choice],
                              "system_fingerprint": None})  # fmt: skip
        else:
            self._error(404, "Not Found")

    def _load(self, body: dict[str, Any]) -> None:
        if set(body) - {"lora_name", "lora_path", "load_inplace"} or not all(
            isinstance(body.get(k), str) and body[k] for k in ("lora_name", "lora_path")
        ):
            self._error(400, "Both 'lora_name' and 'lora_path' must be provided.")
            return
        name, path = body["lora_name"], Path(body["lora_path"])
        if name in self.server.loaded:
            self._error(400, f"The lora adapter '{name}' has already been loaded.")
            return
        problem = adapter_problem(path)
        if problem:
            self._error(400, f"Loading lora {name} failed: {problem}")
            return
        self.server.loaded[name] = str(path)
        self._reply(200, f"Success: LoRA adapter '{name}' added successfully.", text=True)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def adapter_problem(path: Path) -> str:
    """What vLLM's LoRA loader would refuse in an adapter directory, "" when nothing."""
    try:
        config = json.loads((path / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return "No adapter found"
    if (
        config.get("peft_type") != "LORA"
        or not isinstance(config.get("r"), int)
        or "lora_alpha" not in config
    ):
        return f"not a LoRA adapter config: {config}"
    tensors = path / "adapter_model.safetensors"
    if not tensors.is_file():
        return "adapter_model.safetensors missing"
    with safe_open(str(tensors), framework="pt") as f:
        keys = list(f.keys())
    for key in keys:
        parts = key.split(".")
        if (
            parts[:2] != ["base_model", "model"]
            or parts[-1] != "weight"
            or parts[-2] not in ("lora_A", "lora_B")
        ):
            return f"{key} is unsupported LoRA weight"
        if parts[-3] not in VLLM_LORA_MODULES:
            return f"expected target modules in {sorted(VLLM_LORA_MODULES)} but received {parts[-3]}"
    return "" if keys else "no LoRA weights"


@pytest.fixture
def vllm() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), VLLMContract)
    srv.loaded, srv.requests = {}, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown()
    srv.server_close()


def test_lora_versions_reach_stock_vllm_and_rollouts_ask_for_them(make_run, vllm, tmp_path: Path) -> None:
    run = make_run(name="vllm", config={"serving": {"endpoints": vllm.url, "endpoint_api": "vllm_lora"},
                                        "vlm": {"lora_rank": 4}})  # fmt: skip
    state, _ = EngineState.objects.get_or_create(run=run)  # run_create made it (the endpoint keys)
    assert serving.lora_models(run) and serving.endpoint_answers(vllm.url) is None
    base = build_tiny_checkpoint(tmp_path / "base", seed=0)
    trainer = VLMPolicyTrainer(base, RLConfig.model_validate({"algorithm": "grpo"}), vlm={"lora_rank": 4})
    for version in range(4):
        with torch.no_grad():
            for name, p in trainer.model.named_parameters():
                if "lora_B" in name and version:
                    p.add_(0.1)
        trainer.save(tmp_path / f"v{version}", version)
        assert serving.serving_push(run, state, tmp_path / f"v{version}", version) >= 0
    label = serving.version_label
    assert set(vllm.loaded) == {label(run.pk, 2), label(run.pk, 3)}  # two kept: in-flight rollouts finish
    loads = [b for p, b in vllm.requests if p == "/v1/load_lora_adapter"]
    assert loads == [{"lora_name": label(run.pk, v), "lora_path": str(tmp_path / f"v{v}" / "adapter")}
                     for v in range(4)]  # fmt: skip
    # a rollout asks for the version it samples by name, and the answer's model names it back
    policy = policy_for(vllm.url, run.pk, profile_for(base, max_tokens=8))
    policy.model = label(run.pk, 3)
    obs = Observation(screenshot=_png(), width=160, height=210, instruction="go", image_format="png")
    candidate = policy.propose(obs, [], n=1)[0]
    assert version_of(run.pk, candidate.model_version) == 3 and candidate.token_ids == [5]
    policy.client.close()


def test_vllm_lora_push_refuses_full_weights(make_run, vllm, tmp_path: Path) -> None:
    run = make_run(name="vllm-full", config={"serving": {"endpoints": vllm.url, "endpoint_api": "vllm_lora"}})
    state, _ = EngineState.objects.get_or_create(run=run)  # run_create made it (the endpoint keys)
    base = build_tiny_checkpoint(tmp_path / "base", seed=0)
    with pytest.raises(serving.ServingError, match="lora_rank > 0"):
        serving.serving_push(run, state, base, 0)
    assert vllm.loaded == {}
    Run.objects.filter(pk=run.pk).delete()


def _png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (160, 210), (10, 120, 30)).save(out, "PNG")
    return out.getvalue()
