"""Recurrent PPO: learning, recurrent state, checkpoints and --resume, the reward hook, baselines."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch
from lightning.fabric import Fabric

from playtester.errors import UserError
from playtester.exploration.actor_critic import (
    ActorCritic, GRUActorCritic, GRUActorCriticConfig, RandomAgent, RandomAgentConfig, build_actor_critic,
)
from playtester.exploration.modes import explorer_preset
from playtester.exploration.checkpoints import load_agent, load_checkpoint, load_explorer
from playtester.exploration.hook import ShapedRewards, StepView
from playtester.exploration.ppo import PPOConfig, RolloutBatch, train
from playtester.exploration.ppo_config import check_resumable
from playtester.exploration.reward import ExplorationReward
from playtester.exploration.rnd import RNDConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Corridor(gym.Env):
    """Deterministic: walk right along 5 cells, +1 a step at the end; every episode lasts 8 steps."""

    def __init__(self, length: int = 8):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (5,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length = length

    def _obs(self):
        obs = np.zeros(5, np.float32)
        obs[self.pos] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.pos = int(np.clip(self.pos + (1 if action == 1 else -1), 0, 4))
        self.t += 1
        return self._obs(), float(self.pos == 4), False, self.t >= self.length, {}


class Squares(gym.Env):
    """A tiny pixel game: a white square on black that moves with 3 actions; 10-step episodes."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(3)

    def _obs(self):
        frame = np.zeros((64, 64, 3), np.uint8)
        frame[20:36, self.x : self.x + 16] = 255
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = int(self.np_random.integers(0, 48)), 0
        return self._obs(), {}

    def step(self, action):
        self.x = int(np.clip(self.x + (int(action) - 1) * 4, 0, 48))
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 10, {}


def corridor_config(run_dir, **kwargs) -> PPOConfig:
    base = dict(env_id="state:Corridor", run_dir=str(run_dir), num_envs=2, num_steps=8, num_minibatches=2,
                update_epochs=2, total_timesteps=4 * 16, checkpoint_every=1, hidden_dim=16, rnn_dim=16)
    base.update(kwargs)
    return PPOConfig(**base)


@pytest.mark.slow
@pytest.mark.parametrize("acting, overlap", [("fp32", False), ("int8", False), ("fp32", True)], ids=["fp32", "int8", "overlap"])
def test_ppo_learns_cartpole(tmp_path, acting, overlap):
    """With `acting="int8"` the rollouts come from an int8 copy and the update trains the fp32
    network: it learns as well (exploration/acting.py). So it does with `overlap_update`, each
    rollout played one update behind."""
    cfg = PPOConfig(
        env_id="state:CartPole-v1", run_dir=str(tmp_path), total_timesteps=15_000, seed=2, num_envs=8, num_steps=32,
        num_minibatches=1, update_epochs=10, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8, ent_coef=0.0,
        clip_vloss=False, checkpoint_every=0, log_every=5, acting=acting, overlap_update=overlap,
    )
    result = train(cfg)
    returns = result.episode_returns
    assert result.global_step == 15_000 // 256 * 256
    # A random policy averages about 22; the first episodes are that, the last far above it.
    assert np.mean(returns[:10]) < 30
    assert np.mean(returns[-20:]) > 75
    # TensorBoard scalars under the CleanRL names.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"charts/episodic_return", "charts/SPS", "losses/policy_loss", "losses/value_loss", "losses/entropy"} <= tags


