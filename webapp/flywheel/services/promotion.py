"""Promotion (issue 9 item 5): a checkpoint becomes the annotation model (new annotation sessions
propose with it and record its version in every candidate) and/or the start of new RL runs."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.flywheel.models import Promotion, PromotionTarget
from webapp.store.checkpoints import (
    checkpoint_promote_annotation,
    checkpoint_push_weights,
    push_target_check,
)
from webapp.store.models import Checkpoint


def checkpoint_promote(
    *, checkpoint: Checkpoint, targets: list[str], user: Any = None, push_to: str | None = None
) -> list[Promotion]:
    """Promote to each of `targets` (annotation, rl_start); refuses unknown targets and an empty list.
    `push_to` hot-loads the weights into a running embedded policy server (annotation only), before
    the rows are written (no transaction waits on the server; a refused push changes nothing)."""
    unknown = set(targets) - set(PromotionTarget.values)
    if not targets or unknown:
        raise ValueError(f"targets must be some of {PromotionTarget.values}, got {targets}")
    if PromotionTarget.ANNOTATION in targets and push_to:
        push_target_check(push_to)
        if not checkpoint.endpoint_url:
            checkpoint_push_weights(checkpoint=checkpoint, push_to=push_to)
    with transaction.atomic():
        return [_promote(checkpoint, target, user) for target in PromotionTarget.values if target in targets]


def _promote(checkpoint: Checkpoint, target: str, user: Any) -> Promotion:
    if target == PromotionTarget.ANNOTATION:
        checkpoint_promote_annotation(checkpoint=checkpoint)
    return Promotion.objects.create(checkpoint=checkpoint, target=target, created_by=user)
