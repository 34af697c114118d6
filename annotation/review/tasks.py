"""Celery tasks of the review workflow (names `annotation.review.tasks.*`, default queue)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.result import allow_join_result

from annotation.review import replay


@shared_task(name="annotation.review.tasks.replay_trajectory", ignore_result=True)
def replay_trajectory(trajectory_id: int) -> dict[str, Any]:
    """The executability check of one trajectory (see annotation.review.replay)."""
    # The replay waits on env calls that run on the env host's own queue (`env.<host>`), never on
    # this worker's, so joining their results here cannot deadlock.
    with allow_join_result():
        return replay.trajectory_replay(trajectory_id=trajectory_id)
