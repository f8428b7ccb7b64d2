"""The preference reward and the adaptive α of PPGTA §IV-C."""

from __future__ import annotations

import math

import pytest
import torch

from playtester.exploration.preference import AlphaSchedule, AlphaScheduleConfig, mix_rewards, preference_reward


def test_preference_reward_is_zero_for_identical_policies():
    logits = torch.randn(6, 9)
    assert preference_reward(logits, logits.clone()).abs().max().item() < 1e-6
    # Logits that differ by a constant give the same distribution.
    assert preference_reward(logits, logits + 3.0).abs().max().item() < 1e-5


def test_preference_reward_is_never_positive_under_float_rounding():
    # Same distributions through different logits: the float32 KL rounds below zero for many
    # rows (about 3 in 10 of these); the reward must stay a penalty, never a bonus.
    logits = torch.randn(10_000, 9, generator=torch.Generator().manual_seed(0)) * 5
    assert (preference_reward(logits, logits + 3.0) <= 0).all()


def test_preference_reward_is_negative_kl_hand_computed():
    explorer = torch.tensor([[0.5, 0.5]]).log()
    preference = torch.tensor([[0.25, 0.75]]).log()
    kl = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert preference_reward(explorer, preference).item() == pytest.approx(-kl, abs=1e-6)


def test_preference_reward_negative_whenever_policies_differ():
    torch.manual_seed(0)
    r = preference_reward(torch.randn(100, 9), torch.randn(100, 9))
    assert (r < 0).all()


def test_preference_reward_refuses_different_action_spaces():
    with pytest.raises(ValueError, match="same actions"):
        preference_reward(torch.zeros(1, 9), torch.zeros(1, 7))


def test_mix_rewards():
    assert mix_rewards(torch.tensor(-1.0), torch.tensor(2.0), 0.8).item() == pytest.approx(0.8 * -1 + 0.2 * 2)


def test_alpha_schedule_follows_the_paper_on_a_scripted_sequence():
    schedule = AlphaSchedule(1)
    script = [
        # r^e_t, expected α after the step
        (1.0, 0.80),    # first transition: nothing to compare with
        (0.75, 0.75),   # Δ = −0.25 < −0.1: −0.05
        (0.5, 0.70),    # Δ = −0.25
        (0.45, 0.70),   # Δ = −0.05: not a drop, not a rise
        (0.25, 0.65),
        (0.0, 0.60),
        (-0.25, 0.55),
        (-0.5, 0.50),
        (-0.75, 0.50),  # floor at 0.5
        (-0.75, 0.50),  # Δ = 0: unchanged
        (-0.5, 0.60),   # Δ = +0.25: rises again, +0.1
        (-0.25, 0.70),
        (0.0, 0.80),
        (0.5, 0.80),    # ceiling at 0.8
        (0.25, 0.75),   # and down again
    ]
    for reward, expected in script:
        alpha = schedule.step(torch.tensor([reward]))
        assert alpha.item() == pytest.approx(expected, abs=1e-6), (reward, expected)


def test_alpha_schedule_ignores_the_change_across_an_episode_start():
    schedule = AlphaSchedule(1)
    schedule.step(torch.tensor([1.0]))
    alpha = schedule.step(torch.tensor([0.0]), episode_start=torch.tensor([True]))
    assert alpha.item() == pytest.approx(0.8)
    assert schedule.step(torch.tensor([-0.5])).item() == pytest.approx(0.75)  # within the episode again


def test_alpha_schedule_is_per_environment():
    schedule = AlphaSchedule(2)
    schedule.step(torch.tensor([1.0, 1.0]))
    alpha = schedule.step(torch.tensor([0.5, 1.5]))
    assert alpha.tolist() == pytest.approx([0.75, 0.8])


def test_alpha_schedule_state_round_trip():
    a = AlphaSchedule(2)
    a.step(torch.tensor([1.0, 1.0]))
    a.step(torch.tensor([0.5, 0.5]))
    b = AlphaSchedule(2)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.step(torch.tensor([0.0, 1.0])), b.step(torch.tensor([0.0, 1.0])))


@pytest.mark.parametrize("kwargs", [dict(minimum=0.9), dict(start=0.3), dict(decrease=-0.05), dict(drop_threshold=0.1)])
def test_alpha_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        AlphaScheduleConfig(**kwargs)
