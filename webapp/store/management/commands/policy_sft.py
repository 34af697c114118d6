"""`manage.py policy_sft --base VERSION --version NEW [--source import] [--route sft] [--pool ID]
[--pool-name NAME] [--min-reward R] [--steps N]`: supervised fine-tuning of a checkpoint on stored
trajectories (loss on thought + action tokens only); registers NEW as a child of VERSION."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webapp.store.models import Checkpoint
from webapp.store.sft_jobs import SftError, checkpoint_sft_from_store


class Command(BaseCommand):
    help = "Fine-tune a checkpoint on stored trajectories and register the result."

    def add_base_argument(self, parser: Any, *args: Any, **kwargs: Any) -> None:
        # `--version` names the new checkpoint here instead of printing Django's version.
        if "--version" not in args:
            super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base", required=True, help="version of the checkpoint to start from")
        parser.add_argument("--version", dest="new_version", required=True, help="version to register")
        parser.add_argument("--source", action="append", help="trajectory source (repeatable)")
        parser.add_argument("--route", action="append", help="sft / ct / none (repeatable)")
        parser.add_argument("--pool", type=int, help="task pool id")
        parser.add_argument("--pool-name", dest="pool_name")
        parser.add_argument("--min-reward", dest="min_reward", type=float, default=None)
        parser.add_argument("--steps", type=int, default=200)
        parser.add_argument("--lr", type=float, default=1e-3)
        parser.add_argument("--batch-size", dest="batch_size", type=int, default=16)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **o: Any) -> None:
        base = Checkpoint.objects.filter(version=o["base"]).first()
        if base is None:
            raise CommandError(f"no checkpoint {o['base']!r}")
        filters: dict[str, Any] = {}
        for key in ("source", "route"):
            if o[key]:
                filters[key] = o[key]
        for key in ("pool", "pool_name", "min_reward"):
            if o[key] is not None:
                filters[key] = o[key]

        def progress(figures: dict[str, float]) -> None:
            self.stdout.write(f"step {figures['step']}/{figures['total']} loss {figures['loss']:.4f}")

        try:
            checkpoint = checkpoint_sft_from_store(
                base=base, version=o["new_version"], filters=filters, steps=o["steps"], lr=o["lr"],
                batch_size=o["batch_size"], seed=o["seed"], progress=progress,
            )  # fmt: skip
        except SftError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            json.dumps({"version": checkpoint.version, "path": checkpoint.path, **checkpoint.metrics})
        )
