"""`python manage.py bench NAME [--quick]`: run one benchmark; the last line printed is one JSON object."""

from __future__ import annotations

import importlib
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

# name -> "module:function"; each function takes `quick: bool` and returns a dict of figures.
BENCHES: dict[str, str] = {
    "export": "webapp.store.bench:run_export",
    "envstep": "workers.envs.bench:run_envstep",
    "envmanager": "webapp.fleet.bench:run_envmanager",
    "policy": "workers.policy.bench:run_policy",
    "annotate": "annotation.bench:run_annotate",
    "asr": "workers.asr.bench:run_asr",
    "rollout": "rl_control.engine.bench:run_rollout",
    "learn": "rl_control.engine.bench:run_learn",
    "dashboard": "rl_control.bench:run_dashboard",
    "flywheel": "webapp.flywheel.bench:run_flywheel",
    "osworld": "webapp.store.bench_osworld:run_osworld",
    "vlm": "workers.policy.hf_vlm.bench:run_vlm",
    "launch": "rl_control.launch_bench:run_launch",
}


class Command(BaseCommand):
    help = "Run one benchmark (SPEC §10) and print its figures as one JSON line."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", choices=sorted(BENCHES))
        parser.add_argument("--quick", action="store_true", help="a smaller run that ends in under a minute")
        parser.add_argument(
            "--examples", default=None, help="bench osworld: OSWorld's evaluation_examples folder (read only)"
        )

    def handle(self, *args: Any, name: str, quick: bool, examples: str | None = None, **options: Any) -> None:
        module_name, func_name = BENCHES[name].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise CommandError(f"benchmark {name!r} is not available yet ({exc})") from exc
        extra = {"examples": examples} if name == "osworld" else {}
        try:
            figures: dict[str, Any] = getattr(module, func_name)(quick=quick, **extra)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps({"bench": name, **figures}, sort_keys=False))
