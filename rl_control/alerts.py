"""Run alerts (SPEC §9): checks applied to each recorded training step, thresholds from the run config.

    entropy_collapse / entropy_blowup   policy/entropy below alerts.entropy_min / above entropy_max
    ev_drop                             value/explained_variance more than alerts.ev_drop below its
                                        best over the last alerts.window recorded steps
    reward_success_divergence           over the window, outcome/reward_mean rose and
                                        outcome/verified_success_rate fell, each by ≥ divergence_min
                                        (mean of the newer half minus mean of the older half) —
                                        the reward is being gamed or the shaping dominates
    staleness_violation                 efficiency/staleness_max above curation.staleness_bound
    env_crash_spike                     fleet/crash_rate above alerts.env_crash_rate_max

An alert kind that fired stays quiet for alerts.cooldown_steps training steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from django.db import transaction
from django.db.models import Max

from rl_control.events import RunAlertEvent, publish_run_alert
from rl_control.models import AlertKind, Run, RunAlert, RunMetric
from workers.rl.run_config import AlertSettings

Candidate = tuple[str, float, float, str]  # kind, value, threshold, message


def _recent(run: Run, name: str, step: int, window: int) -> list[float]:
    """Values of `name` at the last `window` recorded rows up to `step`, oldest first."""
    rows = RunMetric.objects.filter(run=run, name=name, step__lte=step).order_by("-step", "-id")
    return list(reversed(rows.values_list("value", flat=True)[:window]))


def _trend(xs: list[float]) -> float | None:
    """Mean of the newer half minus mean of the older half; None below four points."""
    if len(xs) < 4:
        return None
    half = len(xs) // 2
    older, newer = xs[: len(xs) - half], xs[len(xs) - half :]
    return sum(newer) / len(newer) - sum(older) / len(older)


def _candidates(run: Run, step: int, values: Mapping[str, float], cfg: AlertSettings) -> list[Candidate]:
    found: list[Candidate] = []
    entropy = values.get("policy/entropy")
    if entropy is not None and entropy < cfg.entropy_min:
        found.append((str(AlertKind.ENTROPY_COLLAPSE), entropy, cfg.entropy_min,
                      f"policy entropy {entropy:.4g} fell below {cfg.entropy_min:g}"))  # fmt: skip
    if entropy is not None and entropy > cfg.entropy_max:
        found.append((str(AlertKind.ENTROPY_BLOWUP), entropy, cfg.entropy_max,
                      f"policy entropy {entropy:.4g} rose above {cfg.entropy_max:g}"))  # fmt: skip
    ev = values.get("value/explained_variance")
    if ev is not None:
        best = max([*_recent(run, "value/explained_variance", step, cfg.window), ev])
        if best - ev > cfg.ev_drop:
            found.append((str(AlertKind.EV_DROP), ev, best - cfg.ev_drop,
                          f"explained variance {ev:.3g} is {best - ev:.3g} below its recent best {best:.3g}"))  # fmt: skip
    if "outcome/reward_mean" in values or "outcome/verified_success_rate" in values:
        reward = _trend(_recent(run, "outcome/reward_mean", step, cfg.window))
        success = _trend(_recent(run, "outcome/verified_success_rate", step, cfg.window))
        if reward is not None and success is not None:
            if reward >= cfg.divergence_min and success <= -cfg.divergence_min:
                found.append((str(AlertKind.REWARD_SUCCESS_DIVERGENCE), success, -cfg.divergence_min,
                              f"reward mean rose {reward:+.3g} while verified success changed {success:+.3g}"))  # fmt: skip
    staleness = values.get("efficiency/staleness_max")
    bound = float((run.config.get("curation") or {}).get("staleness_bound", 1))
    if staleness is not None and staleness > bound:
        found.append((str(AlertKind.STALENESS_VIOLATION), staleness, bound,
                      f"trained on steps {staleness:g} versions old; the bound is {bound:g}"))  # fmt: skip
    crash = values.get("fleet/crash_rate")
    if crash is not None and crash > cfg.env_crash_rate_max:
        found.append((str(AlertKind.ENV_CRASH_SPIKE), crash, cfg.env_crash_rate_max,
                      f"{crash:.0%} of episodes crashed their environment (limit {cfg.env_crash_rate_max:.0%})"))  # fmt: skip
    return found


def alerts_evaluate(*, run: Run, step: int, values: Mapping[str, float]) -> list[RunAlert]:
    """Check the metrics just recorded for `step`; store and publish the alerts that fire.

    Call after the step's metrics are stored (the windows include them). Returns the new alerts.
    """
    cfg = AlertSettings.model_validate(run.config.get("alerts") or {})
    found = _candidates(run, step, values, cfg)
    if not found:
        return []
    last = dict(
        RunAlert.objects.filter(run=run, kind__in=[k for k, *_ in found])
        .values("kind")
        .annotate(last=Max("step"))
        .values_list("kind", "last")
    )
    fresh = [c for c in found if c[0] not in last or step - last[c[0]] >= cfg.cooldown_steps]
    alerts = RunAlert.objects.bulk_create(
        [RunAlert(run=run, kind=k, step=step, value=v, threshold=t, message=m) for k, v, t, m in fresh]
    )
    for alert in alerts:
        payload: RunAlertEvent = {
            "type": "run.alert",
            "run_id": run.pk,
            "alert_id": alert.pk,
            "kind": alert.kind,
            "step": step,
            "value": alert.value,
            "threshold": alert.threshold,
            "message": alert.message,
        }
        transaction.on_commit(partial(publish_run_alert, payload))
    return alerts
