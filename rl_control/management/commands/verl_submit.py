"""`manage.py verl_submit RUN_ID [--out DIR] [--ray-address URL] [--submit]`: the verl backend of a run.

Writes the verl job of run RUN_ID (its pool's tasks as verl's dataset, the flywheel_gui agent loop,
the Hydra overrides: GRPO on the run's HF checkpoint, vLLM rollout, the run's LoRA rank, metrics to
the run's dashboard) and prints the `ray job submit` command; with --submit it runs it (the `ray`
CLI of verl's environment must be on PATH). See docs/scale.md, "verl".
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Generate a run's verl job and its `ray job submit` command (optionally submit it)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument("--out", help="job directory (default var/verl/run<ID>)")
        parser.add_argument("--ray-address", default="http://127.0.0.1:8265")
        parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
        parser.add_argument("--nodes", type=int, default=1)
        parser.add_argument("--submit", action="store_true", help="run `ray job submit` now")

    def handle(self, *args: Any, run_id: int, out: str | None, ray_address: str, gpus: int, nodes: int,
               submit: bool, **options: Any) -> None:  # fmt: skip
        from flywheel_verl.submit import job_files, shell, submit_command
        from rl_control.engine.control import start_dir
        from rl_control.models import Run
        from webapp.store.models import Task
        from webapp.store.taskspec import task_spec_wire
        from workers.policy.hf_vlm import checkpoint_kind

        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run {run_id}")
        model = start_dir(run)
        if checkpoint_kind(model) != "hf_vlm":
            raise CommandError(
                "verl trains HF checkpoints: the run's start checkpoint is not a Qwen2.5-VL-family model"
            )
        kind = run.config["env"]["kind"]
        tasks = Task.objects.filter(enabled=True, env_kind=kind)
        tasks = (
            tasks.filter(pk__in=run.config["task_ids"])
            if run.config.get("task_ids")
            else tasks.filter(pool_id=run.pool_id)
        )
        wires = [task_spec_wire(t) for t in tasks]
        if not wires:
            raise CommandError(f"run {run_id} has no enabled {kind} task")
        algo = run.config.get(run.algorithm) or {}
        directory = Path(out) if out else Path(settings.VAR_DIR) / "verl" / f"run{run.pk}"
        job_files(
            directory, tasks=wires, model_path=str(model), run_id=run.pk, n_gpus=gpus, nodes=nodes,
            group_size=int(run.config["curation"].get("rollouts_max", 8)), lora_rank=int((run.config.get("vlm") or {}).get("lora_rank", 0)),
            lr=float(algo.get("lr", algo.get("lr_policy", 1e-6))), max_turns=int(run.config["curation"].get("step_cap", 15)), env_kind=kind,
        )  # fmt: skip
        command = submit_command(directory, ray_address)
        self.stdout.write(f"job files in {directory}")
        self.stdout.write(shell(command))
        if submit:
            completed = subprocess.run(command, cwd=directory, check=False)
            if completed.returncode:
                raise CommandError(f"ray job submit exited {completed.returncode}")