def test_gru_state_is_reset_by_the_done_mask():
    torch.manual_seed(0)
    agent = GRUActorCritic(GRUActorCriticConfig(obs_shape=(4,), num_actions=3))
    x = torch.randn(6, 2, 4)
    done = torch.zeros(6, 2)
    done[3, 0] = 1.0
    start = torch.randn(2, agent.config.rnn_dim)
    full = agent(x, start, done)
    # Env 0 from step 3 on behaves exactly like a fresh episode started there.
    fresh = agent(x[3:, :1], agent.initial_state(1), torch.zeros(3, 1))
    assert torch.allclose(full.logits[3:, 0], fresh.logits[:, 0], atol=1e-6)
    # Env 1 has no reset: its outputs depend on the starting state.
    other = agent(x[:, 1:], agent.initial_state(1), torch.zeros(6, 1))
    assert not torch.allclose(full.logits[3:, 1], other.logits[3:, 0], atol=1e-4)
    # One sequence at once equals step by step.
    state, logits = start, []
    for t in range(6):
        out = agent(x[t : t + 1], state, done[t : t + 1])
        state = out.state
        logits.append(out.logits)
    assert torch.allclose(torch.cat(logits), full.logits, atol=1e-6)
    assert isinstance(agent, ActorCritic)


def test_minibatches_hold_whole_environment_sequences():
    T, N = 4, 6
    batch = RolloutBatch(
        obs=torch.arange(T * N).view(T, N, 1).float(), actions=torch.zeros(T, N), logprobs=torch.zeros(T, N),
        dones=torch.zeros(T, N), values=torch.zeros(T, N, 2), advantages=torch.zeros(T, N),
        returns=torch.zeros(T, N, 2), initial_state=torch.arange(N).view(N, 1).float(),
    )
    mb = batch.environments(torch.tensor([4, 1]))
    assert mb.obs.shape == (T, 2, 1) and mb.values.shape == (T, 2, 2)
    assert mb.obs[:, 0, 0].tolist() == [4, 10, 16, 22]  # every step of env 4, in order
    assert mb.initial_state.squeeze(1).tolist() == [4, 1]


def test_the_update_cuts_rollouts_into_sequences_from_their_kept_states():
    """`seq_len` 2 on a rollout of 4 steps × 3 environments: 6 sequences of 2 steps, sequence
    c·3 + n holding environment n's steps 2c and 2c + 1, starting from the state kept at 2c."""
    T, N = 4, 3
    step_env = torch.arange(T * N).view(T, N).float()  # t·N + n at step t of environment n
    batch = RolloutBatch(
        obs=step_env.unsqueeze(-1), actions=step_env.long(), logprobs=step_env, dones=torch.zeros(T, N),
        values=torch.zeros(T, N, 2), advantages=step_env, returns=torch.zeros(T, N, 2),
        initial_state=torch.full((N, 1), -1.0), states=100 + step_env.unsqueeze(-1),
    )
    cut = batch.sequences(2)
    assert cut.obs.shape == (2, 6, 1) and cut.values.shape == (2, 6, 2) and cut.states is None
    # env 0: steps 0, 1 (obs 0, 3) then steps 2, 3 (obs 6, 9); env 2's second sequence: obs 8, 11
    assert cut.obs[:, 0, 0].tolist() == [0, 3] and cut.obs[:, 3, 0].tolist() == [6, 9]
    assert cut.obs[:, 5, 0].tolist() == [8, 11] and cut.actions[:, 5].tolist() == [8, 11]
    assert cut.initial_state.squeeze(1).tolist() == [100, 101, 102, 106, 107, 108]
    mb = cut.environments(torch.tensor([4]))  # a minibatch of the cut rollout: env 1's second sequence
    assert mb.advantages[:, 0].tolist() == [7, 10] and mb.initial_state.tolist() == [[107]]


def test_ppo_with_short_sequences_trains_and_its_checkpoint_keeps_them(tmp_path, corridor):
    result = train(corridor_config(tmp_path, seq_len=4))
    assert result.global_step == 64 and np.isfinite(result.episode_returns).all()
    assert load_checkpoint(result.checkpoint)["config"]["seq_len"] == 4


@pytest.fixture
def corridor():
    gym.register("Corridor", entry_point=Corridor)
    yield
    gym.registry.pop("Corridor", None)


