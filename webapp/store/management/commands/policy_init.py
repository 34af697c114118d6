"""`manage.py policy_init [--checkpoint-version V] [--promote]`: create the untrained embedded checkpoint."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from webapp.store.checkpoints import (
    checkpoint_create_initial,
    checkpoint_create_tiny_vlm,
    checkpoint_dir,
    checkpoint_promote_annotation,
)
from webapp.store.models import Checkpoint


class Command(BaseCommand):
    help = "Create the initial (untrained) embedded policy checkpoint and optionally promote it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--checkpoint-version", dest="checkpoint_version", default="init")
        parser.add_argument("--promote", action="store_true", help="make it the annotation model if none is")
        parser.add_argument(
            "--tiny-vlm",
            action="store_true",
            help="also create the tiny Qwen2.5-VL start checkpoint (tiny-qwen2.5-vl)",
        )

    def handle(
        self, *args: Any, checkpoint_version: str, promote: bool, tiny_vlm: bool, **options: Any
    ) -> None:
        checkpoint = checkpoint_create_initial(version=checkpoint_version)
        if tiny_vlm:
            checkpoint_create_tiny_vlm()
        if promote and not Checkpoint.objects.filter(is_annotation_model=True).exists():
            checkpoint_promote_annotation(checkpoint=checkpoint)
        self.stdout.write(str(checkpoint_dir(checkpoint)))
