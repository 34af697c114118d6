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
    "vlm": "workers.policy.hf_vlm.bench:run_vlm",
}


class Command(BaseCommand):
    help = "Run one benchmark (SPEC §10) and print its figures as one JSON line."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", choices=sorted(BENCHES))
        parser.add_argument("--quick", action="store_true", help="a smaller run that ends in under a minute")

    def handle(self, *args: Any, name: str, quick: bool, **options: Any) -> None:
        module_name, func_name = BENCHES[name].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise CommandError(f"benchmark {name!r} is not available yet ({exc})") from exc
        figures: dict[str, Any] = getattr(module, func_name)(quick=quick)
        self.stdout.write(json.dumps({"bench": name, **figures}, sort_keys=False))
