"""PPO's maths against hand-worked values (the tier-1 tests of STYLE item 10)."""

from __future__ import annotations

import math

import pytest
import torch

from playtester.exploration.losses import compute_gae, entropy_bonus, explained_variance, normalize_advantages, policy_loss, value_loss


def _col(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64).unsqueeze(1)  # T×1


def test_gae_matches_hand_computed_example_with_an_episode_end():
    # γ = 0.9, λ = 0.8; obs[2] starts a new episode, so the transition at t = 1 ended one.
    rewards, values, dones = _col(1, 2, 3), _col(0.5, 1.0, 1.5), _col(0, 0, 1)
    adv, ret = compute_gae(rewards, values, dones, torch.tensor([2.0], dtype=torch.float64), torch.tensor([0.0]), 0.9, 0.8)
    # t=2: δ = 3 + 0.9·2.0 − 1.5 = 3.3                      A = 3.3
    # t=1: δ = 2 + 0 − 1.0 = 1.0 (episode ended)           A = 1.0
    # t=0: δ = 1 + 0.9·1.0 − 0.5 = 1.4                      A = 1.4 + 0.72·1.0 = 2.12
    assert adv.squeeze(1).tolist() == pytest.approx([2.12, 1.0, 3.3])
    assert ret.squeeze(1).tolist() == pytest.approx([2.62, 2.0, 4.8])


def test_gae_non_episodic_stream_runs_across_the_episode_end():
    rewards, values = _col(1, 2, 3), _col(0.5, 1.0, 1.5)
    zeros = torch.zeros_like(rewards)
    adv, _ = compute_gae(rewards, values, zeros, torch.tensor([2.0], dtype=torch.float64), torch.tensor([0.0]), 0.9, 0.8)
    # t=1: δ = 2 + 0.9·1.5 − 1.0 = 2.35, A = 2.35 + 0.72·3.3 = 4.726; t=0: A = 1.4 + 0.72·4.726
    assert adv.squeeze(1).tolist() == pytest.approx([1.4 + 0.72 * 4.726, 4.726, 3.3])


def test_gae_last_step_uses_next_done():
    adv, _ = compute_gae(_col(1.0), _col(0.0), _col(0.0), torch.tensor([5.0], dtype=torch.float64), torch.tensor([1.0]), 0.9, 0.8)
    assert adv.item() == pytest.approx(1.0)  # the bootstrap value is cut by next_done


def test_gae_environments_are_independent():
    rewards = torch.tensor([[1.0, 0.0], [2.0, 1.0]])
    values = torch.zeros(2, 2)
    dones = torch.zeros(2, 2)
    adv, _ = compute_gae(rewards, values, dones, torch.zeros(2), torch.zeros(2), 0.5, 1.0)
    assert adv[:, 0].tolist() == pytest.approx([2.0, 2.0])  # 1 + 0.5·2
    assert adv[:, 1].tolist() == pytest.approx([0.5, 1.0])


RATIOS = torch.tensor([1.5, 0.5, 1.0])


def test_policy_loss_hand_computed_with_clipping():
    new, old = RATIOS.log(), torch.zeros(3)
    pg_loss, approx_kl, clipfrac = policy_loss(new, old, torch.tensor([1.0, 1.0, -1.0]), 0.2, normalize=False)
    # per sample max(−A·r, −A·clip(r)): max(−1.5, −1.2) = −1.2; max(−0.5, −0.8) = −0.5; max(1, 1) = 1
    assert pg_loss.item() == pytest.approx((-1.2 - 0.5 + 1.0) / 3)
    assert clipfrac.item() == pytest.approx(2 / 3)
    kl = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5)) + 0.0) / 3
    assert approx_kl.item() == pytest.approx(kl)


def test_policy_loss_uses_normalised_advantages():
    new, old = RATIOS.log(), torch.zeros(3)
    adv = torch.tensor([1.0, 2.0, 3.0])  # normalised: [−1, 0, 1]
    loss, _, _ = policy_loss(new, old, adv, 0.2, normalize=True)
    # max(1.5, 1.2) = 1.5; 0; max(−1, −1) = −1
    assert loss.item() == pytest.approx(0.5 / 3)
    scaled, _, _ = policy_loss(new, old, adv * 10 + 5, 0.2, normalize=True)
    assert scaled.item() == pytest.approx(loss.item(), abs=1e-6)
    raw, _, _ = policy_loss(new, old, adv, 0.2, normalize=False)
    assert raw.item() != pytest.approx(loss.item())


def test_normalize_advantages_zero_mean_unit_std():
    out = normalize_advantages(torch.tensor([1.0, 2.0, 3.0, 10.0]))
    assert out.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert out.std().item() == pytest.approx(1.0, abs=1e-6)


def test_value_loss_clipped_and_unclipped():
    new, old, ret = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 0.0])
    # clipped values 1.2 and 0.8 → errors 3.24 and 0.64, larger than the unclipped 1 and 0
    assert value_loss(new, old, ret, 0.2).item() == pytest.approx(0.5 * (3.24 + 0.64) / 2)
    assert value_loss(new, old, ret, None).item() == pytest.approx(0.5 * (1.0 + 0.0) / 2)


def test_entropy_of_uniform_and_certain_policies():
    assert entropy_bonus(torch.zeros(5, 4)).item() == pytest.approx(math.log(4))
    assert entropy_bonus(torch.tensor([[100.0, 0.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-6)


def test_explained_variance():
    y = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(y, y) == pytest.approx(1.0)
    assert explained_variance(torch.full((3,), 2.0), y) == pytest.approx(0.0)
