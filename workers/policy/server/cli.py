"""`python -m workers.policy.server`: serve one checkpoint until SIGTERM, the lifeline, or Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path

import torch

from workers.policy.base import PolicyError
from workers.policy.server.backends import BadRequest, policy_from_checkpoint
from workers.policy.server.http import PolicyHTTPServer, watch_lifeline
from workers.policy.server.service import PolicyService

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a policy checkpoint over the OpenAI-compatible API")
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (config.json, model.safetensors)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-name", default="flywheel-embedded")
    # One thread: on a shared 2-core machine two intra-op threads spin against each other and every
    # other process (measured at load 26: a decode step 1.1-2.5 s with 2 threads, 72-120 ms with 1).
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--version-label", help="report the loaded weights under this version label")
    parser.add_argument("--adapter", help="a LoRA adapter directory served on top of --checkpoint (HF VLM)")
    parser.add_argument("--lifeline-key", help="exit once this Redis key is gone (FLYWHEEL_LIFELINE_REDIS)")
    parser.add_argument("--pid-file", help="write the pid here while serving (removed on exit)")
    parser.add_argument(
        "--open",
        action="store_true",
        help="serve without a key (FLYWHEEL_POLICY_SECRET unset): every account that reaches the port samples",
    )
    args = parser.parse_args(argv)
    secret = os.environ.get("FLYWHEEL_POLICY_SECRET", "")
    if not secret and not args.open:
        parser.error(
            "FLYWHEEL_POLICY_SECRET is not set: the server's key (completions, the model card and the "
            "weights hot-swap need it); --open serves without one"
        )
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(args.threads)
    try:
        policy = policy_from_checkpoint(args.checkpoint)
    except PolicyError as exc:
        parser.error(str(exc))
    if args.version_label:
        policy.model.config.flywheel_version = args.version_label
    service = PolicyService(policy, args.model_name, args.checkpoint, secret)
    if args.adapter:
        try:
            service.load_lora_adapter(
                {"lora_name": args.version_label or policy.model_version, "lora_path": args.adapter}
            )
        except BadRequest as exc:
            parser.error(str(exc))
    server = PolicyHTTPServer((args.host, args.port), service)
    if args.lifeline_key:
        watch_lifeline(
            server, os.environ.get("FLYWHEEL_LIFELINE_REDIS", "redis://127.0.0.1:6379/0"), args.lifeline_key
        )
    # SIGTERM (make down, the engine stopping a run) ends serve_forever, so the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    pid_file = Path(args.pid_file) if args.pid_file else None
    if pid_file:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(str(os.getpid()))
    log.info("serving %s (version %s) on %s%s", args.checkpoint, policy.model_version, server.url,
             "" if secret else "; open to every caller, weight hot-swap disabled (--open)")  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if pid_file:
            pid_file.unlink(missing_ok=True)
    return 0