class CrashAtRollout:
    """A reward hook that adds nothing and interrupts training at the end of rollout `n`."""

    non_episodic = False

    def __init__(self, n: int):
        self.n, self.rollouts, self.steps = n, 0, 0

    def step(self, view):
        self.steps += 1

    def end_rollout(self):
        self.rollouts += 1
        if self.rollouts == self.n:
            raise KeyboardInterrupt
        rewards = torch.zeros(self.steps, 2)
        self.steps = 0
        return ShapedRewards(rewards, None, {})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_resume_continues_from_the_same_step_with_the_same_state(tmp_path, corridor):
    # Episodes last exactly one rollout and reset deterministically, so an interrupted and resumed
    # run sees the same observations as an uninterrupted one: any lost state (weights, optimiser,
    # step, random number generators) would make them differ. With the update in step with the
    # rollouts: beside them (`overlap_update`, the default) the uninterrupted run plays the rollout
    # after the save one update behind, the resumed one with the saved weights.
    straight = train(corridor_config(tmp_path / "straight", overlap_update=False))
    with pytest.raises(KeyboardInterrupt):
        train(corridor_config(tmp_path / "resumed", overlap_update=False), reward_hook=CrashAtRollout(3))
    ckpt = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.ckpt")
    assert (ckpt["iteration"], ckpt["global_step"]) == (2, 32)
    resumed = train(corridor_config(tmp_path / "resumed", resume=True, overlap_update=False))
    assert (resumed.global_step, resumed.iteration) == (straight.global_step, straight.iteration) == (64, 4)
    for (name, a), b in zip(straight.agent.state_dict().items(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b), name
    assert torch.equal(load_checkpoint(straight.checkpoint)["rng"]["torch"], load_checkpoint(resumed.checkpoint)["rng"]["torch"])


@pytest.mark.parametrize("overlap", [False, True])
def test_with_overlap_update_each_rollout_plays_one_update_behind(tmp_path, corridor, monkeypatch, overlap):
    """Without `overlap_update`, rollout k is played by the weights update k - 1 left; with it, the
    update of rollout k - 1 trains in a thread of its own while rollout k plays, so rollout k is
    played by the weights of update k - 2 (the first two by the initial ones). Either way every
    rollout is trained on, and the run's save holds the last update."""
    import threading

    import playtester.exploration.ppo as ppo

    def flat(net):
        return torch.cat([p.detach().flatten().clone() for p in net.parameters()])

    played, trained, threads = [], [], []
    real_update, real_collect = ppo.update, ppo.collect_rollout

    def spy_update(cfg, fabric, agent, optimizer, batch, generator=None):
        threads.append(threading.current_thread().name)
        stats = real_update(cfg, fabric, agent, optimizer, batch, generator)
        trained.append(flat(agent))
        return stats

    def spy_collect(cfg, envs, actor, *args):
        played.append(flat(actor))
        return real_collect(cfg, envs, actor, *args)

    monkeypatch.setattr(ppo, "update", spy_update)
    monkeypatch.setattr(ppo, "collect_rollout", spy_collect)
    result = train(corridor_config(tmp_path, total_timesteps=5 * 16, overlap_update=overlap))

    assert len(played) == len(trained) == 5
    assert threads == ["ppo-update" if overlap else "MainThread"] * 5
    lag = 2 if overlap else 1
    for k in range(5):  # rollout k + 1 of the counting
        expected = played[0] if k < lag else trained[k - lag]
        assert torch.equal(played[k], expected), f"rollout {k + 1}"
    assert not torch.equal(trained[0], played[0])  # an update changes the weights, so the check has teeth
    ckpt = load_checkpoint(result.checkpoint)
    assert (ckpt["iteration"], ckpt["global_step"]) == (5, 80) and (result.iteration, result.global_step) == (5, 80)
    assert torch.equal(flat(result.agent), trained[-1])


def test_overlapped_runs_of_one_seed_are_the_same_run(tmp_path, corridor):
    """The update in its thread draws its minibatches from a generator of its own, the rollout its
    actions from torch's: two runs of one seed end with the same weights and returns, whichever
    thread drew first."""
    runs = [train(corridor_config(tmp_path / str(i), total_timesteps=6 * 16, overlap_update=True)) for i in range(2)]
    assert runs[0].episode_returns == runs[1].episode_returns
    for (name, a), b in zip(runs[0].agent.state_dict().items(), runs[1].agent.state_dict().values()):
        assert torch.equal(a, b), name


def test_an_update_that_fails_in_its_thread_fails_the_run(tmp_path, corridor, monkeypatch):
    """The update's error reaches the caller (after the rollout beside it), and the save still
    holds the last update that did finish."""
    import playtester.exploration.ppo as ppo

    real_update, calls = ppo.update, []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("update broke")
        return real_update(*args)

    monkeypatch.setattr(ppo, "update", failing)
    with pytest.raises(RuntimeError, match="update broke"):
        train(corridor_config(tmp_path, total_timesteps=5 * 16, overlap_update=True))
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert (ckpt["iteration"], ckpt["global_step"]) == (2, 32)


def test_resume_refuses_changed_options_and_fresh_runs_refuse_to_overwrite(tmp_path, corridor):
    train(corridor_config(tmp_path, total_timesteps=16))
    with pytest.raises(UserError, match="--resume"):
        train(corridor_config(tmp_path, total_timesteps=16))
    with pytest.raises(UserError, match="num_steps"):
        train(corridor_config(tmp_path, resume=True, num_steps=16))
    with pytest.raises(UserError, match="no such file"):
        train(corridor_config(tmp_path / "nothing", resume=True))


def test_checkpoint_rebuilds_the_agent_alone(tmp_path, corridor):
    result = train(corridor_config(tmp_path, total_timesteps=16))
    agent = load_agent(result.checkpoint)
    assert isinstance(agent, GRUActorCritic)
    x, done = torch.rand(3, 2, 5), torch.zeros(3, 2)
    a = agent(x, agent.initial_state(2), done)
    b = result.agent(x, result.agent.initial_state(2), done)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.values, b.values)
    assert not (tmp_path / "checkpoints" / "last.ckpt.partial").exists()


