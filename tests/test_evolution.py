"""Wuji's operators against hand-worked values: Pareto fronts, crowding distance, survivors,
tournaments, crossover and mutation of weights; state coverage buckets; PPO's early stop."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from playtester.evolution import operators as ea
from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig
from playtester.exploration.ppo import PPOConfig, train
from playtester.evolution.state_coverage import StateCoverageConfig, state_key

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INF = np.inf


def test_dominance_is_strict_and_ties_do_not_dominate():
    assert ea.dominates(np.array([2, 2]), np.array([2, 1]))
    assert not ea.dominates(np.array([2, 1]), np.array([2, 2]))
    assert not ea.dominates(np.array([3, 3]), np.array([3, 3]))
    assert not ea.dominates(np.array([1, 5]), np.array([2, 4]))


def test_non_dominated_sort_hand_worked():
    scores = [[1, 5], [2, 4], [3, 3], [2, 2], [1, 1], [3, 3]]
    # [3,3] twice: equal rows share the first front; [2,2] is beaten by [2,4] and [3,3]; [1,1] by all
    assert ea.non_dominated_sort(scores) == [[0, 1, 2, 5], [3], [4]]
    assert ea.non_dominated_sort([[1, 1], [2, 2], [3, 3]]) == [[2], [1], [0]]  # one-member fronts
    assert ea.non_dominated_sort([[4, 4]]) == [[0]]
    with pytest.raises(ValueError):
        ea.non_dominated_sort([1, 2, 3])


def test_crowding_distance_hand_worked():
    # objective 0 spans 3, objective 1 spans 4; the extremes are infinite
    d = ea.crowding_distance([[1, 5], [2, 4], [3, 3], [4, 1]])
    assert d[0] == INF and d[3] == INF
    assert d[1] == pytest.approx((3 - 1) / 3 + (5 - 3) / 4)
    assert d[2] == pytest.approx((4 - 2) / 3 + (4 - 1) / 4)
    # fronts of one or two members are all boundary
    assert list(ea.crowding_distance([[1, 2]])) == [INF]
    assert list(ea.crowding_distance([[1, 2], [2, 1]])) == [INF, INF]
    # a flat objective adds nothing (no division by zero); its stable-sort ends are still boundary
    assert list(ea.crowding_distance([[1, 2], [2, 2], [3, 2]])) == [INF, pytest.approx(1.0), INF]
    # tied rows: each gets its own neighbours' gaps
    d = ea.crowding_distance([[1, 3], [2, 2], [2, 2], [3, 1]])
    assert list(d) == [INF, pytest.approx(1.0), pytest.approx(1.0), INF]


def test_survivors_take_whole_fronts_then_the_sparsest():
    scores = np.array([[1, 5], [2, 4], [3, 3], [4, 1], [1, 1], [0, 0]])
    assert ea.select_survivors(scores, 6) == [0, 1, 2, 3, 4, 5]
    assert ea.select_survivors(scores, 5) == [0, 1, 2, 3, 4]
    # front one has 4 members for 3 places: both extremes (inf) then the larger distance (row 2)
    assert ea.select_survivors(scores, 3) == [0, 3, 2]
    assert ea.select_survivors(scores, 2) == [0, 3]
    assert ea.select_by_objective(scores, 2, 1) == [0, 1]
    with pytest.raises(ValueError):
        ea.select_survivors(scores, 7)


def test_binary_tournament_prefers_the_dominating_candidate():
    rng = np.random.default_rng(0)
    assert {ea.binary_tournament(np.array([[0, 0], [1, 1]]), rng) for _ in range(50)} == {1}
    picks = [ea.binary_tournament(np.array([[0, 1], [1, 0]]), rng) for _ in range(400)]
    assert 150 < sum(picks) < 250  # no dominance: a fair coin
    assert ea.binary_tournament(np.array([[3, 3]]), rng) == 0


def test_single_point_crossover_splits_the_parents_exactly():
    father, mother = torch.arange(10.0), -torch.arange(10.0) - 1
    child = ea.single_point_crossover(father, mother, 4)
    assert child.shape == father.shape
    assert torch.equal(child[:4], father[:4]) and torch.equal(child[4:], mother[4:])
    rng = np.random.default_rng(1)
    points = {ea.crossover_point(10, rng) for _ in range(300)}
    assert points == set(range(1, 10))  # strictly inside: both parents always give something
    assert ea.crossover_point(2, rng) == 1
    with pytest.raises(ValueError):
        ea.single_point_crossover(father, mother[:5], 2)


def test_gaussian_mutation_spread_and_rate():
    g = torch.Generator().manual_seed(0)
    w = torch.zeros(100_000)
    assert torch.equal(ea.gaussian_mutation(w, 0.0, 1.0, g), w)
    full = ea.gaussian_mutation(w, 0.1, 1.0, g)
    assert full.shape == w.shape and torch.equal(w, torch.zeros(100_000))  # a new tensor
    assert float(full.std()) == pytest.approx(0.1, rel=0.02) and abs(float(full.mean())) < 0.002
    some = ea.gaussian_mutation(w, 0.1, 0.25, g)
    changed = some != 0
    assert float(changed.float().mean()) == pytest.approx(0.25, abs=0.01)
    assert float(some[changed].std()) == pytest.approx(0.1, rel=0.03)


def test_flat_weights_round_trip_and_frozen_parts_stay_out():
    net = GRUActorCritic(GRUActorCriticConfig(obs_shape=(4,), num_actions=3))
    vec = ea.flat_weights(net)
    assert vec.shape == (sum(p.numel() for p in net.parameters()),)
    ea.load_flat_weights(net, vec + 1.0)
    assert torch.allclose(ea.flat_weights(net), vec + 1.0)
    for p in net.encoder.parameters():
        p.requires_grad_(False)
    frozen = [p.detach().clone() for p in net.encoder.parameters()]
    smaller = ea.flat_weights(net)
    assert len(smaller) == len(vec) - sum(p.numel() for p in frozen)
    ea.load_flat_weights(net, torch.zeros_like(smaller))
    assert all(torch.equal(a, b) for a, b in zip(frozen, net.encoder.parameters()))
    assert all(float(p.detach().abs().sum()) == 0 for p in net.parameters() if p.requires_grad)
    with pytest.raises(ValueError):
        ea.load_flat_weights(net, vec)


def test_state_keys_bucket_telemetry_in_equal_intervals():
    frame = np.zeros((16, 16, 3), np.uint8)
    cfg = StateCoverageConfig(features={"position": 2.0, "angle": 90.0})
    assert state_key(frame, {"position": (3.7, -0.2), "angle": 95.0}, cfg) == (1, -1, 1)
    assert state_key(frame, {"position": (4.0, 0.0)}, cfg) == (2, 0)  # a missing feature is left out
    nested = StateCoverageConfig(features={"env_info.x": 10.0})
    assert state_key(frame, {"env_info": {"x": 25}}, nested) == (2,)
    # no telemetry: frame cells, different pictures → different states
    bright = np.full((16, 16, 3), 255, np.uint8)
    states = {state_key(f, {}, cfg) for f in (frame, frame, bright)}
    assert len(states) == 2 and all(k[0] == "frame" for k in states)
    with pytest.raises(ValueError):
        StateCoverageConfig(features={"position": 0.0})


class SameReturn(gym.Env):
    """Every episode lasts 4 steps and returns 4, whatever is done: nothing to improve."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 4, False, {}


def test_ppo_stops_early_when_the_return_stops_improving(tmp_path):
    cfg = PPOConfig(env_id="state:SameReturn", run_dir=str(tmp_path / "a"), num_envs=2, num_steps=8, num_minibatches=1,
                    total_timesteps=16 * 10, early_stop_patience=2, checkpoint_every=0)
    result = train(cfg, env_fn=SameReturn)
    # update 1 sets the best (4.0), updates 2 and 3 do not beat it: stop after 3 of 10
    assert result.stopped_early and result.iteration == 3 and result.global_step == 3 * 16
    patient = train(PPOConfig(**{**cfg.__dict__, "run_dir": str(tmp_path / "b"), "early_stop_patience": 0,
                                 "total_timesteps": 16 * 5}), env_fn=SameReturn)
    assert not patient.stopped_early and patient.iteration == 5
