"""Serve a policy checkpoint over the OpenAI-compatible API vLLM speaks (SPEC §7).

    python -m workers.policy.server --checkpoint DIR --port P [--host 127.0.0.1]

One server, one protocol, two backends chosen by the checkpoint's config.json: the embedded model
(`model_type` "flywheel_policy") and any Hugging Face vision-language checkpoint of the Qwen2.5-VL
family (UI-TARS-1.5, Qwen2.5-VL, the tiny one of workers.policy.hf_vlm.tiny), run with transformers
on CPU (workers.policy.hf_vlm). In production the same checkpoints are served by vLLM
(docs/scale.md gives the command); clients (OpenAIPolicy, the RL engine) speak the same protocol to both.

The server's key (FLYWHEEL_POLICY_SECRET, from the environment, never the command line): every
route but `GET /health` answers only with `Authorization: Bearer <key>` (401 without; vLLM's
`--api-key` contract), so another account of the machine can neither sample nor read the card; the
CLI refuses to start without a key unless `--open` (an in-process `start_server` without one, a
test's or a bench's, answers anyone and takes no weights).

Endpoints:
- `GET /health` (open: answers once the model is loaded)
- `GET /v1/models`
- `POST /v1/chat/completions`: `messages` (text + `image_url` data URLs), `n`, `temperature`,
  `max_tokens`, `logprobs`, `top_logprobs`, `return_tokens_as_token_ids` (vLLM's flag: tokens are
  reported as "token_id:N"), and the extension `thought_temperature` (the thought's own sampling
  temperature, workers.policy.embedded.generation); vLLM-shaped JSON back.
- `POST /v1/load_weights` `{"path": DIR, "version": LABEL}`: hot-swap the checkpoint without a
  restart. Only with the server's weights secret (`Authorization: Bearer <secret>`; the secret comes
  from the environment variable FLYWHEEL_POLICY_SECRET, never the command line): a server started
  without one refuses every hot-swap (403). `version` (optional) is the label the loaded weights are
  reported under (an RL run labels its versions `run<id>-v<n>`), else the checkpoint's own version.
- `POST /v1/load_lora_adapter` `{"lora_name": LABEL, "lora_path": DIR}` (vLLM's runtime LoRA
  contract, same secret): an HF VLM server keeps its base loaded and serves it with this peft
  adapter from now on, reported as LABEL; the previous adapter is dropped. An adapter trained on
  another base than the one loaded (its `adapter_config.json` says) is refused with 400.
  `POST /v1/unload_lora_adapter` `{"lora_name"}`: one adapter is resident, so this answers 404
  (or 400 for the one being served). `--adapter DIR` starts the server with one.
Every response carries the loaded version in the `X-Model-Version` header; completions also carry it
as `model_version` and `system_fingerprint`.

Lifeline (`--lifeline-key K`, Redis URL in FLYWHEEL_LIFELINE_REDIS): the server exits once the Redis
key K is gone (deleted when its RL run pauses or ends, or expired because nobody renews it), so a
run's servers never outlive it even when they run on another machine than the one that stops the run.

Prompt format (HF VLM): the messages go through the checkpoint's own chat template and image
processor (workers.policy.hf_vlm.model.encode_prompt); log-probs are under the sampling
distribution (vLLM: `--logprobs-mode processed_logprobs`). Prompt format (embedded): the model reads the chat layout documented in `workers.policy.prompts`
(instruction after "## User Instruction\\n", the element list as a text part starting with
"Elements:\\n" in the last user message, history as assistant messages, the screenshot as the last
image) — exactly what `OpenAIPolicy(include_elements=True)` sends.

Modules: `backends` (the embedded and HF VLM backends), `service` (request dict in, response dict
out), `http` (routes, errors, the lifeline), `cli` (`main`).

Why the stdlib ThreadingHTTPServer: the model is one CPU-bound object behind a lock, so an async
framework would buy nothing; requests parse and validate concurrently, generation is serialised.
"""

from workers.policy.server.backends import BadRequest, policy_from_checkpoint
from workers.policy.server.cli import main
from workers.policy.server.http import PolicyHTTPServer, start_server, watch_lifeline
from workers.policy.server.service import PolicyService

__all__ = [
    "BadRequest",
    "PolicyHTTPServer",
    "PolicyService",
    "main",
    "policy_from_checkpoint",
    "start_server",
    "watch_lifeline",
]
