"""A verl `Tracking` backend "flywheel": verl's metrics on a Flywheel run's dashboard.

verl's `Tracking` has a fixed list of backends; `install()` adds "flywheel" to it (flywheel_verl.main
calls it before verl's trainer starts), so `trainer.logger=['console','flywheel']` streams every
step's metrics to `POST /api/rl/runs/<id>/metrics/record/` of the Flywheel install named by
FLYWHEEL_URL, FLYWHEEL_TOKEN (a researcher's API token) and FLYWHEEL_RUN_ID. verl's names are mapped
to the dashboard's canonical ones (VERL_TO_FLYWHEEL); names without a counterpart are kept under the
keyed prefix `verl/` only if the install declares it, else dropped — the dashboard never fails a step.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import httpx

log = logging.getLogger(__name__)

# verl 0.9 metric names (verl/trainer/ppo/metric_utils.py, the actor / critic workers) -> Flywheel's.
VERL_TO_FLYWHEEL: dict[str, str] = {
    "actor/entropy": "policy/entropy",
    "actor/pg_loss": "policy/loss",
    "actor/pg_clipfrac": "policy/clip_frac_high",
    "actor/pg_clipfrac_lower": "policy/clip_frac_low",
    "actor/ppo_kl": "policy/kl",
    "actor/kl_loss": "policy/kl",
    "actor/grad_norm": "policy/grad_norm",
    "actor/lr": "policy/lr",
    "critic/vf_loss": "value/loss",
    "critic/vf_explained_var": "value/explained_variance",
    "critic/values/mean": "value/mean",
    "critic/score/mean": "outcome/reward_mean",
    "critic/rewards/mean": "outcome/reward_mean",
    "timing_s/step": "efficiency/update_s",
    "timing_s/update_weights": "efficiency/weight_sync_s",
}


def to_flywheel(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in data.items():
        target = VERL_TO_FLYWHEEL.get(name)
        if target is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out.setdefault(target, number)
    return out


class FlywheelTracker:
    """verl logger interface: `log(data, step)`, `finish()`."""

    def __init__(self, url: str | None = None, token: str | None = None, run_id: int | None = None) -> None:
        self.url = (url or os.environ["FLYWHEEL_URL"]).rstrip("/")
        self.run_id = int(run_id if run_id is not None else os.environ["FLYWHEEL_RUN_ID"])
        token = token or os.environ.get("FLYWHEEL_TOKEN", "")
        self.http = httpx.Client(headers={"Authorization": f"Token {token}"} if token else {}, timeout=10.0)

    def log(self, data: dict[str, Any], step: int) -> None:
        values = to_flywheel(data)
        if not values:
            return
        try:
            r = self.http.post(f"{self.url}/api/rl/runs/{self.run_id}/metrics/record/",
                               json={"step": int(step), "values": values})  # fmt: skip
            if r.status_code >= 400:
                log.warning("flywheel refused step %s: %s", step, r.text[:300])
        except httpx.HTTPError as exc:  # a dashboard outage must not stop training
            log.warning("flywheel unreachable at step %s: %s", step, exc)

    def finish(self) -> None:
        self.http.close()


def install() -> None:
    """Teach verl's Tracking the "flywheel" backend (idempotent)."""
    from verl.utils import tracking

    if "flywheel" in tracking.Tracking.supported_backend:
        return
    tracking.Tracking.supported_backend.append("flywheel")
    original = tracking.Tracking.__init__

    def __init__(self: Any, project_name: str, experiment_name: str, default_backend: Any = "console",
                 config: Any = None) -> None:  # fmt: skip
        backends = [default_backend] if isinstance(default_backend, str) else list(default_backend)
        original(
            self, project_name, experiment_name, [b for b in backends if b != "flywheel"] or "console", config
        )
        if "flywheel" in backends:
            self.logger["flywheel"] = FlywheelTracker()

    tracking.Tracking.__init__ = __init__
