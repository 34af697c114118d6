"""Events of RL runs over Channels: payload types and publish helpers (group `rl-run-<id>`)."""

from __future__ import annotations

import logging
from typing import TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


class RunStatusEvent(TypedDict):
    type: str  # "run.status"
    run_id: int
    status: str
    error: str
    updates_done: int
    episodes_done: int
    policy_version: int
    samples: int
    headline_success: float | None


class RunMetricsEvent(TypedDict):
    type: str  # "run.metrics"
    run_id: int
    step: int
    policy_version: int
    samples: int
    wall: float
    values: dict[str, float]  # only finite values; non-finite ones are not stored either


class RunAlertEvent(TypedDict):
    type: str  # "run.alert"
    run_id: int
    alert_id: int
    kind: str
    step: int
    value: float
    threshold: float
    message: str


def run_group(run_id: int) -> str:
    return f"rl-run-{run_id}"


def _publish(run_id: int, payload: RunStatusEvent | RunMetricsEvent | RunAlertEvent) -> None:
    """Best effort: an unreachable channel layer never fails training or a control action."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(run_group(run_id), dict(payload))
    except Exception:
        logger.warning("could not publish %s for run %s", payload["type"], run_id, exc_info=True)


def publish_run_status(payload: RunStatusEvent) -> None:
    _publish(payload["run_id"], payload)


def publish_run_metrics(payload: RunMetricsEvent) -> None:
    _publish(payload["run_id"], payload)


def publish_run_alert(payload: RunAlertEvent) -> None:
    _publish(payload["run_id"], payload)
