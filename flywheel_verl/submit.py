"""The verl job a Flywheel run generates, and its `ray job submit` command (no verl import here).

`job_files(...)` writes into a directory: `tasks.parquet` (one row per task of the run's pool, as
verl's RLHFDataset reads it: a placeholder prompt, `agent_name: flywheel_gui`,
workers.rl.verl_rows.rl_row: the same rows the verl export writes), `agent_loop.yaml` (registers
the plugin) and `overrides.txt` (the Hydra overrides of verl's `ppo_trainer` config: GRPO, the
HF checkpoint, vLLM rollout with the agent loop, LoRA rank, the Flywheel tracking backend, the
`flywheel` section the agent loop reads). `submit_command(...)` is the `ray job submit` line
(the working directory is shipped as the job's runtime env).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from workers.rl.verl_rows import AGENT_NAME, rl_row


def job_overrides(
    *, model_path: str, train_file: str, agent_loop_file: str, run_id: int, n_gpus: int = 8, nodes: int = 1,
    group_size: int = 8, batch_size: int = 64, lr: float = 1e-6, lora_rank: int = 0, max_turns: int = 15,
    env_kind: str = "browser", response_length: int = 8192, prompt_length: int = 16384,
) -> list[str]:  # fmt: skip
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train_file}",
        f"data.val_files={train_file}",
        f"data.train_batch_size={batch_size}",
        f"data.max_prompt_length={prompt_length}",
        f"data.max_response_length={response_length}",
        "data.return_raw_chat=True",
        f"actor_rollout_ref.model.path={model_path}",
        f"actor_rollout_ref.model.lora_rank={lora_rank}",
        f"actor_rollout_ref.actor.optim.lr={lr}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        f"actor_rollout_ref.rollout.n={group_size}",
        f"actor_rollout_ref.rollout.prompt_length={prompt_length}",
        f"actor_rollout_ref.rollout.response_length={response_length}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "actor_rollout_ref.rollout.agent.default_agent_loop=flywheel_gui",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_file}",
        "custom_reward_function.path=null",
        f"trainer.n_gpus_per_node={n_gpus}",
        f"trainer.nnodes={nodes}",
        "trainer.project_name=flywheel",
        f"trainer.experiment_name=run{run_id}",
        "trainer.logger=['console','flywheel']",
        f"+flywheel.run_id={run_id}",
        "+flywheel.envs=fleet",
        f"+flywheel.env_kind={env_kind}",
        f"+flywheel.max_turns={max_turns}",
    ]


def job_files(
    directory: Path, *, tasks: list[dict[str, Any]], seeds: int = 4, **overrides: Any
) -> dict[str, Path]:
    """Write the job's dataset, agent-loop registration and overrides into `directory`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    rows = [
        rl_row(index=i * seeds + seed, data_source=f"flywheel/{task.get('source', '')}",
               instruction=task.get("instruction") or task["task_id"], task=task, seed=seed,
               env_kind=str(task.get("kind", "")))
        for i, task in enumerate(tasks)
        for seed in range(seeds)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), directory / "tasks.parquet")
    (directory / "agent_loop.yaml").write_text(
        f"- name: {AGENT_NAME}\n  _target_: flywheel_verl.agent_loop.FlywheelGUIAgentLoop\n"
    )
    lines = job_overrides(train_file="tasks.parquet", agent_loop_file="agent_loop.yaml", **overrides)
    (directory / "overrides.txt").write_text("\n".join(lines) + "\n")
    return {"dataset": directory / "tasks.parquet", "agent_loop": directory / "agent_loop.yaml",
            "overrides": directory / "overrides.txt"}  # fmt: skip


def submit_command(directory: Path, ray_address: str) -> list[str]:
    """`ray job submit`: the job directory as working dir, this repository's `flywheel_verl` and
    `workers` shipped as py_modules (FLYWHEEL_URL / FLYWHEEL_TOKEN / FLYWHEEL_RUN_ID and the
    install's DATABASE_URL / REDIS_URL come from the cluster's environment, never the command line)."""
    repo = Path(__file__).resolve().parent.parent
    runtime = {"py_modules": [str(repo / "flywheel_verl"), str(repo / "workers")]}
    overrides = (directory / "overrides.txt").read_text().split()
    return ["ray", "job", "submit", "--address", ray_address, "--working-dir", str(directory),
            "--runtime-env-json", json.dumps(runtime),
            "--", "python", "-m", "flywheel_verl.main", *overrides]  # fmt: skip


def shell(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)
