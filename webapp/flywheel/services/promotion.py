"""Promotion (issue 9 item 5): a checkpoint becomes the annotation model (new annotation sessions
propose with it and record its version in every candidate) and/or the start of new RL runs."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.flywheel.models import Promotion, PromotionTarget
from webapp.store.checkpoints import checkpoint_promote_annotation
from webapp.store.models import Checkpoint


@transaction.atomic
def checkpoint_promote(
    *, checkpoint: Checkpoint, targets: list[str], user: Any = None, push_to: str | None = None
) -> list[Promotion]:
    """Promote to each of `targets` (annotation, rl_start); refuses unknown targets and an empty list.
    `push_to` hot-loads the weights into a running embedded policy server (annotation only)."""
    unknown = set(targets) - set(PromotionTarget.values)
    if not targets or unknown:
        raise ValueError(f"targets must be some of {PromotionTarget.values}, got {targets}")
    rows = []
    if PromotionTarget.ANNOTATION in targets:
        checkpoint_promote_annotation(checkpoint=checkpoint, push_to=push_to)
        rows.append(
            Promotion.objects.create(
                checkpoint=checkpoint, target=PromotionTarget.ANNOTATION, created_by=user
            )
        )
    if PromotionTarget.RL_START in targets:
        rows.append(
            Promotion.objects.create(checkpoint=checkpoint, target=PromotionTarget.RL_START, created_by=user)
        )
    return rows
