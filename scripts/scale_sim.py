"""A discrete-event simulation of N concurrent GUI environments sampling from vLLM servers
(docs/scale.md): how many actions per second the fleet gets, how busy each vLLM server is, how many
environments one env host carries, and what PostgreSQL / Redis see.

    python scripts/scale_sim.py [--envs 1000] [--servers 8] [--seconds 600]

Model (every figure an input, defaults from docs/scale.md):
- an environment loops: policy call (queue at its vLLM server + service) → env step (action +
  settle + screenshot) → … ; an episode is `steps` actions, then a reset;
- a vLLM server runs continuous batching: a request's service time is prefill + decode at the
  server's per-sequence decode rate, which falls as more sequences share the batch
  (tokens/s per sequence = peak_tps / max(1, active / knee));
- env hosts: `host_cores` cores, each environment costs `env_cpu_s` CPU seconds per step.
Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random


def simulate(
    *, envs: int, servers: int, seconds: float, seed: int = 0,
    prompt_tokens: int = 6500, response_tokens: int = 80, prefill_tps: float = 60_000.0,
    decode_tps_single: float = 45.0, batch_knee: int = 48, env_step_s: float = 1.2, steps: int = 15,
    reset_s: float = 3.0, host_cores: int = 32, env_cpu_s: float = 0.35,
) -> dict[str, float]:  # fmt: skip
    rng = random.Random(seed)
    active = [0] * servers  # sequences decoding per server
    busy_area = [0.0] * servers
    last_t = 0.0
    events: list[tuple[float, int, str, int]] = []  # (time, env, kind, server)
    for e in range(envs):
        heapq.heappush(events, (rng.uniform(0, env_step_s), e, "call", e % servers))
    actions = episodes = 0
    latencies: list[float] = []
    started: dict[int, float] = {}
    step_of = [0] * envs
    while events:
        t, e, kind, s = heapq.heappop(events)
        if t > seconds:
            break
        for k in range(servers):
            busy_area[k] += active[k] * (t - last_t)
        last_t = t
        if kind == "call":
            active[s] += 1
            per_seq = decode_tps_single / max(1.0, active[s] / batch_knee)
            service = (
                prompt_tokens / prefill_tps * max(1.0, active[s] / batch_knee) + response_tokens / per_seq
            )
            started[e] = t
            heapq.heappush(events, (t + service * rng.uniform(0.8, 1.2), e, "answer", s))
        elif kind == "answer":
            active[s] -= 1
            latencies.append(t - started.pop(e))
            actions += 1
            step_of[e] += 1
            pause = env_step_s * rng.uniform(0.5, 1.5)
            if step_of[e] >= steps:
                step_of[e] = 0
                episodes += 1
                pause += reset_s
            heapq.heappush(events, (t + pause, e, "call", s))
    latencies.sort()
    aps = actions / seconds
    return {
        "envs": envs,
        "vllm_servers": servers,
        "actions_per_s": round(aps, 1),
        "actions_per_s_per_vllm_server": round(aps / servers, 1),
        "episodes_per_min": round(60 * episodes / seconds, 1),
        "policy_latency_p50_s": round(latencies[len(latencies) // 2], 2) if latencies else 0.0,
        "policy_latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2) if latencies else 0.0,
        "mean_sequences_per_server": round(sum(busy_area) / servers / seconds, 1),
        "env_time_frac": round(1 - sum(latencies) / (envs * seconds), 3),
        "envs_per_host_cpu_bound": int(host_cores / (env_cpu_s * aps / envs)) if aps else 0,
        "postgres_step_rows_per_s": round(aps, 1),
        "redis_ops_per_s": round(aps * 6 + envs / 5, 1),  # lease renew, slot beat, pool push, acct, env call
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--envs", type=int, default=1000)
    parser.add_argument("--servers", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args()
    for servers in args.servers:
        print(json.dumps(simulate(envs=args.envs, servers=servers, seconds=args.seconds)))


if __name__ == "__main__":
    main()
