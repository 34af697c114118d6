"""`python manage.py bench NAME [--quick]`: run one benchmark; the last line printed is one JSON object.

The benchmark owns what it starts (benchmarks.harness.processes): stopped by SIGTERM / SIGINT / SIGHUP
or ending with an error, its workers, servers and browsers end with it. Its figures must carry the
keys SPEC §10 names for it (`SPEC_KEYS`); a benchmark that returns without one is an error.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmarks.harness.processes import owned_processes

# name -> "module:function"; each function takes `quick: bool` and returns a dict of figures.
BENCHES: dict[str, str] = {
    "export": "benchmarks.export:run_export",
    "envstep": "benchmarks.envstep:run_envstep",
    "envmanager": "benchmarks.envmanager:run_envmanager",
    "policy": "benchmarks.policy:run_policy",
    "annotate": "benchmarks.annotate:run_annotate",
    "asr": "benchmarks.asr:run_asr",
    "rollout": "benchmarks.rollout:run_rollout",
    "learn": "benchmarks.learn:run_learn",
    "dashboard": "benchmarks.dashboard:run_dashboard",
    "flywheel": "benchmarks.flywheel:run_flywheel",
    "osworld": "benchmarks.osworld:run_osworld",
    "vlm": "benchmarks.vlm:run_vlm",
    "launch": "benchmarks.launch:run_launch",
    "presets": "benchmarks.presets:run_presets",
    "team": "benchmarks.team:run_team",
}

# SPEC §10: the keys each benchmark's JSON carries at least (more are welcome).
SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "export": ("steps", "steps_per_s", "peak_rss_mb"),
    "envstep": ("desktop_step_p50_ms", "desktop_step_p95_ms", "browser_step_p50_ms", "desktop_boot_p50_s"),
    "envmanager": ("lease_release_per_s", "reclaim_delay_s"),
    "policy": ("propose_p50_ms", "n", "executable_share", "top1_success"),
    "annotate": ("roundtrip_p50_ms", "roundtrip_p95_ms", "model_p50_ms"),
    "asr": ("rtf", "wer", "alignment_accuracy"),
    "rollout": ("async_actions_per_min", "sync_actions_per_min", "async_over_sync", "async_env_utilization",
                "sync_env_utilization", "workload"),
    "learn": ("success_before", "success_after", "gain_points", "minutes"),
    "dashboard": ("metric_to_browser_p50_ms", "metric_to_browser_p95_ms", "downsample_1m_ms", "sockets",
                  "socket_errors"),
    "flywheel": ("vs1_rate_by_iteration", "sft_gain_points"),
    "launch": ("first_metric_s", "updates", "window_s"),
    "presets": ("presets", "trained", "rising", "window_s"),  # issue 34's, not SPEC §10's
    "osworld": ("domains", "supported_share", "passes_without_action", "correct_share"),
    "vlm": ("propose_p50_ms", "update_s", "logprob_max_abs_diff", "sync_s"),
    "team": ("http_5xx", "ws_errors", "lost_steps", "db_connections_max", "db_pool_max", "decide_p95_ms",
             "second_run_first_episode_s", "asr_lag_p95_s", "annotators", "runs", "load_avg"),
}  # fmt: skip


def missing_keys(name: str, figures: dict[str, Any]) -> list[str]:
    """The SPEC §10 keys of benchmark `name` that `figures` lacks."""
    return [k for k in SPEC_KEYS[name] if k not in figures]


class Command(BaseCommand):
    help = "Run one benchmark (SPEC §10) and print its figures as one JSON line."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", choices=sorted(BENCHES))
        parser.add_argument("--quick", action="store_true", help="a smaller run that ends in under a minute")
        parser.add_argument(
            "--examples", default=None, help="bench osworld: OSWorld's evaluation_examples folder (read only)"
        )
        parser.add_argument(
            "--chaos", action="store_true",
            help="bench team: terminate the stack's database connections and restart its ASR workers mid-load",
        )  # fmt: skip

    def handle(self, *args: Any, name: str, quick: bool, examples: str | None = None, chaos: bool = False,
               **options: Any) -> None:  # fmt: skip
        module_name, func_name = BENCHES[name].split(":")
        bench = getattr(importlib.import_module(module_name), func_name)
        if chaos and name != "team":
            raise CommandError("--chaos is an option of bench team only")
        extra: dict[str, Any] = {"examples": examples} if name == "osworld" else {}
        if chaos:
            extra["chaos"] = True
        with owned_processes():
            try:
                figures: dict[str, Any] = bench(quick=quick, **extra)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        missing = missing_keys(name, figures)
        if missing:
            raise CommandError(f"benchmark {name!r} returned no {', '.join(missing)} (SPEC §10)")
        self.stdout.write(json.dumps({"bench": name, **figures}, sort_keys=False))
