"""Requesting the model's candidate actions for the current observation (seed 000 §2.4.2).

Candidates are requested the moment an observation becomes current and computed on a worker
(annotation.proposals, through the task `annotation.tasks.propose_candidates`), so the annotator
never waits on the model: the page shows a pending indicator and receives them over the websocket
when ready.
"""

from __future__ import annotations

import time

from django.db import transaction

from annotation.models import AnnotationSession


def candidates_request(*, session: AnnotationSession) -> None:
    """Mark the current observation's candidates pending and enqueue their computation."""
    from annotation.tasks import propose_candidates

    session.candidates_status = "pending"
    session.candidates_requested_at = time.time()
    session.save(update_fields=["candidates_status", "candidates_requested_at"])
    session_id, version = session.pk, session.obs_version
    transaction.on_commit(lambda: propose_candidates.delay(session_id, version))
