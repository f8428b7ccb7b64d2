"""The load reward hook: +reward over the threshold inside the area, the episode-end bonus, the
warm-up shift, the blend with an inner hook, and PPO feeding it real frame times."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from playtester.capture.frames import FrameSpec
from playtester.errors import UserError
from playtester.load.reward import AreaMask, LoadReward, LoadRewardConfig, LoadThreshold, vector_info
from playtester.exploration.hook import ShapedRewards, StepView

THRESHOLD = LoadThreshold.from_baseline([1, 2, 3, 4, 5])  # t = 10.906 ms


def view(frame_times, done=(False, False), positions=None, final_times=None):
    """A 2-env step as a same-step-autoreset vector env reports it."""
    n = len(frame_times)
    done = np.array(done)
    infos = {"frame_time_ms": np.array(frame_times, float), "_frame_time_ms": np.ones(n, bool)}
    if positions is not None:
        infos["position"] = np.array(positions, dtype=object)
        infos["_position"] = np.ones(n, bool)
    if final_times is not None:  # the ended episodes' last step; the top level is the reset's
        infos["final_info"] = {"frame_time_ms": np.array(final_times, float), "_frame_time_ms": done.copy()}
        if positions is not None:
            infos["final_info"] |= {"position": infos["position"], "_position": done.copy()}
    obs = np.zeros((n, 4, 4, 3), np.uint8)
    return StepView(obs, torch.zeros(n, 3), torch.zeros(n, dtype=torch.bool), obs, infos, done)


def test_reward_over_threshold_and_end_bonus():
    hook = LoadReward(LoadRewardConfig(reward=10.0, end_bonus_coef=2.0, coef=1.0), THRESHOLD, num_envs=2)
    hook.step(view([12.0, 3.0]))
    hook.step(view([15.0, 11.0]))
    # env 0's episode ends on a slow step: 10 + bonus 2 × (10 + 10 + 10); the reset's 0.0 is ignored
    hook.step(view([0.0, 4.0], done=(True, False), final_times=[20.0, 0.0]))
    hook.step(view([12.0, 1.0], done=(False, True), final_times=[0.0, 2.0]))
    out = hook.end_rollout()
    assert out.non_episodic is None
    expected = torch.tensor([[10.0, 0.0], [10.0, 10.0], [10.0 + 60.0, 0.0], [10.0, 20.0]])
    assert torch.equal(out.episodic, expected)
    assert out.logs["charts/load_threshold_ms"] == pytest.approx(THRESHOLD.value)
    assert out.logs["charts/over_threshold_share"] == pytest.approx(5 / 8)


def test_area_mask_limits_the_reward_and_needs_positions():
    area = AreaMask(origin=(0.0, 0.0), cell=100.0, mask=np.array([[True, False]]))
    hook = LoadReward(LoadRewardConfig(coef=1.0), THRESHOLD, num_envs=2, area=area, game="doom:park")
    hook.step(view([20.0, 20.0], positions=[(50.0, 50.0, 0.0), (150.0, 50.0, 0.0)]))
    assert hook.end_rollout().episodic.tolist() == [[10.0, 0.0]]
    with pytest.raises(UserError, match="reports no position"):
        hook.step(view([20.0, 20.0]))


def test_warmup_shifts_the_threshold_by_the_quartile_rule():
    hook = LoadReward(LoadRewardConfig(coef=1.0, warmup_steps=2), THRESHOLD, num_envs=2)
    hook.step(view([12.0, 13.0]))  # warm-up: measured, not rewarded
    hook.step(view([14.0, 15.0]))  # warm-up Q1 12.75 (+10.75), Q3 14.25 (+10.25) → δ 10.75
    hook.step(view([22.0, 21.0]))  # t = 10.906 + 10.75 = 21.656
    out = hook.end_rollout()
    assert hook.threshold.shift == pytest.approx(10.75)
    assert out.episodic.tolist() == [[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]]
    state = hook.state_dict()
    again = LoadReward(LoadRewardConfig(coef=1.0, warmup_steps=2), THRESHOLD, num_envs=2)
    again.load_state_dict(state)
    assert again.threshold == hook.threshold and again.warmup_left == 0


class ConstantHook:
    non_episodic = True

    def step(self, view):
        pass

    def end_rollout(self):
        return ShapedRewards(torch.full((1, 2), 0.5), torch.full((1, 2), 0.25), {"rewards/intrinsic": 0.25})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_blends_with_an_inner_hook():
    hook = LoadReward(LoadRewardConfig(coef=0.1, end_bonus_coef=0.0), THRESHOLD, num_envs=2, inner=ConstantHook())
    assert hook.non_episodic
    hook.step(view([12.0, 1.0]))
    out = hook.end_rollout()
    assert out.episodic[0].tolist() == pytest.approx([0.5 + 1.0, 0.5])
    assert out.non_episodic.tolist() == [[0.25, 0.25]]
    assert "rewards/intrinsic" in out.logs and "rewards/load" in out.logs


def test_a_game_without_frame_times_is_refused_with_what_to_enable():
    hook = LoadReward(LoadRewardConfig(), THRESHOLD, num_envs=1, game="gym:CartPole-v1")
    obs = np.zeros((1, 2, 2, 3), np.uint8)
    bare = StepView(obs, torch.zeros(1, 2), torch.zeros(1, dtype=torch.bool), obs, {}, np.array([False]))
    with pytest.raises(UserError, match="gym:CartPole-v1.*reports no frame time.*frame_time_ms"):
        hook.step(bare)
    # telemetry fps stands in for frame_time_ms
    fps = {"fps": np.array([50.0]), "_fps": np.array([True])}
    hook.step(bare._replace(infos=fps))
    assert hook._frame_times[-1].tolist() == [20.0]


def test_vector_info_reads_final_info_for_ended_episodes():
    v = view([0.0, 7.0], done=(True, False), final_times=[9.0, 0.0])
    assert vector_info(v.infos, "frame_time_ms", v.dones) == [9.0, 7.0]
    assert vector_info(v.infos, "position", v.dones) == [None, None]


def test_ppo_feeds_real_frame_times_to_the_hook(tmp_path):
    from playtester.exploration.ppo import PPOConfig, train

    torch.set_num_threads(1)
    seen = []

    class Recording(LoadReward):
        def step(self, view):
            super().step(view)
            seen.append(self._frame_times[-1].copy())

    cfg = PPOConfig(env_id="doom:park-perf:5:24x24", run_dir=str(tmp_path / "ppo"), total_timesteps=32, num_envs=2,
                    num_steps=16, num_minibatches=1, update_epochs=1, vector_env="sync", encoder="conv",
                    frames=FrameSpec.square(36), hidden_dim=16, rnn_dim=16, env_reward_coef=0.0)
    hook = Recording(LoadRewardConfig(), THRESHOLD, num_envs=2, game=cfg.env_id)
    result = train(cfg, reward_hook=hook)
    times = np.stack(seen)
    assert times.shape == (16, 2) and (times > 0).all()  # real wall-clock readings, none missing
    assert result.global_step == 32