def test_config_checks():
    with pytest.raises(ValueError, match="multiple of num_minibatches"):
        PPOConfig(num_envs=6, num_minibatches=4)
    with pytest.raises(ValueError, match="less than one rollout"):
        PPOConfig(total_timesteps=10)
    with pytest.raises(UserError, match="Gymnasium cannot make"):
        train(PPOConfig(env_id="state:NoSuchEnv-v0", total_timesteps=1024, run_dir="/nonexistent-unused"))
    with pytest.raises(ValueError, match="acting='fp16': use 'fp32' or 'int8'"):
        PPOConfig(acting="fp16")
    with pytest.raises(ValueError, match="quantises for the CPU"):
        PPOConfig(acting="int8", accelerator="cuda")
    check_resumable(PPOConfig(), PPOConfig(acting="int8"))  # how it acts may change on --resume; what it learns may not
    with pytest.raises(UserError, match="learning_rate"):
        check_resumable(PPOConfig(), PPOConfig(acting="int8", learning_rate=1e-3))
    with pytest.raises(ValueError, match="seq_len=48 must divide num_steps=128"):
        PPOConfig(seq_len=48)
    with pytest.raises(UserError, match="seq_len"):  # the update differs: a resumed run keeps it
        check_resumable(PPOConfig(), PPOConfig(seq_len=32))


def test_random_agent_is_uniform_and_is_not_trained(tmp_path, corridor):
    agent = RandomAgent(RandomAgentConfig(num_actions=2))
    out = agent(torch.zeros(3, 4, 5), agent.initial_state(4), torch.zeros(3, 4))
    assert torch.equal(out.logits, torch.zeros(3, 4, 2)) and torch.equal(out.values, torch.zeros(3, 4, 1))
    assert isinstance(build_actor_critic(agent.checkpoint_spec()), RandomAgent)
    with pytest.raises(UserError, match="nothing to train"):
        train(corridor_config(tmp_path, total_timesteps=16), agent=agent)
    preset = explorer_preset("random")
    assert preset.reward is None and not preset.trained


