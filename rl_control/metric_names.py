"""The canonical scalar metric names of a run, grouped as the dashboard shows them (SPEC §9).

A `RunMetric` row carries one of these names, or a name under one of `KEYED_PREFIXES` followed by
a key (a task's external id, a domain, a curriculum bucket). Distributions that are not one scalar
per training step (episode length, staleness histograms, episode replay) are computed from the
run's trajectories and steps instead (`store.Trajectory.run`, `Step.policy_version`).
"""

from __future__ import annotations

GROUPS: dict[str, str] = {
    "outcome": "what the policy achieves",
    "policy": "the policy update",
    "value": "the critic (PPO)",
    "efficiency": "throughput and the asynchronous pipeline",
    "curation": "which rollouts are sampled and trained on",
    "fleet": "the environment fleet",
}

METRICS: dict[str, str] = {
    # outcome
    "outcome/reward_mean": "mean shaped episode reward of the episodes finished since the last step",
    "outcome/reward_ci_low": "lower bound of the 95 % confidence interval of the reward mean",
    "outcome/reward_ci_high": "upper bound of the 95 % confidence interval of the reward mean",
    "outcome/success_rate": "fraction of finished episodes whose task reward counts as a success",
    "outcome/verified_success_rate": "success rate by the verifier alone (no shaping, no judge)",
    "outcome/episode_steps_mean": "mean steps per finished episode",
    "outcome/think_length_mean": "mean thought length in characters per step",
    "outcome/episodes": "episodes finished since the run started",
    # policy
    "policy/entropy": "mean token entropy of the trained steps (nats)",
    "policy/kl": "KL(π_θ ‖ π_ref) per token (GRPO with β_KL > 0)",
    "policy/clip_frac_low": "fraction of tokens whose ratio was clipped at 1 − ε_low",
    "policy/clip_frac_high": "fraction of tokens whose ratio was clipped at 1 + ε_high",
    "policy/loss": "policy loss of the update",
    "policy/grad_norm": "global gradient norm before clipping",
    "policy/lr": "policy learning rate used by the update",
    "policy/lr_scale": "learning-rate multiplier of the schedule at this point of the budget",
    "policy/ratio_mean": "mean importance ratio π_θ / π_old over trained tokens",
    "policy/is_weight_mean": "mean truncated IS weight min(π_train_old / π_rollout, C)",
    "policy/is_weight_max": "largest IS weight before truncation",
    "policy/is_truncated_frac": "fraction of IS weights cut at C",
    "policy/steps_kept_frac": "fraction of steps kept by the entropy filter",
    "policy/anchor_steps_frac": "fraction of steps that shared their state with another step of their group "
    "(GiGPO step credit, grpo.anchor_weight > 0)",
    "policy/anchor_groups": "groups of steps acting on one state that the step credit compared",
    "policy/entropulse_phases": "Entropulse SFT phases run so far (seed 001 §3.3); the charts shade each one",
    "policy/entropulse_sft_loss": "SFT loss at the end of the Entropulse phase of this update",
    "policy/entropulse_sft_examples": "examples (steps of stored successes) the Entropulse phase trained on",
    "policy/entropulse_sft_s": "seconds the Entropulse SFT phase took",
    # value
    "value/loss": "critic loss of the update",
    "value/explained_variance": "1 − Var(return − V) / Var(return) over the batch",
    "value/reward_corr": "correlation of V(s_0) with the episode's final reward",
    "value/mean": "mean predicted value over the batch",
    "value/pretraining": "1 while the critic is pretrained on a fixed policy, else 0",
    "value/pretrain_updates": "critic warm-up updates done (of ppo.value_pretrain_max_updates at most)",
    # efficiency
    "efficiency/actions_per_min": "environment actions executed per minute across the fleet",
    "efficiency/episodes_per_min": "episodes finished per minute",
    "efficiency/env_utilization": "fraction of environment time spent stepping (not waiting on the policy)",
    "efficiency/trainer_idle_frac": "fraction of trainer time spent waiting for data",
    "efficiency/staleness_mean": "mean policy-version lag of the trained steps",
    "efficiency/stale_steps_frac": "share of the update's steps beyond the staleness bound (no loss on them)",
    "efficiency/staleness_max": "largest policy-version lag of the trained steps",
    "efficiency/pool_fill": "completed trajectories waiting in the rollout pool",
    "efficiency/weight_sync_s": "seconds to bring new weights to every rollout server",
    "efficiency/update_s": "seconds one trainer update took",
    # curation
    "curation/rollouts_per_task_mean": "mean N (rollouts per task) chosen by dynamic sampling",
    "curation/no_signal_groups": "groups skipped because all rollouts scored the same",
    "curation/pool_injections": "experience-pool successes injected into all-failed groups",
    "curation/cache_injections": "BEPA cached successes injected into all-failed groups",
    "curation/replay_injections": "replay-buffer successes injected into all-failed groups",
    "curation/stale_dropped": "rollouts dropped for exceeding the staleness bound",
    "curation/step_limit_mean": "mean per-task step limit (longest success so far, capped)",
    # fleet
    "fleet/live": "environments alive",
    "fleet/idle": "environments alive but not leased",
    "fleet/crashed": "environments that crashed since the last step",
    "fleet/reclaimed": "leases reclaimed from dead workers since the last step",
    "fleet/boot_s": "mean environment boot time in seconds",
    "fleet/crash_rate": "crashed ÷ started episodes since the last step",
}

# name prefix → what the key after it is
KEYED_PREFIXES: dict[str, str] = {
    "outcome/success_rate/task/": "success rate of one task (key: the task's external id)",
    "outcome/success_rate/domain/": "success rate of one domain or pool (key: its name)",
    "curation/rollouts_per_task/": "N chosen for one task (key: the task's external id)",
    "curation/bucket/": "tasks in one curriculum bucket (key: the bucket)",
}

MAX_NAME_LENGTH = 200


def metric_group(name: str) -> str:
    return name.split("/", 1)[0]


def metric_name_problem(name: str) -> str | None:
    """Why `name` may not be recorded, or None when it is canonical (or keyed under a prefix)."""
    if name in METRICS:
        return None
    if len(name) > MAX_NAME_LENGTH:
        return f"longer than {MAX_NAME_LENGTH} characters"
    for prefix in KEYED_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return None
    return "not a canonical metric name (see rl_control/metric_names.py)"


def metric_catalogue() -> list[dict[str, str | bool]]:
    """Every name with its group and description; keyed prefixes last, flagged `keyed` (for the dashboard)."""
    rows: list[dict[str, str | bool]] = [
        {"name": n, "group": metric_group(n), "description": d, "keyed": False} for n, d in METRICS.items()
    ]
    rows += [
        {"name": p, "group": metric_group(p), "description": d, "keyed": True}
        for p, d in KEYED_PREFIXES.items()
    ]
    return rows
