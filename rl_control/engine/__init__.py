"""The distributed RL engine (SPEC §8, issue 7 items 2, 3, 6): Celery rollout workers, a data manager,
a streaming pool and a chunked trainer. More machines = more workers on the same queues.

    slots.py    env slots: one Celery task per slot owns a leased environment and runs one
                trajectory at a time (rollout-wise scheduling); heartbeats, fencing generations,
                reclaiming the slots of killed workers
    share.py    the fair share of rollout and train processes among running runs (weighted by
                env.priority), and why a run waits
    data.py     the data manager: rollout groups (task, N, step limit from the curator) handed out
                slot by slot, the streaming pool (Redis stream + durable rows in PostgreSQL),
                completed groups ready for training, the sync-mode batch barrier
    rollout.py  one episode: reset, sample from the policy server (OpenAIPolicy, token ids and
                log-probs), step, store Trajectory(source rl) / Step rows, verify, shape the reward
    learner.py  the trainer chunk: waits for the minimum batch, curates groups, calls
                workers.rl.trainer.PolicyTrainer.update, saves, pushes the new weights to the policy
                servers one at a time, records the version switch and the SPEC §9 metrics
    bench.py    `bench rollout` (async vs sync) and `bench learn` (MiniWoB++ SFT start → RL)

Celery tasks live in rl_control/tasks.py (rollout_slot on `rollout`, train_chunk on `train`,
engine_watch on `default`); rl_control/services/runs.py starts the engine (launch, resume), the
transitions of rl_control/services/state.py stop a run's policy servers.
"""