def test_baseline_presets():
    ppgta, inspector = explorer_preset("ppgta"), explorer_preset("inspector")
    assert ppgta.reward.rnd.num_predictors == 5 and ppgta.reward.use_preference and ppgta.needs_preference_policy
    assert inspector.reward.rnd.num_predictors == 1 and inspector.reward.rnd.reward == "prediction_error"
    assert not inspector.reward.use_preference
    with pytest.raises(UserError, match="explorer mode"):
        explorer_preset("curious")


def test_each_mode_divides_its_novelty_by_its_own_scale_unless_told():
    """ppgta-episodic's novelties at unit scale (`step`), the others' by their return's std; a run's
    `novelty_scale` replaces the mode's."""
    assert [explorer_preset(mode).reward.novelty_scale for mode in ("ppgta", "ppgta-episodic", "episodic", "inspector")] \
        == ["return", "step", "return", "return"]
    assert explorer_preset("ppgta-episodic", novelty_scale="return").reward.novelty_scale == "return"
    assert explorer_preset("ppgta", novelty_scale="step").reward.novelty_scale == "step"


def tiny_rnd() -> RNDConfig:
    return RNDConfig(num_predictors=2, predictors="shared_trunk", obs_warmup_frames=8, batch_size=8, train_steps=1, buffer_size=64)


def tiny_explorer(run_dir) -> tuple[PPOConfig, ExplorationReward]:
    """A ppgta explorer on Squares: a small GRU as the preference policy, a tiny RND, 2 games."""
    torch.manual_seed(0)
    preference = GRUActorCritic(GRUActorCriticConfig(obs_shape=(64, 64, 3), num_actions=3, encoder="conv", hidden_dim=32, rnn_dim=16))
    reward_cfg = replace(explorer_preset("ppgta").reward, rnd=tiny_rnd())
    cfg = PPOConfig(env_id="squares", run_dir=str(run_dir), num_envs=2, num_steps=8, num_minibatches=1, update_epochs=1,
                    total_timesteps=32, encoder="conv", hidden_dim=32, rnn_dim=16, env_reward_coef=0.0)
    return cfg, ExplorationReward(reward_cfg, cfg.num_envs, preference_policy=preference)


def test_explorer_reward_hook_trains_with_two_value_heads_and_resumes(tmp_path):
    cfg, hook = tiny_explorer(tmp_path)
    reward_cfg, preference = hook.config, hook.preference_policy
    hook.check_game(Squares().observation_space, Squares().action_space, "squares")
    result = train(cfg, reward_hook=hook, env_fn=Squares)
    assert result.agent.num_values == 2
    assert int(hook.rnd.frames_seen) == 32
    ckpt = load_checkpoint(result.checkpoint)
    assert ckpt["reward_hook"]["rnd"]["frames_seen"].item() == 32
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"rewards/intrinsic", "rewards/preference", "rewards/combined", "charts/alpha", "losses/rnd_loss"} <= tags
    assert events.Scalars("rewards/preference")[-1].value < 0  # two different policies

    hook2 = ExplorationReward(reward_cfg, cfg.num_envs, preference_policy=preference)
    resumed = train(replace(cfg, total_timesteps=48, resume=True), reward_hook=hook2, env_fn=Squares)
    assert resumed.global_step == 48 and int(hook2.rnd.frames_seen) == 48


