"""Ensemble RND: novelty, the variance formula, normalisation, the frozen target, training on Fabric."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lightning.fabric import Fabric

from playtester.capture.frames import FrameSpec
from playtester.exploration.rnd import EnsembleRND, RNDConfig, RunningMeanStd, frames_to_rnd_input, train_predictors

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def smooth_frames(n: int, seed: int) -> torch.Tensor:
    """Natural-looking frames: coarse random colour fields, upsampled to 64×64."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, 6, 6, generator=g)
    return (F.interpolate(coarse, size=64, mode="bilinear", align_corners=False) * 255).round().to(torch.uint8)


def on_fabric(rnd: EnsembleRND):
    """The RND and its optimiser set up on a CPU Fabric, and a `train(steps)` for them."""
    fabric = Fabric(accelerator="cpu", devices=1)
    model, optimizer = fabric.setup(rnd, rnd.configure_optimizer())
    return model, optimizer, lambda steps=None: train_predictors(model, optimizer, fabric, steps)


def small_config(**kwargs) -> RNDConfig:
    base = dict(num_predictors=3, obs_warmup_frames=32, batch_size=32, train_steps=1, learning_rate=1e-3)
    base.update(kwargs)
    return RNDConfig(**base)


@pytest.mark.parametrize("predictors", ["independent", "shared_trunk"])
def test_reward_is_higher_for_unseen_frames_than_for_trained_ones(predictors):
    torch.manual_seed(0)
    rnd, _, train = on_fabric(EnsembleRND(small_config(num_predictors=2, predictors=predictors, obs_warmup_frames=16, batch_size=16)))
    seen, unseen = smooth_frames(16, seed=1), smooth_frames(16, seed=2)
    rnd.observe(seen)
    before = rnd.reward(seen).mean().item()
    train(60)
    after_seen, after_unseen = rnd.reward(seen).mean().item(), rnd.reward(unseen).mean().item()
    assert after_seen < 0.5 * before
    assert after_unseen > 2.0 * after_seen


def test_ensemble_reward_equals_the_variance_formula_on_fixed_outputs():
    rnd = EnsembleRND(small_config(obs_warmup_frames=0, out_dim=2))
    fixed = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    with torch.no_grad():
        for predictor, out in zip(rnd.predictors, fixed):
            last = predictor[-1][-1]  # the head's final Linear
            last.weight.zero_()
            last.bias.copy_(out)
    # dim 0: 1, 3, 5 → mean 3, variance 8/3; dim 1: 2, 4, 9 → mean 5, variance 26/3
    expected = (8 / 3 + 26 / 3) / 2
    assert EnsembleRND.ensemble_variance(fixed.unsqueeze(1)).item() == pytest.approx(expected)
    reward = rnd.reward(smooth_frames(4, seed=3))
    assert reward.tolist() == pytest.approx([expected] * 4, rel=1e-5)


def test_single_predictor_reward_is_the_prediction_error():
    rnd = EnsembleRND(small_config(num_predictors=1, reward="prediction_error", obs_warmup_frames=0, out_dim=2))
    with torch.no_grad():
        last = rnd.predictors[0][-1][-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.5, -0.5]))
    frames = smooth_frames(3, seed=4)
    target = rnd.target_features(rnd.prepare(frames))
    expected = ((torch.tensor([0.5, -0.5]) - target) ** 2).mean(dim=1)
    assert rnd.reward(frames).tolist() == pytest.approx(expected.tolist(), rel=1e-5)


def test_target_is_frozen_and_unchanged_by_training():
    rnd, _, train = on_fabric(EnsembleRND(small_config(num_predictors=2)))
    assert all(not p.requires_grad for p in rnd.target.parameters())
    before = [p.clone() for p in rnd.target.parameters()]
    rnd.observe(smooth_frames(32, seed=5))
    train(2)
    assert all(torch.equal(a, b) for a, b in zip(before, rnd.target.parameters()))


def test_no_reward_and_no_training_before_the_warm_up():
    rnd, _, train = on_fabric(EnsembleRND(small_config(obs_warmup_frames=64)))
    frames = smooth_frames(32, seed=6)
    rnd.observe(frames)
    assert not rnd.warmed_up
    assert rnd.reward(frames).abs().max().item() == 0.0
    assert np.isnan(train())
    rnd.observe(frames)
    assert rnd.warmed_up and rnd.reward(frames).min().item() > 0.0


