"""Preflight at launch (issue 19 item 2): what a run needs before it may start, checked at once.

- its pool (or task list) has enabled tasks of the run's environment kind;
- environments of that kind can be leased (an env host is up and has registered them);
- its policy can be served: the external endpoints it names answer, or a trainer worker consumes
  the train queue (it starts the run's own servers) and a rollout worker the rollout queue;
- its start checkpoint loads: an embedded checkpoint directory whose weights file is whole, or a
  Hugging Face vision-language checkpoint (Qwen2.5-VL family) with its tokenizer, image processor
  and whole weight files, and a config that fits it (no `grpo.thought_temperature`, no Entropulse).

`run_preflight` returns {field: [what is missing]} keyed like the run form's fields (empty: go);
`run_launch` refuses with these as a 400 and changes nothing. settings.RL_PREFLIGHT switches it off
(the unit tests launch runs with no workers at all).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from django.conf import settings

from rl_control.engine.serving import endpoint_answers, external_urls, serving_key
from rl_control.models import Run
from webapp.fleet import queues
from webapp.remote_calls import before_remote_call
from webapp.store.models import Task
from workers.policy.hf_vlm import VLM_MODEL_TYPES  # light: config.json only, no torch
from workers.rl.run_config import MIXED_KIND


def _run_tasks(run: Run) -> Any:
    """The run's task list, else its pool's tasks (any state, any kind)."""
    if run.config.get("task_ids"):
        return Task.objects.filter(pk__in=run.config["task_ids"])
    return Task.objects.filter(pool_id=run.pool_id)


def _run_tasks_of_kind(run: Run) -> Any:
    """The tasks the run plays (rl_control.engine.data.run_tasks): enabled, supported, of its env
    kind (of every kind for a "mixed" run)."""
    kind = run.config["env"]["kind"]
    tasks = _run_tasks(run).filter(enabled=True, supported=True)
    return tasks if kind == MIXED_KIND else tasks.filter(env_kind=kind)


def run_env_kinds(run: Run) -> list[str]:
    """The environment kinds the run's rollouts lease: env.kind, or for a "mixed" run the kinds of
    its enabled tasks."""
    kind = str(run.config["env"]["kind"])
    if kind != MIXED_KIND:
        return [kind]
    return sorted(set(_run_tasks_of_kind(run).values_list("env_kind", flat=True)))


def _tasks_missing(run: Run) -> str | None:
    """Why the run has no task to play, in words (None when it has one)."""
    if _run_tasks_of_kind(run).exists():
        return None
    kind = run.config["env"]["kind"]
    where = f"pool {run.pool.name}" if run.pool_id and not run.config.get("task_ids") else "the listed tasks"
    tasks = _run_tasks(run)
    total, enabled = tasks.count(), tasks.filter(enabled=True)
    if total == 0:
        return f"{where} holds no tasks: import tasks into the pool first"
    if not enabled.exists():
        return f"{where} has {total} task{'s' if total != 1 else ''}, none enabled: enable some on the Tasks page"
    runnable = enabled.filter(supported=True)
    if not runnable.exists():
        reasons = sorted(
            {r for rs in enabled.values_list("unsupported_reasons", flat=True) for r in rs or []}
        )
        why = f" ({'; '.join(reasons[:3])})" if reasons else ""
        return f"none of the enabled tasks of {where} can run on this install{why}"
    kinds = sorted(set(runnable.values_list("env_kind", flat=True)))
    fit = kinds[0] if len(kinds) == 1 else MIXED_KIND
    return (
        f"{where} has no {kind} task it can run: its tasks are {', '.join(kinds)}; "
        f"set Environment kind to {fit} (or leave it open: a new run takes it from the pool)"
    )


def _envs_missing(kind: str) -> str | None:
    from webapp.fleet import services as fleet

    envs = fleet.registry().metrics()["envs"].get(kind, {})
    if envs.get("idle", 0) + envs.get("leased", 0) > 0:
        return None
    return (
        f"no {kind} environment can be leased: no env host has one up (start an env host with "
        f"FLEET_WARM_POOL including {kind}=N, e.g. `make up` starts envhost1)"
    )


PARALLEL_ENVS_DEFAULT_MAX = 8


def host_parallel_envs(kind: str) -> tuple[int, str]:
    """The default of `env.parallel_envs` on this deployment, and why: the environments of `kind` the
    fleet holds now (every env host's warm pool, idle or leased; of every kind for "mixed"), at most
    8; with none up yet, this machine's cores, at most 8. More slots than environments only wait for
    leases."""
    import redis

    from webapp.fleet import services as fleet

    try:
        by_kind = fleet.registry().metrics()["envs"]
        kinds = list(by_kind) if kind == MIXED_KIND else [kind]
        held = sum(
            int(by_kind.get(k, {}).get("idle", 0)) + int(by_kind.get(k, {}).get("leased", 0)) for k in kinds
        )
    except redis.RedisError:
        held = 0
    if held:
        n = min(PARALLEL_ENVS_DEFAULT_MAX, held)
        return n, f"default {n}: the env hosts hold {held} {kind} environment{'s' if held != 1 else ''}"
    cores = os.cpu_count() or 1
    n = min(PARALLEL_ENVS_DEFAULT_MAX, cores)
    return n, f"default {n}: no {kind} environment is up yet, and this machine has {cores} cores"


def _queues_served() -> set[str]:
    """Queues some live Celery worker consumes: the workers' own announcements in Redis
    (webapp.fleet.queues: renewed every ANNOUNCE_PERIOD_S, lapsed after ANNOUNCE_TTL_S, withdrawn at
    shutdown), which the fair share reads too. Not a broadcast that waits for replies: the rollout
    and train workers run at background CPU priority (scripts/priority.sh), and on a busy machine
    their main processes did not answer one within seconds, so launches were refused for minutes."""
    return {queue for queue in queues.announced_queues() if queues.workers_of(queue)}


def _safetensors_problem(weights: Path) -> str | None:
    """Why a safetensors file is not whole: its header must parse and every tensor lie inside it."""
    try:
        size = weights.stat().st_size
        with open(weights, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if not 0 < length <= min(size - 8, 100_000_000):
                return f"{weights.name} has no valid header"
            header = json.loads(fh.read(length))
    except (OSError, ValueError, struct.error) as exc:
        return f"{weights.name} is missing or unreadable ({type(exc).__name__})"
    if not isinstance(header, dict):
        return f"{weights.name} has no valid header"
    ends = [
        t.get("data_offsets", [0, 0])[1]
        for k, t in header.items()
        if k != "__metadata__" and isinstance(t, dict)
    ]
    if not ends or 8 + length + max(ends) != size:
        return f"{weights.name} is truncated or holds no tensors"
    return None


def _vlm_problem(directory: Path) -> str | None:
    for name in ("tokenizer_config.json", "preprocessor_config.json"):
        if not (directory / name).is_file():
            return f"{name} is missing (an HF vision-language checkpoint needs its tokenizer and image processor)"
    index = directory / "model.safetensors.index.json"
    if index.is_file():  # sharded weights (UI-TARS-1.5-7B ships four shards)
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return f"model.safetensors.index.json is unreadable ({type(exc).__name__})"
        if not shards or any("/" in s or "\\" in s or s.startswith(".") for s in shards):
            return "model.safetensors.index.json names no usable shard"
        for shard in shards:
            if problem := _safetensors_problem(directory / shard):
                return problem
        return None
    return _safetensors_problem(directory / "model.safetensors")


def checkpoint_kind_of(directory: Path) -> str | None:
    """ "embedded", "hf_vlm" or None (unreadable / another model) from config.json alone."""
    from workers.policy.base import PolicyError
    from workers.policy.hf_vlm import checkpoint_kind

    try:
        return checkpoint_kind(directory)
    except PolicyError:
        return None


def checkpoint_problem(directory: Path) -> str | None:
    """Why `directory` is not a checkpoint the trainer can load, or None. Reads its config and the
    safetensors headers and checks that every tensor lies inside its file (a truncated or foreign
    file is caught without importing torch into the web process)."""
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        return f"config.json is missing or not JSON ({type(exc).__name__})"
    kind = checkpoint_kind_of(directory) if isinstance(config, dict) else None
    if kind == "hf_vlm":
        return _vlm_problem(directory)
    if kind != "embedded":
        return (
            "config.json is neither an embedded Flywheel policy (model_type flywheel_policy) nor a "
            f"Qwen2.5-VL-family checkpoint ({', '.join(sorted(VLM_MODEL_TYPES))})"
        )
    return _safetensors_problem(directory / "model.safetensors")


def _vlm_config_problems(run: Run) -> dict[str, list[str]]:
    """Settings only the embedded model has, refused for an HF VLM start checkpoint."""
    errors: dict[str, list[str]] = {}
    serving = run.config.get("serving") or {}
    if (
        serving.get("endpoint_api") == "vllm_lora"
        and int((run.config.get("vlm") or {}).get("lora_rank", 8)) == 0
    ):
        errors["serving.endpoint_api"] = [
            "vLLM's runtime LoRA loading takes adapters: set vlm.lora_rank above 0, or push whole weights"
        ]
    if run.algorithm == "grpo" and (run.config.get("grpo") or {}).get("thought_temperature") is not None:
        errors["grpo.thought_temperature"] = [
            "an HF vision-language policy samples its whole answer at one temperature: leave this empty"
        ]
    return errors


def _checkpoint_missing(run: Run) -> str | None:
    from webapp.store.checkpoints import checkpoint_dir

    checkpoint = run.start_checkpoint
    if checkpoint is None:
        return None  # the untrained initial checkpoint, made on demand
    if checkpoint.endpoint_url:
        return (
            f"checkpoint {checkpoint.version} is an external endpoint ({checkpoint.endpoint_url}); "
            "the trainer trains checkpoint directories"
        )
    if problem := checkpoint_problem(checkpoint_dir(checkpoint)):
        return f"checkpoint {checkpoint.version} does not load: {problem}"
    return None


def run_preflight(run: Run) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if problem := _tasks_missing(run):
        errors["pool"] = [problem]
    if problems := [p for kind in run_env_kinds(run) if (p := _envs_missing(kind))]:
        errors["env.kind"] = problems
    endpoints = external_urls(run)
    if endpoints:
        before_remote_call("the preflight's endpoint checks")
        problems = [p for url in endpoints if (p := endpoint_answers(url, serving_key(run.pk, url)))]
        if problems:
            errors["serving.endpoints"] = problems
    served = _queues_served()
    needed = [(settings.RL_TRAIN_QUEUE, "trainer"), (settings.RL_ROLLOUT_QUEUE, "rollout")]
    missing = [f"no {what} worker consumes queue '{queue}'" for queue, what in needed if queue not in served]
    if missing:
        what = "" if endpoints else " (the trainer worker starts the run's policy servers)"
        errors["serving"] = [f"{'; '.join(missing)}{what}: start the Celery workers (`make up` does)"]
    if problem := _checkpoint_missing(run):
        errors["start_checkpoint"] = [problem]
    elif run.start_checkpoint is not None and not run.start_checkpoint.endpoint_url:
        from webapp.store.checkpoints import checkpoint_dir

        if checkpoint_kind_of(checkpoint_dir(run.start_checkpoint)) == "hf_vlm":
            errors.update(_vlm_config_problems(run))
        elif (run.config.get("serving") or {}).get("endpoint_api") == "vllm_lora":
            errors["serving.endpoint_api"] = [
                "vLLM's runtime LoRA loading takes the adapters of an HF vision-language policy trained with LoRA"
            ]
    return errors
