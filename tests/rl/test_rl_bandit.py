"""End-to-end sanity: a few clip-higher policy-gradient updates on a 2-arm bandit favour the better arm."""

import torch

from workers.rl.advantages import broadcast_trajectory_rewards, gae, stepwise_grpo_advantages
from workers.rl.losses import grpo_loss, ppo_policy_loss


def _sample(theta: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    return torch.multinomial(torch.softmax(theta.detach(), -1), n, replacement=True, generator=gen)


def test_grpo_steps_raise_probability_of_better_arm() -> None:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    theta = torch.zeros(2, requires_grad=True)  # logits; arm 1 pays 1, arm 0 pays 0
    opt = torch.optim.Adam([theta], lr=0.1)
    p_before = float(torch.softmax(theta.detach(), -1)[1])
    for _ in range(15):
        arms = _sample(theta, 8, gen)
        rewards = arms.float()
        adv = torch.cat(
            stepwise_grpo_advantages(broadcast_trajectory_rewards(rewards, [1] * 8), [0] * 8).advantages
        )
        old = torch.log_softmax(theta.detach(), -1)[arms].unsqueeze(1)
        for _ in range(2):  # two epochs: the second exercises the clipped ratio
            logp = torch.log_softmax(theta, -1)[arms].unsqueeze(1)
            loss, _ = grpo_loss(logp, old, adv.unsqueeze(1), torch.ones(8, 1), ref_logprobs=None)
            opt.zero_grad()
            loss.backward()
            opt.step()
    p_after = float(torch.softmax(theta.detach(), -1)[1])
    assert p_before == 0.5
    assert p_after > 0.9


def test_ppo_with_critic_baseline_raises_probability_of_better_arm() -> None:
    gen = torch.Generator().manual_seed(1)
    theta = torch.zeros(2, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.1)
    baseline = 0.5  # a fixed V(s) as if pretrained; single-step episodes
    for _ in range(15):
        arms = _sample(theta, 8, gen)
        rewards = (arms == 1).float().unsqueeze(1) * 1.0 + (arms == 0).float().unsqueeze(1) * 0.2
        adv, _ = gae(rewards, torch.full((8, 1), baseline), torch.ones(8, 1), gamma=1.0, lam=1.0)
        old = torch.log_softmax(theta.detach(), -1)[arms].unsqueeze(1)
        logp = torch.log_softmax(theta, -1)[arms].unsqueeze(1)
        loss, _ = ppo_policy_loss(logp, old, adv, torch.ones(8, 1), 0.2, 0.28)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(torch.softmax(theta.detach(), -1)[1]) > 0.9