def test_replay_buffer_keeps_the_newest_frames():
    rnd = EnsembleRND(small_config(buffer_size=4))
    frames = torch.arange(6, dtype=torch.uint8).view(6, 1, 1, 1).expand(6, 3, 64, 64).contiguous()
    rnd.observe(frames)
    assert int(rnd.replay_size) == 4
    assert sorted(rnd.replay[:, 0, 0, 0].tolist()) == [2, 3, 4, 5]


def test_running_mean_std_matches_numpy():
    rms = RunningMeanStd((2,), epsilon=0.0)
    data = np.random.default_rng(0).normal(size=(30, 2)) * [1.0, 3.0] + [5.0, -2.0]
    for chunk in np.split(data, 3):
        rms.update(torch.as_tensor(chunk))
    assert rms.mean.numpy() == pytest.approx(data.mean(0))
    assert rms.var.numpy() == pytest.approx(data.var(0))


def test_rewards_are_divided_by_the_std_of_their_discounted_sum():
    rnd = EnsembleRND(small_config(obs_warmup_frames=0, reward_gamma=0.5))
    raw = torch.ones(3, 1)
    out = rnd.normalize_rewards(raw)
    sums = np.array([1.0, 1.5, 1.75])  # 1, 0.5·1 + 1, 0.5·1.5 + 1
    assert out.squeeze(1).tolist() == pytest.approx((1.0 / sums.std()) * np.ones(3), rel=1e-3)
    # The discounted sum carries on into the next rollout: 0.5·1.75 + 1 = 1.875.
    assert rnd.reward_filter.tolist() == pytest.approx([1.75])
    rnd.normalize_rewards(raw)
    assert rnd.reward_filter.item() == pytest.approx(0.5 * (0.5 * 1.875 + 1) + 1)


def test_state_dict_round_trip_restores_rewards():
    torch.manual_seed(1)
    a, _, train = on_fabric(EnsembleRND(small_config()))
    a.observe(smooth_frames(32, seed=7))
    train(2)
    a.normalize_rewards(torch.rand(4, 2))
    b = EnsembleRND(small_config())
    b.load_state_dict(a.state_dict())
    frames = smooth_frames(8, seed=8)
    assert torch.equal(a.reward(frames), b.reward(frames))
    assert torch.equal(a.reward_filter, b.reward_filter)


def test_frames_to_rnd_input_resizes_and_moves_channels_first():
    frames = np.zeros((2, 120, 160, 3), dtype=np.uint8)
    frames[:, :, :80] = 255
    x = frames_to_rnd_input(frames, FrameSpec.square(64))
    assert x.shape == (2, 3, 64, 64) and x.dtype == torch.uint8
    assert x[0, 0, 10, 5].item() == 255 and x[0, 0, 10, 60].item() == 0


@pytest.mark.parametrize("kwargs", [dict(num_predictors=0), dict(num_predictors=1), dict(predictors="bogus"), dict(frames=FrameSpec.square(16))])
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        RNDConfig(**kwargs)


@pytest.mark.parametrize("train_steps", [0, 3])
def test_a_training_takes_the_configs_number_of_steps(train_steps, monkeypatch):
    """`train_steps` (2 in a run) is how many optimiser steps one training takes,
    each on a new draw from the replay; 0 leaves the predictors as they are."""
    torch.manual_seed(0)
    rnd, optimizer, train = on_fabric(EnsembleRND(small_config(train_steps=train_steps, obs_warmup_frames=16, batch_size=16)))
    rnd.observe(smooth_frames(16, seed=1))
    draws, real = [], EnsembleRND.replay_sample
    monkeypatch.setattr(EnsembleRND, "replay_sample", lambda self, generator=None: draws.append(1) or real(self, generator))
    before = [p.detach().clone() for p in rnd.module.predictors.parameters()]
    loss = train()
    assert len(draws) == train_steps
    changed = any(not torch.equal(a, b) for a, b in zip(before, rnd.module.predictors.parameters()))
    assert changed == (train_steps > 0) and (np.isnan(loss) == (train_steps == 0))
