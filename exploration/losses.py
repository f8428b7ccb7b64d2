"""PPO's maths as small pure functions, each with a unit test against hand-worked values.

Shapes follow the rollout buffer: time first, then environments (`T×N`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Categorical


def compute_gae(
    rewards: Tensor,
    values: Tensor,
    dones: Tensor,
    next_value: Tensor,
    next_done: Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimates and returns for one reward stream.

    `rewards`, `values`, `dones` are `T×N`. `dones[t]` marks that `obs[t]` starts a new episode
    (the step before it ended one), the convention of the rollout loop; `next_value` and
    `next_done` (`N`) describe the observation after the last step. For a non-episodic stream
    (RND's intrinsic reward) pass zeros as `dones` and `next_done`: the return then runs on across
    episode boundaries.

    Returns `(advantages, returns)`, both `T×N`, with `returns = advantages + values`.
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done.float()
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1].float()
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def normalize_advantages(advantages: Tensor, eps: float = 1e-8) -> Tensor:
    """Zero mean, unit standard deviation over the minibatch (a single sample is only centred)."""
    if advantages.numel() < 2:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def policy_loss(
    newlogprob: Tensor,
    oldlogprob: Tensor,
    advantages: Tensor,
    clip_coef: float,
    normalize: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """PPO's clipped surrogate objective, negated so that it is minimised.

    The advantages are normalised here, inside the loss, when `normalize` is set, so that a caller
    cannot compute normalised advantages and then forget to use them.

    Returns `(pg_loss, approx_kl, clipfrac)`; `approx_kl` is the `(r − 1) − log r` estimator and
    `clipfrac` the share of samples whose ratio was clipped (both detached, for logging).
    """
    if normalize:
        advantages = normalize_advantages(advantages)
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return pg_loss, approx_kl, clipfrac


def value_loss(newvalue: Tensor, oldvalue: Tensor, returns: Tensor, clip_coef: float | None) -> Tensor:
    """Half the mean squared error to the returns; with `clip_coef`, PPO's clipped form.

    Clipped: the new value may move at most `clip_coef` from the value at collection time, and
    the larger of the clipped and unclipped errors is kept (a pessimistic bound).
    """
    v_loss_unclipped = (newvalue - returns) ** 2
    if clip_coef is None:
        return 0.5 * v_loss_unclipped.mean()
    v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()


def entropy_bonus(logits: Tensor) -> Tensor:
    """Mean entropy (nats) of the categorical distributions the logits describe."""
    return Categorical(logits=logits, validate_args=False).entropy().mean()


def explained_variance(predicted: Tensor, target: Tensor) -> float:
    """1 − Var(target − predicted) / Var(target): 1 is perfect, 0 no better than the mean."""
    var_y = target.var()
    if var_y == 0:
        return float("nan")
    return float(1.0 - (target - predicted).var() / var_y)
