"""E3B's elliptical episodic bonus: the maths against hand-worked values, episodes, rollouts, resume."""

from __future__ import annotations

import pytest
import torch

from playtester.exploration.episodic import EllipticalEpisodicBonus, EpisodicConfig, sherman_morrison

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def bonus_2d(num_envs: int = 1, ridge: float = 0.5) -> EllipticalEpisodicBonus:
    """The bonus on 2-D features used as they are (no projection)."""
    return EllipticalEpisodicBonus(EpisodicConfig(ridge=ridge, dim=0), feature_dim=2, num_envs=num_envs)


def test_sherman_morrison_equals_the_direct_inverse():
    g = torch.Generator().manual_seed(0)
    d = 5
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    c = a @ a.T + 0.3 * torch.eye(d, dtype=torch.float64)
    phi = torch.randn(d, generator=g, dtype=torch.float64)
    bonus, updated = sherman_morrison(torch.linalg.inv(c).unsqueeze(0), phi.unsqueeze(0))
    assert bonus.item() == pytest.approx(float(phi @ torch.linalg.solve(c, phi)), rel=1e-10)
    torch.testing.assert_close(updated[0], torch.linalg.inv(c + torch.outer(phi, phi)), rtol=1e-9, atol=1e-9)


def test_a_repeated_vector_earns_one_over_ridge_plus_n():
    # λ = 0.5, φ = (1, 0) seen first at the episode's start, then reached 3 times:
    # C = (λ + n) on that axis, so the bonus of the n-th time reached is 1 / (λ + n).
    episodic = bonus_2d(ridge=0.5)
    e1 = torch.tensor([[1.0, 0.0]])
    start = torch.tensor([[True], [False], [False]])
    raw = episodic.rollout_bonus(e1.expand(3, 1, 2), e1.expand(3, 1, 2), start)
    assert raw[:, 0].tolist() == pytest.approx([1 / 1.5, 1 / 2.5, 1 / 3.5])


def test_a_new_direction_earns_one_over_ridge_and_the_features_length_does_not_count():
    # After (1, 0): the orthogonal (0, 3) (unit length: (0, 1)) earns 1/λ = 2; then (1, 1)/√2:
    # C = diag(1.5, 1.5), so φᵀC⁻¹φ = 1/1.5.
    episodic = bonus_2d(ridge=0.5)
    start_features = torch.tensor([[[1.0, 0.0]], [[0.0, 0.0]]])
    reached = torch.tensor([[[0.0, 3.0]], [[2.0, 2.0]]])
    raw = episodic.rollout_bonus(start_features, reached, torch.tensor([[True], [False]]))
    assert raw[:, 0].tolist() == pytest.approx([2.0, 1 / 1.5])


def test_c_starts_again_at_each_episode_start_and_runs_on_across_rollouts():
    episodic = bonus_2d(ridge=0.5)
    e1 = torch.tensor([[1.0, 0.0]])
    # rollout 1: an episode starts, reaches e1 twice; rollout 2 goes on with that episode, then a
    # new one starts at its second step.
    first = episodic.rollout_bonus(e1.expand(2, 1, 2), e1.expand(2, 1, 2), torch.tensor([[True], [False]]))
    second = episodic.rollout_bonus(e1.expand(2, 1, 2), e1.expand(2, 1, 2), torch.tensor([[False], [True]]))
    assert first[:, 0].tolist() == pytest.approx([1 / 1.5, 1 / 2.5])
    assert second[:, 0].tolist() == pytest.approx([1 / 3.5, 1 / 1.5])


def test_each_game_instance_has_its_own_c():
    episodic = bonus_2d(num_envs=2, ridge=0.5)
    e1, e2 = [1.0, 0.0], [0.0, 1.0]
    start_features = torch.tensor([[e1, e1], [e1, e1]])
    reached = torch.tensor([[e1, e2], [e1, e2]])
    raw = episodic.rollout_bonus(start_features, reached, torch.tensor([[True, True], [False, False]]))
    assert raw[:, 0].tolist() == pytest.approx([1 / 1.5, 1 / 2.5])  # the same frame again and again
    assert raw[:, 1].tolist() == pytest.approx([2.0, 1 / 1.5])  # a new direction, then it again


