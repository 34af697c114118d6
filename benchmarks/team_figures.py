"""bench team's figures that need no stack: the goals, the connection budget, what the
kill/restart journey cost, and which goals a run met (benchmarks/team.py reports them)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.conf import settings

from benchmarks import team_load as load

GOALS = {"http_5xx": 0, "http_no_answer": 0, "ws_errors": 0, "lost_steps": 0, "db_connections_max": "≤ db_pool_max",
         "decide_p95_ms": 500, "second_run_first_episode_s": 60, "asr_lag_p95_s": 15}  # fmt: skip


def chaos_figures(tally: load.Tally, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the kill/restart journey cost: the failures (5xx, no answer) from the first event on,
    each within 30 s of an event or not."""
    if not events:
        return {}
    first = min(e["monotonic"] for e in events)
    after = [(t, what) for t, what in tally.failures_at if t >= first]
    return {
        "chaos_events": [{k: v for k, v in e.items() if k != "monotonic"} for e in events],
        "http_5xx_after_chaos": sum(1 for _, what in after if what[0] == "5"),
        "http_500_after_chaos": sum(1 for _, what in after if what.startswith("500 ")),
        "http_no_answer_after_chaos": sum(1 for _, what in after if what.startswith("no answer")),
        "failures_after_chaos": dict(Counter(what for _, what in after)),
    }


def db_pool_max(pool_roles: list[tuple[str, int]], runs: int) -> int | None:
    """The connections the settings allow the stack in all (docs/scale.md's budget): each process's
    pool `DB_POOL_MAX[role]`, summed over the stack's processes and the runs' own policy servers
    (started by the trainer, with its role); None where the settings bound nothing (no pools)."""
    sizes = getattr(settings, "DB_POOL_MAX", None)
    if not isinstance(sizes, dict):
        return None
    return sum(sizes[role] * n for role, n in pool_roles) + runs * sizes["worker"]


def met(out: dict[str, Any]) -> dict[str, bool]:
    """Each goal against its figure (a figure that could not be measured does not meet its goal)."""

    def at_most(key: str, bound: Any) -> bool:
        return out[key] is not None and bound is not None and out[key] <= bound

    return {
        "http_5xx": out["http_5xx"] == 0,
        "http_no_answer": out["http_no_answer"] == 0,
        "ws_errors": out["ws_errors"] == 0,
        "lost_steps": out["lost_steps"] == 0,
        "db_connections_max": at_most("db_connections_max", out["db_pool_max"]),
        "decide_p95_ms": at_most("decide_p95_ms", GOALS["decide_p95_ms"]),
        "second_run_first_episode_s": at_most("second_run_first_episode_s", GOALS["second_run_first_episode_s"])
        if out["runs"] > 1 else True,
        "asr_lag_p95_s": at_most("asr_lag_p95_s", GOALS["asr_lag_p95_s"]),
    }  # fmt: skip