def test_the_checkpoint_alone_rebuilds_the_explorer_and_its_rewards(tmp_path):
    cfg, hook = tiny_explorer(tmp_path)
    result = train(cfg, reward_hook=hook, env_fn=Squares)
    saved = load_explorer(result.checkpoint)
    assert saved.reward.config == hook.config and saved.reward.num_envs == 2
    assert torch.equal(saved.reward.alpha.alpha, hook.alpha.alpha)

    # The same frames, shown to both explorers: the same actions' logits and the same rewards.
    frames = np.stack([Squares().reset(seed=s)[0] for s in range(2 * 8 + 1)]).reshape(17, 1, 64, 64, 3).repeat(2, axis=1)
    saved.reward.setup(Fabric(accelerator="cpu", devices=1))
    shaped = []
    for agent, reward in ((result.agent, hook), (saved.agent, saved.reward)):
        state = agent.initial_state(2)
        for t in range(8):
            x = agent.prepare(torch.as_tensor(frames[t])).unsqueeze(0)
            out = agent(x, state, torch.full((1, 2), float(t == 0)))
            state = out.state
            reward.step(StepView(frames[t], out.logits[0].detach(), torch.full((2,), t == 0), frames[t + 1]))
        torch.manual_seed(1)  # the predictors' training draws
        shaped.append(reward.end_rollout())
        reward.wait_for_training()
    (a, b) = shaped
    assert torch.equal(a.episodic, b.episodic) and torch.equal(a.non_episodic, b.non_episodic)
    # the loss logged is the last training's: the rebuilt reward has trained nothing yet
    assert np.isfinite(a.logs.pop("losses/rnd_loss")) and np.isnan(b.logs.pop("losses/rnd_loss"))
    assert a.logs["rewards/intrinsic_raw"] > 0 and a.logs["rewards/preference"] < 0 and a.logs == b.logs
    assert torch.equal(saved.reward.rnd.reward(torch.as_tensor(frames[0]).permute(0, 3, 1, 2)),
                       hook.rnd.reward(torch.as_tensor(frames[0]).permute(0, 3, 1, 2)))


def test_explorer_checkpoints_from_before_the_reward_spec_still_load(tmp_path):
    hook = ExplorationReward(replace(explorer_preset("inspector").reward, rnd=replace(tiny_rnd(), num_predictors=1, reward="prediction_error")), 2)
    hook.setup(Fabric(accelerator="cpu", devices=1))
    hook.setup(Fabric(accelerator="cpu", devices=1))  # a hook may serve a second run
    state = hook.state_dict()
    old = {"rnd": {**state["rnd"], "_extra_state": {"optimizer": state["rnd_optimizer"]}}, "alpha": state["alpha"]}
    hook.load_state_dict(old)  # the RND's optimiser sat in its extra state
    ckpt = tmp_path / "old.ckpt"
    torch.save({"agent_spec": GRUActorCritic(GRUActorCriticConfig(obs_shape=(5,), num_actions=2)).checkpoint_spec(),
                "agent": GRUActorCritic(GRUActorCriticConfig(obs_shape=(5,), num_actions=2)).state_dict(), "reward_hook": old}, ckpt)
    assert isinstance(load_agent(ckpt), GRUActorCritic)
    with pytest.raises(UserError, match="no exploration reward"):
        load_explorer(ckpt)


def test_inspector_baseline_runs_in_the_same_code_path(tmp_path):
    hook = ExplorationReward(replace(explorer_preset("inspector").reward, rnd=replace(tiny_rnd(), num_predictors=1, reward="prediction_error")), 2)
    cfg = PPOConfig(env_id="squares", run_dir=str(tmp_path), num_envs=2, num_steps=8, num_minibatches=1, update_epochs=1,
                    total_timesteps=32, encoder="conv", hidden_dim=32, rnn_dim=16, env_reward_coef=0.0, vector_env="async")
    result = train(cfg, reward_hook=hook, env_fn=Squares)  # one process per game
    assert result.global_step == 32 and len(hook.rnd.predictors) == 1
    assert int(hook.rnd.frames_seen) == 32


def test_bad_games_and_preference_policies_are_refused_before_training():
    preference = GRUActorCritic(GRUActorCriticConfig(obs_shape=(64, 64, 3), num_actions=9, encoder="conv"))
    hook = ExplorationReward(replace(explorer_preset("ppgta").reward, rnd=tiny_rnd()), 2, preference_policy=preference)
    with pytest.raises(UserError, match="9"):
        hook.check_game(Squares().observation_space, Squares().action_space, "squares")
    with pytest.raises(UserError, match="not RGB frames"):
        hook.check_game(gym.spaces.Box(0, 1, (4,), np.float32), gym.spaces.Discrete(9), "gym:CartPole-v1")
    with pytest.raises(UserError, match="no preference policy"):
        ExplorationReward(explorer_preset("ppgta").reward, 2)
    with pytest.raises(UserError, match="actions"):
        train(PPOConfig(env_id="squares", num_envs=2, num_steps=8, num_minibatches=1, total_timesteps=16, encoder="conv",
                        run_dir="/tmp/unused-run"), agent=GRUActorCritic(GRUActorCriticConfig(obs_shape=(64, 64, 3), num_actions=9, encoder="conv")),
              env_fn=Squares)