def test_a_run_memory_is_one_c_for_every_instance_and_every_episode():
    # λ = 0.5, memory: run, two instances, taken one after the other within a step.
    # Step 0: instance 0 starts at e1 (joins: C_e1 = 1.5), reaches e1 (1/1.5; C_e1 = 2.5); instance 1
    # starts at e1 (C_e1 = 3.5), reaches e2 (new: 1/0.5 = 2; C_e2 = 1.5).
    # Step 1: instance 0 starts a new episode at e2 (C_e2 = 2.5), reaches e2 (1/2.5; 3.5); instance 1
    # reaches e1 (1/3.5; C_e1 = 4.5). Nothing starts again.
    episodic = EllipticalEpisodicBonus(EpisodicConfig(ridge=0.5, dim=0, memory="run"), feature_dim=2, num_envs=2)
    e1, e2 = [1.0, 0.0], [0.0, 1.0]
    start_features = torch.tensor([[e1, e1], [e2, e2]])
    reached = torch.tensor([[e1, e2], [e2, e1]])
    raw = episodic.rollout_bonus(start_features, reached, torch.tensor([[True, True], [True, False]]))
    assert raw[0].tolist() == pytest.approx([1 / 1.5, 2.0])
    assert raw[1].tolist() == pytest.approx([1 / 2.5, 1 / 3.5])
    # a later rollout: instance 0 reaches e2 (1/3.5); instance 1 starts a new episode at e1, which
    # the run remembers (C_e1 = 5.5 with its start frame), and reaches it (1/5.5)
    later = episodic.rollout_bonus(torch.tensor([[e1, e1]]), torch.tensor([[e2, e1]]), torch.tensor([[False, True]]))
    assert later[0].tolist() == pytest.approx([1 / 3.5, 1 / 5.5])


def test_the_projection_is_fixed_by_its_seed_and_keeps_the_bonus_of_a_repeat():
    features = torch.randn(4, 1, 512, generator=torch.Generator().manual_seed(1))
    a = EllipticalEpisodicBonus(EpisodicConfig(dim=16, projection_seed=3), 512, 1)
    b = EllipticalEpisodicBonus(EpisodicConfig(dim=16, projection_seed=3), 512, 1)
    c = EllipticalEpisodicBonus(EpisodicConfig(dim=16, projection_seed=4), 512, 1)
    assert torch.equal(a.projection, b.projection) and not torch.equal(a.projection, c.projection)
    assert a.embed(features).shape == (4, 1, 16)
    same = features[:1].expand(4, 1, 512)
    raw = a.rollout_bonus(same, same, torch.tensor([[True], [False], [False], [False]]))
    assert raw[:, 0].tolist() == pytest.approx([1 / 1.1, 1 / 2.1, 1 / 3.1, 1 / 4.1], rel=1e-5)


def test_normalisation_divides_by_the_std_of_the_episodic_discounted_sum():
    episodic = bonus_2d()
    episodic.config.reward_gamma = 0.5
    raw = torch.tensor([[1.0], [1.0], [1.0]])
    # sums within the episode: 1, 1.5, then a new episode: 1 → variance of (1, 1.5, 1) = 1/18
    out = episodic.normalize(raw, torch.tensor([[True], [False], [True]]))
    std = (1 / 18 * 3 / (3 + 1e-4)) ** 0.5  # RunningMeanStd starts from a tiny prior count
    assert out[:, 0].tolist() == pytest.approx([1 / std] * 3, rel=1e-3)


def test_a_resumed_run_starts_c_again_and_keeps_the_projection_and_statistics():
    source = EllipticalEpisodicBonus(EpisodicConfig(dim=4), 6, 2)
    features = torch.randn(3, 2, 6, generator=torch.Generator().manual_seed(2))
    start = torch.tensor([[True, True], [False, False], [False, False]])
    raw = source.rollout_bonus(features, features, start)
    source.normalize(raw, start)
    resumed = EllipticalEpisodicBonus(EpisodicConfig(dim=4, projection_seed=9), 6, 2)
    resumed.inverse += 1.0  # as if it had played before the load
    resumed.load_state_dict(source.state_dict())
    assert torch.equal(resumed.projection, source.projection)
    torch.testing.assert_close(resumed.reward_rms.var, source.reward_rms.var)
    torch.testing.assert_close(resumed.inverse, torch.eye(4, dtype=torch.float64).repeat(2, 1, 1) / 0.1)
    assert not torch.equal(source.inverse, resumed.inverse)
    assert set(source.state_dict()) == {"projection", "reward_rms.mean", "reward_rms.var", "reward_rms.count"}


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="ridge"):
        EpisodicConfig(ridge=0.0)
    with pytest.raises(ValueError, match="dim"):
        EpisodicConfig(dim=-1)
    with pytest.raises(ValueError, match="memory"):
        EpisodicConfig(memory="forever")
