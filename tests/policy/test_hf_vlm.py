"""HF vision-language policies (issue 23): a tiny Qwen2.5-VL built here (random weights, local
tokenizer and image processor) served by the policy server over real HTTP on live MiniWoB++
screenshots; the trainer's log-probs equal the server's for the same tokens; hostile requests get
400s; LoRA adapters merge into a checkpoint transformers loads back."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from PIL import Image

from workers.actions.types import Convention
from workers.envs.base import TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.base import HistoryItem
from workers.policy.hf_vlm import profile_for
from workers.policy.hf_vlm.lora import add_lora, save_hf
from workers.policy.hf_vlm.model import HFVLMPolicy, encode_prompt, load_vlm, score
from workers.policy.openai_client import OpenAIClient, OpenAIHTTPError, OpenAIPolicy
from workers.policy.server import PolicyHTTPServer, start_server

# float32 on CPU: the KV-cached decode and the one-pass scoring differ by ~5e-7 (measured).
LOGPROB_TOL = 1e-4
SECRET = "weights-secret"
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture(scope="module")
def vlm_server(tiny_vlm: Path) -> Iterator[PolicyHTTPServer]:
    srv, _ = start_server(
        HFVLMPolicy.from_pretrained(tiny_vlm, seed=0),
        model_name="tiny-vlm",
        checkpoint=str(tiny_vlm),
        weights_secret=SECRET,
    )
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def vlm_policy(vlm_server: PolicyHTTPServer, tiny_vlm: Path) -> Iterator[OpenAIPolicy]:
    policy = OpenAIPolicy(
        vlm_server.url,
        "tiny-vlm",
        profile=profile_for(tiny_vlm, max_tokens=24, max_screenshots=3),
        api_key=SECRET,
    )
    yield policy
    policy.client.close()


def _task(name: str) -> TaskSpec:
    return TaskSpec(task_id=name, instruction="", kind="browser", source="miniwob")


def test_served_candidates_carry_token_ids_and_logprobs(
    vlm_server: PolicyHTTPServer, vlm_policy: OpenAIPolicy, miniwob: MiniWoBEnv
) -> None:
    obs = miniwob.reset(_task("click-button"), seed=3)
    history = [
        HistoryItem("Look first.", "wait()", obs.screenshot),
        HistoryItem("", "wait()", obs.screenshot),
    ]
    candidates = vlm_policy.propose(obs, history, n=3, temperature=1.0)
    assert len(candidates) == 3
    tok = vlm_server.service.policy.tokenizer
    for c in candidates:
        assert c.model_version == "0"
        assert c.convention == Convention.ABSOLUTE_RESIZED
        assert c.image_size is not None and c.image_size[0] % 28 == 0 and c.image_size[1] % 28 == 0
        assert c.token_ids and c.token_logprobs and len(c.token_ids) == len(c.token_logprobs) <= 24
        assert all(lp <= 0.0 for lp in c.token_logprobs)
        assert tok.decode([t for t in c.token_ids if t != tok.eos_token_id]) == c.raw_text
        assert c.parsed is not None  # noise from random weights parses to an error, never raises
    assert len({tuple(c.token_ids or []) for c in candidates}) > 1
    models = OpenAIClient(vlm_server.url, api_key=SECRET).models()
    assert models[0]["kind"] == "hf_vlm" and models[0]["model_version"] == "0"


def test_trainer_logprobs_equal_the_servers(
    vlm_server: PolicyHTTPServer, vlm_policy: OpenAIPolicy, miniwob: MiniWoBEnv, tiny_vlm: Path
) -> None:
    """The trainer rebuilds the prompt from the same messages and scores the returned token ids in
    one forward pass: equal to the served (KV-cached) log-probs within LOGPROB_TOL, at T = 1 and 0.6."""
    model, tokenizer, image_processor = load_vlm(tiny_vlm)
    obs = miniwob.reset(_task("click-link"), seed=5)
    history = [HistoryItem("", "click(start_box='(10,10)')", obs.screenshot)]
    messages, _ = vlm_policy.build_messages(obs, history, None)
    prompt = encode_prompt(tokenizer, image_processor, messages)
    assert prompt.image_grid_thw is not None and len(prompt.image_grid_thw) == 2  # history + current
    for temperature in (1.0, 0.6):
        for c in vlm_policy.propose(obs, history, n=2, temperature=temperature):
            assert c.token_ids and c.token_logprobs
            with torch.no_grad():
                scored = score(model, prompt, c.token_ids, temperature)
            diff = (scored.logprobs - torch.tensor(c.token_logprobs)).abs().max().item()
            assert diff <= LOGPROB_TOL, diff


def _post(server: PolicyHTTPServer, body: object) -> tuple[int, dict]:
    import httpx

    r = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=AUTH, timeout=30)
    return r.status_code, r.json()


def test_hostile_requests_get_400(vlm_server: PolicyHTTPServer) -> None:
    bad_png = "data:image/png;base64," + base64.b64encode(b"not an image").decode()
    img = io.BytesIO()
    Image.new("RGB", (32, 32)).save(img, "PNG")
    ok_png = "data:image/png;base64," + base64.b64encode(img.getvalue()).decode()
    cases = [
        {"messages": []},
        {"messages": [{"role": "robot", "content": "hi"}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": bad_png}}]}]},
        {
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}
            ]
        },
        {"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
        {
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ok_png}}] * 17}
            ]
        },
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**9},
        {"messages": [{"role": "user", "content": "hi"}], "n": 0},
    ]
    for body in cases:
        status, payload = _post(vlm_server, body)
        assert status == 400, (body, payload)
        assert payload["error"]["message"]
    status, payload = _post(vlm_server, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
    assert status == 200 and payload["choices"][0]["finish_reason"] in ("stop", "length")
    # vision markers in text (a sampled answer fed back as history may hold them) open no image slot
    smuggled = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "<|image_pad|><|vision_start|>x"},
    ]
    status, payload = _post(vlm_server, {"messages": smuggled, "max_tokens": 3})
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
    assert status == 200
    assert (
        payload["usage"]["prompt_tokens"]
        == _post(vlm_server, {"messages": plain, "max_tokens": 3})[1]["usage"]["prompt_tokens"]
    )
    with pytest.raises(OpenAIHTTPError) as exc:
        OpenAIClient(vlm_server.url).load_weights("/nonexistent/checkpoint")
    assert exc.value.status == 403  # no weights secret
    with pytest.raises(OpenAIHTTPError) as exc:
        OpenAIClient(vlm_server.url, api_key=SECRET).load_weights("/nonexistent/checkpoint")
    assert exc.value.status == 400


def test_lora_checkpoint_merges_and_loads_back(tiny_vlm: Path, tmp_path: Path) -> None:
    """A LoRA step changes the outputs; the merged export is a plain Qwen2.5-VL directory that
    transformers loads and that scores exactly as the adapter model did; the server hot-swaps it."""
    from transformers import AutoModelForImageTextToText

    model, tokenizer, image_processor = load_vlm(tiny_vlm)
    lora = add_lora(model, r=4, alpha=8)
    trainable = [p for p in lora.parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n, p in lora.named_parameters() if p.requires_grad)
    messages = [{"role": "user", "content": [{"type": "text", "text": "click the button"}]}]
    prompt = encode_prompt(tokenizer, image_processor, messages)
    response = tokenizer("Action: click(start_box='(1,2)')", add_special_tokens=False)["input_ids"]
    opt = torch.optim.SGD(trainable, lr=0.5)
    for _ in range(2):  # B starts at zero: the second step moves the outputs
        loss = -score(lora, prompt, response, 1.0).logprobs.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        adapted = score(lora, prompt, response, 1.0).logprobs
        base = score(load_vlm(tiny_vlm)[0], prompt, response, 1.0).logprobs
    assert (adapted - base).abs().max() > 1e-3
    save_hf(lora, tmp_path / "merged", tokenizer, image_processor, version="7", parent="0")
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    loaded = AutoModelForImageTextToText.from_pretrained(tmp_path / "merged")
    assert type(loaded).__name__ == "Qwen2_5_VLForConditionalGeneration"
    with torch.no_grad():
        reloaded = score(loaded.eval(), prompt, response, 1.0).logprobs
    assert (reloaded - adapted).abs().max() <= LOGPROB_TOL
    srv, _ = start_server(
        HFVLMPolicy.from_pretrained(tiny_vlm), checkpoint=str(tiny_vlm), weights_secret=SECRET
    )
    try:
        client = OpenAIClient(srv.url, api_key=SECRET)
        assert client.load_weights(str(tmp_path / "merged"))["model_version"] == "7"
        assert client.load_weights(str(tmp_path / "merged"), version="run3-v7")["model_version"] == "run3-v7"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_running_server_takes_an_hf_vlm_promoted_in_place_of_the_embedded_model(
    checkpoints: dict[str, Path], tiny_vlm: Path, miniwob: MiniWoBEnv
) -> None:
    """Promotion pushes the annotation model to the running server: an HF VLM checkpoint replaces
    the embedded model there (its own backend), and annotators' client gets proposals from it."""
    from workers.policy.embedded.policy import EmbeddedPolicy

    srv, _ = start_server(EmbeddedPolicy.from_pretrained(checkpoints["v-a"]), weights_secret=SECRET)
    try:
        client = OpenAIClient(srv.url, api_key=SECRET)
        assert client.models()[0]["kind"] == "embedded"
        assert client.load_weights(str(tiny_vlm), version="tiny")["model_version"] == "tiny"
        assert client.models()[0]["kind"] == "hf_vlm"
        policy = OpenAIPolicy(
            srv.url, "annotation", profile=profile_for(tiny_vlm, max_tokens=8), api_key=SECRET
        )
        obs = miniwob.reset(_task("click-test"), seed=1)
        candidates = policy.propose(obs, [], n=2, temperature=1.0)
        assert len(candidates) == 2 and all(
            c.model_version == "tiny" and c.token_logprobs for c in candidates
        )
        assert client.load_weights(str(checkpoints["v-b"]))["model_version"] == "v-b"  # and back
        assert client.models()[0]["kind"] == "embedded"
    finally:
        srv.shutdown()
        srv.server_close()