def test_ctrl_c_waits_for_the_update_in_progress_to_end():
    import os
    import signal
    import time

    from playtester.exploration.run_control import defer_interrupt

    before = signal.getsignal(signal.SIGINT)
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with defer_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the signal has arrived by now; the block still runs to its end
            finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is before
    with defer_interrupt():  # no Ctrl-C: nothing raised
        finished.append(True)
    assert finished == [True, True]


def test_closing_after_a_ctrl_c_that_cut_the_collection_of_answers_does_not_wait_for_ever():
    """Ctrl-C can land while the run reads its workers' step answers: one read, one not. Gymnasium
    then waits on every pipe again when closing, and the answer already read never comes (CI hung
    120 s on it). `close_envs` waits a bounded time, then ends the workers."""
    import time

    from playtester.capture.envs import make_env
    from playtester.exploration.vector_env import close_envs, in_worker

    envs = gym.vector.AsyncVectorEnv([lambda: in_worker(lambda: make_env("state:CartPole-v1", states=True))] * 2)
    envs.reset(seed=0)
    envs.step_async(np.zeros(2, dtype=np.int64))
    envs.parent_pipes[0].recv()  # the first answer read, then the interrupt
    t0 = time.monotonic()
    close_envs(envs, pending_timeout=1.0)
    assert time.monotonic() - t0 < 15
    assert envs.closed and not any(p.is_alive() for p in envs.processes)


def test_the_rollout_rewards_in_one_batch_equal_them_step_by_step(tmp_path):
    """Novelty with the input statistics of the rollout's start, and the preference policy run over
    the rollout's sequence from its state at the start, are what a step-by-step pass gives."""
    import copy

    from playtester.exploration.preference import preference_reward

    _, hook = tiny_explorer(tmp_path)
    hook.setup(Fabric(accelerator="cpu", devices=1))
    frames = np.stack([Squares().reset(seed=s)[0] for s in range(2 * 9)]).reshape(9, 2, 64, 64, 3)
    hook.rnd.observe(hook.rnd_frames(frames[:4].reshape(8, 64, 64, 3)))  # warmed up (8 frames)
    rnd, preference = copy.deepcopy(hook.rnd), copy.deepcopy(hook.preference_policy)
    logits = torch.randn(8, 2, 3, generator=torch.Generator().manual_seed(0))
    starts = [torch.tensor([t == 0, t == 5]) for t in range(8)]  # the second game starts an episode at step 5

    raw_steps, pref_steps, state = [], [], preference.initial_state(2)
    for t in range(8):
        raw_steps.append(rnd.reward(hook.rnd_frames(frames[t + 1])))
        out = preference(preference.prepare(torch.as_tensor(frames[t])).unsqueeze(0), state, starts[t].float().unsqueeze(0))
        state = out.state
        pref_steps.append(preference_reward(logits[t], out.logits[0]))
        hook.step(StepView(frames[t], logits[t], starts[t], frames[t + 1]))
    for t in range(8):
        rnd.observe(hook.rnd_frames(frames[t + 1]))

    raw, episodic, pref = hook._rollout_rewards(hook._recorded, None)
    assert episodic is None  # ppgta: no episodic bonus
    assert raw.shape == pref.shape == (8, 2) and raw.abs().sum() > 0 and pref.abs().sum() > 0
    torch.testing.assert_close(raw, torch.stack(raw_steps))
    torch.testing.assert_close(pref, torch.stack(pref_steps))
    torch.testing.assert_close(hook.preference_state, state)
    assert int(hook.rnd.frames_seen) == int(rnd.frames_seen) == 24
    torch.testing.assert_close(hook.rnd.obs_rms.mean, rnd.obs_rms.mean)
    torch.testing.assert_close(hook.rnd.replay, rnd.replay)
