"""Token-level RL trainer for the embedded policy: PPO and step-wise GRPO on stored rollouts (SPEC §8).

The Celery engine (rl_control/engine) collects trajectories from the policy server and hands them
here as `TrajectorySample`s; one `PolicyTrainer.update` is one training step (one policy version).

Data layout. Every policy call of a rollout is a `StepSample`: the prompt the policy read (rebuilt
with `step_sample_from` exactly as `EmbeddedPolicy.inputs_for` / the policy server build it), the
sampled response token ids and their rollout log-probs. The trainer scores a batch of steps as rows
[S, T] (S = steps, T = longest response) with `generation.score`, i.e. under the same
grammar-masked, temperature-scaled distribution the sampler used, so the recomputed log-probs equal
the rollout's for an unchanged model (ratio = 1 at version 0). Rows run in padded batches of similar
prompt length (batch.length_buckets), so a batch's short prompts do not pay for its longest one.

PPO (seed 000 §2.5.4): the tokens of all steps of one trajectory form one token-level episode
[L = Σ_j T_j]; a step's shaped reward sits on its last token, the trajectory reward on the last token
of the last step. Decoupled GAE: policy advantages with λ_policy (fixed, or length-adaptive
1 − 1/(α·L)), value targets with λ_critic (1.0 = Monte Carlo). Clip-higher surrogate, clipped value
loss on the shared value head, optional truncated IS weight min(π_old / π_rollout, C) for stale steps.
With one epoch of one minibatch (`ppo.single_pass`) the update's only gradient step is at π_old, so
the pass that scores π_old is the training pass (no second forward).

Step-wise GRPO (seed 002 Eq. 1–2, seed 001 §3.2): every step gets R_traj (+ its shaped reward),
z-scored over all steps of the group (population std); steps outside the top `entropy_keep_fraction`
of mean token entropy of their group are masked out; truncated IS; optional k3 KL to a reference.

Both: a step whose policy version lags the trainer's by more than `curation.staleness_bound` gets no
loss and is left out of the training passes (step-level staleness: in async mode a long rollout spans
several versions).

Value pretraining (seed 000 §2.5.4): `pretrain_value` trains only the value head (policy fixed) on
λ = 1 returns until `value_pretrain_done`. Entropulse (seed 001 §3.3): `update` feeds a
`PlateauDetector`; when `plateaued`, the caller runs `entropulse(successes)` = SFT on stored
successes (workers/policy/sft.py) followed by `reset_reference()`.

`save` writes an HF checkpoint directory `EmbeddedPolicy.from_pretrained` loads plus
`trainer_state.pt` (optimizers, RNG, counters, reference weights, plateau / value-pretraining
monitors, the caller's curation state); `resume` restores it so the next update is bit-identical to
the one an uninterrupted trainer would have made. With `weight_ema` > 0 the trainer also keeps an
exponential moving average of the weights, saved as a second checkpoint directory `<out>/ema`.

Layout: core.py (PolicyTrainer), ppo.py / grpo.py (the two update passes and value pretraining),
batch.py (the row layout and padded tensors), state.py (trainer_state.pt: what `save` writes and
`resume` restores), vlm.py (VLMPolicyTrainer: the same algorithms on a
Hugging Face vision-language policy, LoRA or full fine-tuning; `trainer_for` picks by checkpoint).
"""

from pathlib import Path
from typing import Any

from workers.rl.config import RLConfig
from workers.rl.trainer.core import PolicyTrainer
from workers.rl.trainer.state import EMA_DIR, STATE_FILE


def trainer_for(
    checkpoint_dir: str | Path, config: RLConfig, seed: int = 0, vlm: dict[str, Any] | None = None
) -> PolicyTrainer:
    """The trainer for a checkpoint directory: `PolicyTrainer` for the embedded model,
    `VLMPolicyTrainer` (workers.rl.trainer.vlm) for a Qwen2.5-VL-family HF checkpoint."""
    from workers.policy.hf_vlm import checkpoint_kind

    if checkpoint_kind(checkpoint_dir) == "hf_vlm":
        from workers.rl.trainer.vlm import VLMPolicyTrainer

        return VLMPolicyTrainer(checkpoint_dir, config, seed=seed, vlm=vlm)
    return PolicyTrainer(checkpoint_dir, config, seed=seed)


def resume_trainer(out_dir: str | Path, config: RLConfig | None = None) -> PolicyTrainer:
    """`resume` of the trainer class that saved `out_dir`."""
    from workers.policy.hf_vlm import checkpoint_kind

    if checkpoint_kind(out_dir) == "hf_vlm":
        from workers.rl.trainer.vlm import VLMPolicyTrainer

        return VLMPolicyTrainer.resume(out_dir, config)
    return PolicyTrainer.resume(out_dir, config)


__all__ = ["EMA_DIR", "STATE_FILE", "PolicyTrainer", "resume_trainer", "trainer_for"]
