"""The full explorer on the small park with tiny models: the imitation actor-critic, the wiring,
a short PPO run with its logs, and the checks done before training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from playtester.errors import UserError
from playtester.capture.games import make_game
from playtester.exploration.acting import int8_actor, int8_frozen_encoder
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.exploration.checkpoints import load_agent
from playtester.exploration.explorer import build_explorer
from playtester.capture.envs import KnownObjectsMask, mask_known_objects
from playtester.exploration.imitation_ac import ImitationActorCritic, grayscale_frames
from playtester.exploration.ppo import train
from playtester.exploration.rnd import RNDConfig
from playtester.imitation.live import load_policy
from playtester.imitation.policy import to_input

# Small RND widths: orthogonal init of the paper's 512-wide layers costs seconds on a busy CPU.
SMALL_RND = RNDConfig(obs_warmup_frames=8, batch_size=16, train_steps=2, buffer_size=64, hidden_dim=64, out_dim=32)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One torch thread: on this shared 2-core machine two threads spin against other jobs and
    small convolutions run ~50× slower."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def path_policy(tiny_parts):
    """A tiny path-following policy trained on park demos (the preference policy's checkpoint)."""
    return tiny_parts("path")[2]


@pytest.fixture(scope="module")
def park_frames(small_park):
    """12 native park frames from a short random walk."""
    env = make_game(small_park)
    try:
        obs, _ = env.reset(seed=3)
        frames = [obs]
        rng = np.random.default_rng(0)
        for _ in range(11):
            obs, *_ = env.step(int(rng.integers(env.action_space.n)))
            frames.append(obs)
    finally:
        env.close()
    return np.stack(frames)


def test_actor_critic_starts_as_the_path_policy(path_policy, park_frames):
    live = load_policy(path_policy)
    agent = ImitationActorCritic.from_checkpoint(path_policy).eval()
    assert agent.num_actions == live.cfg.n_actions and agent.num_values == 2 and agent.frozen_trunk

    # Two environments: env 0 plays frames 0..11 as one episode; env 1 starts a new episode at
    # step 5 (the window and the global GRU must restart exactly as the live policy's reset does).
    T = len(park_frames)
    obs = np.stack([park_frames, park_frames[::-1]], axis=1)  # T×2×H×W×3
    done = torch.zeros(T, 2)
    done[0] = 1
    done[5, 1] = 1
    expected = np.zeros((T, 2, agent.num_actions))
    for env in range(2):
        for t in range(T):
            if done[t, env]:
                live.reset()
            expected[t, env] = live.step(obs[t, env], None)

    with torch.no_grad():
        feats = torch.stack([agent.prepare(torch.from_numpy(obs[t])) for t in range(T)])
        whole = agent(feats, agent.initial_state(2), done)
        # Step by step, carrying the state, as the rollout runs it.
        state, stepped = agent.initial_state(2), []
        for t in range(T):
            out = agent(feats[t : t + 1], state, done[t : t + 1])
            state = out.state
            stepped.append(out.logits[0])
    # The last frames' features are kept (the preference policy reuses them); other frames are encoded.
    with torch.no_grad():
        a, b = torch.from_numpy(obs[0]), torch.from_numpy(obs[1])
        fresh = ImitationActorCritic.from_checkpoint(path_policy).eval()
        torch.testing.assert_close(agent.prepare(a.clone()), fresh.prepare(a))
        torch.testing.assert_close(agent.prepare(b), fresh.prepare(b))
        assert not torch.allclose(agent.prepare(a), agent.prepare(b))
    np.testing.assert_allclose(torch.softmax(whole.logits, -1).numpy(), expected, atol=1e-5)
    torch.testing.assert_close(torch.stack(stepped), whole.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state, whole.state, atol=1e-5, rtol=1e-5)
    assert whole.values.shape == (T, 2, 2)


def test_the_int8_actor_shares_the_encoder_and_acts_as_the_fp32_explorer(path_policy, park_frames):
    agent = ImitationActorCritic.from_checkpoint(path_policy).eval()
    weights = {k: v.clone() for k, v in agent.state_dict().items()}
    actor = int8_actor(agent)
    assert actor.encoder is agent.encoder and not agent.encoder.int8  # shared, and left as it was
    quantised = {name for name, m in actor.named_modules() if type(m).__module__.startswith("torch.ao.nn.quantized.dynamic")}
    assert {"core.local", "core.glob", "core.logits", "critic.0"} <= quantised
    assert not any(name.startswith("encoder") for name in quantised)
    # The fp32 network is untouched: same module types, same weights.
    assert type(agent.core.glob) is torch.nn.GRU and type(agent.critic[0]) is torch.nn.Linear
    for k, v in agent.state_dict().items():
        assert torch.equal(v, weights[k]), k

    # The same episode step by step, each network carrying its own state, as a rollout runs it.
    done = torch.zeros(len(park_frames), 1)
    done[0] = 1
    with torch.no_grad():
        feats = torch.stack([agent.prepare(torch.from_numpy(f[None])) for f in park_frames])
        fp32, int8 = agent(feats, agent.initial_state(1), done), []
        state = agent.initial_state(1)
        for t in range(len(park_frames)):
            out = actor(feats[t : t + 1], state, done[t : t + 1])
            state = out.state
            int8.append(out)
    logits = torch.cat([o.logits for o in int8])
    assert logits.shape == fp32.logits.shape and state.shape == fp32.state.shape
    assert not torch.equal(logits, fp32.logits)  # int8 arithmetic, not the fp32 network again
    p, q = torch.softmax(fp32.logits, -1), torch.softmax(logits, -1)
    assert float((p - q).abs().sum(-1).max()) / 2 < 0.05  # total variation: the same actions, near enough
    torch.testing.assert_close(torch.cat([o.values for o in int8]), fp32.values, atol=0.1, rtol=0)  # the same critic, in int8


def test_the_frozen_encoder_turns_int8_once_for_the_run(path_policy, park_frames):
    """`int8_frozen_encoder`: the PPGTA explorer's frozen encoder (shared with the preference
    policy) runs int8 convolutions once calibrated; its weights and the checkpoint's keys stay
    fp32's. A network that trains its whole trunk is left alone."""
    agent = ImitationActorCritic.from_checkpoint(path_policy).eval()
    preference = ImitationActorCritic.from_checkpoint(path_policy).eval()
    preference.share_encoder(agent)
    keys = set(agent.state_dict())
    with torch.no_grad():
        fp32 = torch.cat([agent.prepare(torch.from_numpy(f[None])) for f in park_frames])
    agent._features.clear()
    assert int8_frozen_encoder(agent, calibration_frames=4) and agent.encoder.int8 and preference.encoder.int8
    with torch.no_grad():
        int8 = torch.cat([agent.prepare(torch.from_numpy(f[None])) for f in park_frames])
    assert agent.encoder._int8.calibrated and set(agent.state_dict()) == keys
    torch.testing.assert_close(int8[:4], fp32[:4], atol=1e-5, rtol=1e-5)  # observed, answered in fp32
    assert not torch.equal(int8[4:], fp32[4:])
    assert float((int8[4:] - fp32[4:]).norm() / fp32[4:].norm()) < 0.05
    assert not int8_frozen_encoder(RandomAgent(RandomAgentConfig(num_actions=3)))


def test_a_quantised_test_policy_steps_as_the_fp32_one(tiny_inspect_policy, park_frames):
    """On a CPU (`RunSpec.acting`) the live test policy is quantised in place: its GRUs and head at once, its
    encoder's convolutions after its calibration frames; its action distributions stay within
    0.05 total variation of fp32's through a test."""
    fp32, int8 = load_policy(tiny_inspect_policy), load_policy(tiny_inspect_policy)
    assert int8.quantise(calibration_frames=4) is int8
    assert type(int8.policy.core.glob).__module__.startswith("torch.ao.nn.quantized.dynamic")
    assert type(int8.policy.core.logits).__module__.startswith("torch.ao.nn.quantized.dynamic")
    assert int8.policy.encoder.int8
    box = [100.0, 60.0, 160.0, 140.0]
    p = np.stack([fp32.step(f, box) for f in park_frames])
    q = np.stack([int8.step(f, box) for f in park_frames])
    assert int8.policy.encoder._int8.calibrated  # the last 8 of the 12 steps encoded in int8
    assert not np.array_equal(p, q)
    assert np.abs(p - q).sum(-1).max() / 2 < 0.05


def test_explorer_trains_on_the_park_and_logs_every_term(path_policy, small_park, tmp_path, park_frames, capsys):
    # in fp32: the shared encoder's int8 (the default on a CPU) has its own test above, and here the
    # preference policy's logits are compared with the path policy's to the last bit
    explorer = build_explorer(small_park, path_policy, "ppgta", run_dir=str(tmp_path / "run"), total_timesteps=48,
                              num_envs=2, num_steps=8, num_minibatches=1, update_epochs=2, rnd=SMALL_RND, checkpoint_every=0,
                              acting="fp32")
    agent = explorer.agent
    assert isinstance(agent, ImitationActorCritic) and explorer.cfg.vector_env == "async"
    preference = explorer.hook.preference_policy
    assert preference is not None and preference.encoder is agent.encoder  # one encoder pass a frame
    frames = torch.from_numpy(np.stack([park_frames[:6], park_frames[6:]], axis=1))
    done = torch.zeros(6, 2)
    done[0] = 1

    def act(a):
        with torch.no_grad():
            feats = torch.stack([a.prepare(f) for f in frames])
            return a(feats, a.initial_state(2), done)

    before = act(agent.eval())
    encoder_before = {k: v.clone() for k, v in agent.encoder.state_dict().items()}
    result = train(*explorer)
    assert result.global_step == 48

    after = act(result.agent.eval())
    assert not torch.allclose(before.logits, after.logits), "PPO did not change the policy"
    assert not torch.allclose(before.values, after.values), "PPO did not change the value heads"
    for k, v in result.agent.encoder.state_dict().items():
        torch.testing.assert_close(v, encoder_before[k])  # the trunk stays frozen
    # The checkpoint alone rebuilds the trained explorer.
    # The preference policy stayed the path policy while the explorer moved away from it.
    path_logits = act(ImitationActorCritic.from_checkpoint(path_policy).eval()).logits
    torch.testing.assert_close(act(preference).logits, path_logits)
    torch.testing.assert_close(before.logits, path_logits)
    rebuilt = load_agent(result.checkpoint).eval()
    torch.testing.assert_close(act(rebuilt).logits, after.logits)
    assert "frozen encoder trunk" in capsys.readouterr().out

    # --resume continues the same run, from the saved step, with the trained weights.
    again = build_explorer(small_park, path_policy, "ppgta", run_dir=str(tmp_path / "run"), total_timesteps=64,
                           num_envs=2, num_steps=8, num_minibatches=1, update_epochs=2, rnd=SMALL_RND, checkpoint_every=0,
                           resume=True)
    resumed = train(*again)
    assert resumed.global_step == 64 and "resumed from" in capsys.readouterr().out

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    wanted = {"rewards/intrinsic_raw", "rewards/intrinsic", "rewards/preference", "rewards/combined", "rewards/env",
              "charts/alpha", "charts/SPS", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/rnd_loss"}
    assert wanted <= tags, f"missing TensorBoard scalars: {sorted(wanted - tags)}"
    alphas = [e.value for e in events.Scalars("charts/alpha")]
    assert all(0.5 - 1e-6 <= a <= 0.8 + 1e-6 for a in alphas), alphas  # float32 means
    prefs = [e.value for e in events.Scalars("rewards/preference")]
    assert all(p <= 0 for p in prefs) and any(p < 0 for p in prefs)  # −KL, and the explorer has moved


def test_modes_share_the_code_path(path_policy, small_park, tmp_path):
    inspector = build_explorer(small_park, path_policy, "inspector", run_dir=str(tmp_path), total_timesteps=512, num_envs=2,
                               rnd=SMALL_RND)
    assert inspector.hook.preference_policy is None and inspector.hook.rnd.config.num_predictors == 1
    assert isinstance(inspector.agent, ImitationActorCritic)
    scratch = build_explorer(small_park, None, "inspector", run_dir=str(tmp_path), total_timesteps=512, num_envs=2,
                             rnd=SMALL_RND)
    assert scratch.agent is None and scratch.cfg.encoder == "conv"  # PPO builds its conv GRU
    rand = build_explorer(small_park, None, "random", run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    assert rand.hook is None and rand.agent.num_actions == 9


def test_bad_input_is_refused_before_training(path_policy, tmp_path):
    # CartPole renders RGB frames but has 2 actions; the park policy acts over 9.
    with pytest.raises(UserError, match="2 actions but the preference policy acts over 9"):
        build_explorer("gym:CartPole-v1", path_policy, run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    with pytest.raises(UserError, match="not RGB frames"):
        build_explorer("state:CartPole-v1", path_policy, run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    with pytest.raises(UserError, match="needs the path-following policy"):
        build_explorer("gym:CartPole-v1", None, "ppgta", run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    with pytest.raises(UserError, match="less than one rollout"):
        build_explorer("gym:CartPole-v1", path_policy, run_dir=str(tmp_path), total_timesteps=16, num_envs=2)
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="junk.ckpt"):
        build_explorer("gym:CartPole-v1", junk, run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    with pytest.raises(UserError, match="explorer mode"):
        build_explorer("gym:CartPole-v1", path_policy, "curious", run_dir=str(tmp_path), total_timesteps=512, num_envs=2)


def test_known_objects_mask():
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    out = mask_known_objects(frame, [[2, 3, 6, 8], [20.5, 10, 40, 25]])
    inside = np.zeros((20, 30), bool)
    inside[3:8, 2:6] = True
    inside[10:20, 20:30] = True  # fractional start widened down, end clipped to the frame
    np.testing.assert_array_equal(out[inside], frame[inside])
    outside = out[~inside]
    assert (outside[:, 0] == outside[:, 1]).all() and (outside[:, 1] == outside[:, 2]).all()
    assert not (frame[~inside][:, 0] == frame[~inside][:, 1]).all()
    gray = mask_known_objects(frame, [])
    assert (gray[..., 0] == gray[..., 2]).all()


def test_park_frames_are_masked_with_the_known_boxes(small_park):
    env = KnownObjectsMask(make_game(small_park))
    try:
        obs, info = env.reset(seed=0)  # an OOI in view from the start
        seen = 0
        for _ in range(15):
            boxes = [o["box"] for o in info.get("objects", [])]
            colour = (obs[..., 0] != obs[..., 1]) | (obs[..., 1] != obs[..., 2])
            allowed = np.zeros(colour.shape, bool)
            for x0, y0, x1, y1 in boxes:
                allowed[max(int(np.floor(y0)), 0) : int(np.ceil(y1)), max(int(np.floor(x0)), 0) : int(np.ceil(x1))] = True
            assert not (colour & ~allowed).any(), "colour outside every known OOI box"
            seen += int(colour.any())
            obs, _, _, _, info = env.step(7)  # turn the camera
    finally:
        env.close()
    assert seen, "no frame kept an OOI in colour"


def test_a_seed_draws_the_same_networks(path_policy, small_park, tmp_path):
    """The value heads and RND's target and predictors are drawn before `train` seeds the run: they
    come from the run's seed, so two runs of one seed start alike (they did not: each played its own
    way from the first update), and another seed draws others."""
    def build(seed):
        return build_explorer(small_park, path_policy, "ppgta", run_dir=str(tmp_path), total_timesteps=512, num_envs=2,
                              rnd=SMALL_RND, seed=seed)

    def weights(explorer):
        return {**{f"agent.{k}": v for k, v in explorer.agent.state_dict().items()},
                **{f"rnd.{k}": v for k, v in explorer.hook.rnd.state_dict().items()}}

    torch.manual_seed(123)
    one = weights(build(7))
    torch.manual_seed(456)  # whatever the caller's stream holds
    again, other = weights(build(7)), weights(build(8))
    assert one.keys() == again.keys() and all(torch.equal(one[k], again[k]) for k in one)
    drawn = [k for k in one if not torch.equal(one[k], other[k])]
    assert any(k.startswith("rnd.target") for k in drawn) and any(k.startswith("rnd.predictors") for k in drawn)
    assert any(k.startswith("agent.") for k in drawn)  # the value heads


def test_episodic_modes_build_their_novelties_and_value_heads(path_policy, small_park, tmp_path):
    def build(mode, **weights):
        return build_explorer(small_park, path_policy, mode, run_dir=str(tmp_path), total_timesteps=512, num_envs=2,
                              rnd=SMALL_RND, **weights)

    both = build("ppgta-episodic")
    assert both.hook.rnd is not None and both.hook.episodic is not None and both.agent.num_values == 2
    assert (both.hook.config.rnd_weight, both.hook.config.episodic_weight) == (1.0, 1.0)
    alone = build("episodic")
    assert alone.hook.rnd is None and alone.hook.non_episodic is False and alone.agent.num_values == 1
    assert alone.hook.preference_policy.encoder is alone.agent.encoder  # the features: a look-up
    weighted = build("ppgta", episodic_weight=0.5, rnd_weight=2.0)  # the run config's weights win over the mode's
    assert (weighted.hook.config.rnd_weight, weighted.hook.config.episodic_weight) == (2.0, 0.5)
    with pytest.raises(UserError, match="both 0"):
        build("episodic", episodic_weight=0.0)
    with pytest.raises(UserError, match="needs the path-following policy"):
        build_explorer(small_park, None, "episodic", run_dir=str(tmp_path), total_timesteps=512, num_envs=2)


def test_the_hooks_episodic_bonus_is_the_bonus_of_each_frame_reached(path_policy, small_park, tmp_path, park_frames):
    """Over two rollouts with an episode end inside the first: the bonus the hook gives (features
    of the frames reached by look-up, the episode's last frame and the rollout's last frames
    encoded at its end) is E3B's bonus computed step by step on each reached frame's own features,
    C carried from one rollout to the next and started again at the new episode."""
    from lightning.fabric import Fabric

    from playtester.exploration.episodic import EllipticalEpisodicBonus
    from playtester.exploration.hook import StepView

    explorer = build_explorer(small_park, path_policy, "episodic", run_dir=str(tmp_path), total_timesteps=512, num_envs=2)
    hook, agent = explorer.hook, explorer.agent
    hook.setup(Fabric(accelerator="cpu", devices=1))
    frames = park_frames[:10].reshape(5, 2, *park_frames.shape[1:])  # 5 steps' frames acted on, 2 games
    final = park_frames[11:12]  # game 0's episode ends at step 1 on this frame; step 2 starts anew on frames[2]
    by_hand = EllipticalEpisodicBonus(hook.config.episodic, agent.policy_cfg.feature_dim, 2)

    def features(f):  # each frame through the encoder, as the explorer sees it
        with torch.no_grad():
            return agent.encoder(to_input(grayscale_frames(torch.as_tensor(f)), agent.policy_cfg.frames))

    expected, got = [], []
    for steps in ((0, 1, 2), (3,)):  # two rollouts: 3 steps, then 1
        for t in steps:
            start = torch.tensor([t == 0 or t == 2, t == 0])
            reached = frames[t + 1].copy() if t + 1 < 5 else park_frames[10:12].copy()
            if t == 1:
                reached[0] = final[0]
            agent.prepare(torch.as_tensor(frames[t]))  # the explorer encodes what it acts on
            hook.step(StepView(frames[t], torch.zeros(2, 9), start, reached))
            expected.append(by_hand.rollout_bonus(features(frames[t]).unsqueeze(0), features(reached).unsqueeze(0),
                                                  start.unsqueeze(0))[0])
        got.append(hook._rollout_rewards(hook._recorded, hook._reached_features(hook._recorded))[1])
        hook._clear()
    torch.testing.assert_close(torch.cat(got), torch.stack(expected), rtol=1e-4, atol=1e-6)


def test_an_episodic_explorer_trains_logs_its_terms_and_resumes(path_policy, small_park, tmp_path):
    def build(total, resume=False):
        return build_explorer(small_park, path_policy, "ppgta-episodic", run_dir=str(tmp_path / "run"), total_timesteps=total,
                              num_envs=2, num_steps=8, num_minibatches=1, update_epochs=1, rnd=SMALL_RND, checkpoint_every=0,
                              resume=resume)

    explorer = build(32)
    result = train(*explorer)
    assert explorer.hook.episodic.projection is None  # the tiny policy's 32 features: used as they are
    resumed_explorer = build(48, resume=True)
    resumed = train(*resumed_explorer)
    assert result.global_step == 32 and resumed.global_step == 48
    assert resumed_explorer.hook.episodic.reward_rms.count > explorer.hook.episodic.reward_rms.count  # statistics carried on

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    raw = [e.value for e in events.Scalars("rewards/episodic_raw")]
    assert all(0 < r <= 1 / explorer.hook.config.episodic.ridge for r in raw), raw
    assert {"rewards/episodic", "rewards/novelty", "rewards/intrinsic", "charts/alpha"} <= set(events.Tags()["scalars"])


def test_the_step_scale_divides_each_novelty_by_the_std_of_its_values(path_policy, small_park, tmp_path, park_frames):
    """`novelty_scale: step`: the episodic bonus the hook mixes is its raw value over the running
    std of the raw values (the rollout's own, the first time), where `return` divides by that of
    its discounted sum; the statistics are saved and restored."""
    from lightning.fabric import Fabric

    from playtester.exploration.hook import StepView

    hooks = {}
    for scale in ("return", "step"):
        explorer = build_explorer(small_park, path_policy, "episodic", run_dir=str(tmp_path), total_timesteps=512,
                                  num_envs=2, novelty_scale=scale)
        hook = hooks[scale] = explorer.hook
        hook.setup(Fabric(accelerator="cpu", devices=1))
        frames = park_frames[:10].reshape(5, 2, *park_frames.shape[1:])
        for t in range(4):
            explorer.agent.prepare(torch.as_tensor(frames[t]))
            hook.step(StepView(frames[t], torch.zeros(2, 9), torch.tensor([t == 0, t == 0]), frames[t + 1]))
    raw = hooks["return"]._rollout_rewards(hooks["return"]._recorded, hooks["return"]._reached_features(hooks["return"]._recorded))[1].double()
    logs = hooks["step"].end_rollout().logs
    n, prior = raw.numel(), 1e-4  # RunningMeanStd's prior: mean 0, variance 1, count 1e-4 (Chan's update)
    std = ((prior + raw.var(unbiased=False) * n + raw.mean() ** 2 * prior * n / (prior + n)) / (prior + n)).sqrt()
    assert logs["rewards/episodic_raw"] == pytest.approx(float(raw.mean()), rel=1e-5)
    assert logs["rewards/episodic"] == pytest.approx(float((raw / std).mean()), rel=1e-4)
    saved = hooks["step"].state_dict()["step_scale"]["episodic"]
    hooks["return"].load_state_dict({"alpha": hooks["return"].alpha.state_dict(), "episodic": hooks["return"].episodic.state_dict(),
                                     "step_scale": {"episodic": saved}})
    torch.testing.assert_close(hooks["return"].step_scale["episodic"].var, saved["var"])
