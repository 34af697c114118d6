"""`manage.py policy_starter`: the starter model of a new install (issue 19 item 8).

Trains it once per machine (workers.policy.starter: scripted-expert demonstrations of the demo
MiniWoB++ tasks, a short SFT, greedy success measured on held-out seeds; a few CPU minutes), cached
under FLYWHEEL_CACHE_DIR by the recipe's hash; registers it as a checkpoint with that success, and
makes it the annotation model and the start of new RL runs unless a person promoted another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from demo.setup import DEMO_MINIWOB_POOL
from webapp.flywheel.models import Promotion, PromotionTarget
from webapp.flywheel.services.promotion import checkpoint_promote
from webapp.store.checkpoints import checkpoint_install_starter, checkpoint_success_note
from webapp.store.models import Checkpoint


class Command(BaseCommand):
    help = "Train (once per machine, cached) the starter model and promote it on a new install."

    def handle(self, *args: Any, **options: Any) -> None:
        from workers.policy.starter import cached_starter

        source, figures = cached_starter(Path(settings.FLYWHEEL_CACHE_DIR))
        checkpoint = checkpoint_install_starter(source=source, figures=figures, pool=DEMO_MINIWOB_POOL)
        targets: list[str] = []
        annotation = Checkpoint.objects.filter(is_annotation_model=True).first()
        # The untrained initial model (policy_init) gives way; a checkpoint a person promoted stays.
        if annotation is None or annotation.version == "init":
            targets.append(str(PromotionTarget.ANNOTATION))
        if not Promotion.objects.filter(target=PromotionTarget.RL_START).exists():
            targets.append(str(PromotionTarget.RL_START))
        if targets:
            checkpoint_promote(checkpoint=checkpoint, targets=targets)
        self.stdout.write(json.dumps({"version": checkpoint.version, "promoted": targets,
                                      "measured": checkpoint_success_note(checkpoint),
                                      "timings_s": figures.get("timings_s")}))  # fmt: skip
