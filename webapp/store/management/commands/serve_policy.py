"""`manage.py serve_policy [--checkpoint-version V] [--port P]`: serve any registered checkpoint over
the OpenAI-compatible API vLLM speaks (default: the annotation model)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from webapp.store.checkpoints import checkpoint_dir
from webapp.store.models import Checkpoint


class Command(BaseCommand):
    help = "Serve a checkpoint with the embedded policy server (OpenAI-compatible, like vLLM)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--checkpoint-version", dest="checkpoint_version", help="default: the annotation model"
        )
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8100)
        parser.add_argument(
            "--threads", type=int, default=1, help="torch threads (workers.policy.server.cli)"
        )

    def handle(
        self, *args: Any, checkpoint_version: str | None, host: str, port: int, threads: int, **_: Any
    ) -> None:
        if checkpoint_version:
            checkpoint = Checkpoint.objects.filter(version=checkpoint_version).first()
            missing = f"no checkpoint {checkpoint_version!r}"
        else:
            checkpoint = Checkpoint.objects.filter(is_annotation_model=True).first()
            missing = "no annotation model; run `manage.py policy_init --promote` or promote a checkpoint"
        if checkpoint is None:
            raise CommandError(missing)
        import os

        from webapp.store.checkpoints import policy_weights_secret
        from workers.policy.server import main

        # Promoting a checkpoint hot-swaps it in (checkpoint_promote_annotation): with this secret only.
        os.environ["FLYWHEEL_POLICY_SECRET"] = policy_weights_secret()
        # The server never queries again: its connection goes back (not held for the server's life).
        connections.close_all()

        main(["--checkpoint", str(checkpoint_dir(checkpoint)), "--host", host, "--port", str(port),
              "--model-name", checkpoint.version, "--threads", str(threads)])  # fmt: skip
