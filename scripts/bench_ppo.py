"""Our recurrent PPO against Stable-Baselines3's PPO and sb3-contrib's RecurrentPPO, side by side.

For each seed the three train on the same Gymnasium task (state vectors) for the same number of
env steps with the same PPO hyper-parameters where they share them (the RL-Zoo's tuned CartPole-v1
set, which the Zoo also uses for RecurrentPPO on CartPoleNoVel-v1): 8 envs × 32 steps, one
minibatch of the whole 256-step rollout, 20 epochs, γ 0.98, λ 0.8, no entropy bonus, learning
rate 1e-3 decayed linearly to 0, advantages normalised, value coefficient 0.5, gradient norm 0.5,
Adam ε 1e-5. SB3 uses its usual MLP policy; ours the small GRU actor-critic; RecurrentPPO its usual
`MlpLstmPolicy` with the LSTM at our GRU's size (64). Then each final policy plays
`--eval-episodes` fresh episodes, acting greedily (SB3's `evaluate_policy` default; the recurrent
ones carry their state through the episode). The three run in turn in one process so that the
machine's noise falls on all alike.

What could not be matched across the three APIs:
- the network: ours is MLP 64-64 → one GRU 64 read by both heads (plus a skip of the MLP
  features); RecurrentPPO is an LSTM 64 for the actor and a second LSTM 64 for the critic (its
  default, as in the Zoo), each followed by MLP 64-64 (52 675 parameters against our 29 827; its
  `shared_lstm` option would detach the critic from the shared LSTM, unlike ours); SB3 has no memory;
- the clip range: the two SB3 rows decay it from 0.2 (the Zoo's), ours keeps 0.2;
- the value loss: SB3's is the mean squared error × 0.5, ours half of it × 0.5 (CleanRL's);
- the minibatch: ours back-propagates through each env's whole 32-step sequence from the state at
  collection; RecurrentPPO cuts the rollout at a random index and at episode starts, pads the
  sequences and starts each from the stored state; SB3 PPO sees shuffled single steps.

    python scripts/bench_ppo.py [--env CartPole-v1] [--timesteps 100000] [--seeds 1 2 3] [--threads 1]

Prints per seed and overall: mean evaluation return, mean return of the last 20 training
episodes (each ± its standard deviation over the seeds), env steps per second of training, and the
ratios ours / SB3 and ours / RecurrentPPO. Needs the `bench` extra (stable-baselines3 and
sb3-contrib); a contender whose library is missing is skipped with a one-line message.

`--part update` times one PPO update of the explorer at the paper's shape (`update_time`) with
whole rollouts and with `seq_len` sequences, alternating in one process:

    python scripts/bench_ppo.py --part update [--envs 2] [--rollout 64] [--seq-lens 0 16 8] [--rounds 5] [--threads 2]

`--part latency` times one explorer decision on one frame with the real networks at the paper's
shape (`ImitationActorCritic`: AlexNet trunk at 128×128, local bi-GRU, global GRU 1024): the
action path (`action_path`: the explorer's forward and sample, then the reward hook's step, which
only keeps what the rollout's rewards need) against the rewards' share of a step when they are
computed in one batch at the rollout's end (`rewards_batched_per_step`, a 128-step rollout) and
the parts the action path carried when they were computed step by step (`preference`, `rnd`;
`total` was the whole decision then). `policy_int8` and `action_path_int8` are the same as
`acting: int8` decides (`exploration/acting.py`): the frozen encoder's convolutions in int8 and
the explorer's int8 copy, timed on the same frames in the same loop.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import importlib
import statistics
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch

from playtester.exploration.ppo import PPOConfig, train

# RL-Zoo's tuned PPO for CartPole-v1, shared by both contenders.
SHARED = dict(num_envs=8, num_steps=32, gamma=0.98, gae_lambda=0.8, update_epochs=20, ent_coef=0.0, learning_rate=1e-3)


def ours_config(env_id: str, timesteps: int, seed: int, run_dir: str) -> PPOConfig:
    return PPOConfig(
        env_id=f"state:{env_id}", total_timesteps=timesteps, seed=seed, run_dir=run_dir,
        num_minibatches=1, anneal_lr=True, clip_vloss=False, checkpoint_every=0, log_every=10, **SHARED,
    )


def run_ours(env_id: str, timesteps: int, seed: int, episodes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = train(ours_config(env_id, timesteps, seed, tmp))
        wall = time.perf_counter() - start
    agent = result.agent.eval()
    returns = []
    env = gym.make(env_id)
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed * 100 + episode)
        state = agent.initial_state(1)
        done, total, first = False, 0.0, True
        while not done:
            with torch.no_grad():
                x = agent.prepare(torch.as_tensor(obs[None], dtype=torch.float32)).unsqueeze(0)
                out = agent(x, state, torch.tensor([[float(first)]]))
            state, first = out.state, False
            obs, reward, terminated, truncated, _ = env.step(int(out.logits[0, 0].argmax()))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return {"eval": float(np.mean(returns)), "train_last20": float(np.mean(result.episode_returns[-20:])),
            "sps": timesteps / wall, "loop_sps": result.sps}


def sb3_kwargs(seed: int) -> dict:
    """The SHARED settings in the keywords SB3's PPO and sb3-contrib's RecurrentPPO both take."""
    return dict(
        n_steps=SHARED["num_steps"], batch_size=SHARED["num_envs"] * SHARED["num_steps"],
        n_epochs=SHARED["update_epochs"], gamma=SHARED["gamma"], gae_lambda=SHARED["gae_lambda"],
        ent_coef=SHARED["ent_coef"], learning_rate=lambda p: p * SHARED["learning_rate"],
        clip_range=lambda p: p * 0.2, seed=seed, device="cpu", verbose=0,
    )


def recurrent_policy_kwargs() -> dict:
    """RecurrentPPO's `MlpLstmPolicy` with the LSTM at our GRU's size (its default is 256)."""
    return dict(lstm_hidden_size=PPOConfig.rnn_dim, n_lstm_layers=1)


def run_sb3(env_id: str, timesteps: int, seed: int, episodes: int, recurrent: bool = False) -> dict[str, float]:
    """Train SB3's PPO (or, with `recurrent`, sb3-contrib's RecurrentPPO) and evaluate it greedily."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    envs = make_vec_env(env_id, n_envs=SHARED["num_envs"], seed=seed)
    if recurrent:
        from sb3_contrib import RecurrentPPO

        model = RecurrentPPO("MlpLstmPolicy", envs, policy_kwargs=recurrent_policy_kwargs(), **sb3_kwargs(seed))
    else:
        from stable_baselines3 import PPO

        model = PPO("MlpPolicy", envs, **sb3_kwargs(seed))
    start = time.perf_counter()
    model.learn(timesteps)
    wall = time.perf_counter() - start
    train_returns = [e["r"] for e in list(model.ep_info_buffer)[-20:]]
    eval_env = make_vec_env(env_id, n_envs=1, seed=10_000 + seed * 100)
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
    envs.close()
    eval_env.close()
    return {"eval": float(mean), "train_last20": float(np.mean(train_returns)), "sps": timesteps / wall}


# name → (label, trainer, the module it needs)
CONTENDERS = {
    "ours": ("ours", run_ours, None),
    "sb3": ("SB3 PPO", run_sb3, "stable_baselines3"),
    "recurrent": ("RecurrentPPO", lambda *a: run_sb3(*a, recurrent=True), "sb3_contrib"),
}


def available(names: list[str]) -> list[str]:
    """The contenders whose library imports; a one-line message on stderr for each one skipped."""
    kept = []
    for name in names:
        module = CONTENDERS[name][2]
        try:
            if module:
                importlib.import_module(module)
        except ImportError:
            print(f"bench_ppo: {module} is not installed, so the {CONTENDERS[name][0]} row is skipped; "
                  "install the bench extra: pip install -e '.[bench]'", file=sys.stderr)
            continue
        kept.append(name)
    return kept


def paper_shape_path_policy():
    """An untrained path policy at the paper's shape (AlexNet trunk at 128×128 → 512 features,
    K = 4 local bi-GRU 256, global GRU 1024, MLP 512 → 256): timings do not depend on its weights."""
    from dataclasses import asdict

    from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder
    from playtester.perception.encoder import EncoderConfig

    encoder_cfg = EncoderConfig(action_names=[f"a{i}" for i in range(9)], image_size=128, feature_dim=512, pretrained="none")
    policy_cfg = PolicyConfig(n_actions=9, feature_dim=512, encoder=asdict(encoder_cfg))
    return ImitationPolicy(policy_cfg, build_encoder(policy_cfg.encoder))


def decision_latency(steps: int = 384) -> dict[str, float]:
    """Median milliseconds of one explorer decision on one 240×320 frame, with the real networks.

    The explorer is `ImitationActorCritic` at the paper's shape (untrained weights: the cost does
    not depend on them): AlexNet trunk at 128×128 → 512 features, K = 4 local bi-GRU 256, global
    GRU 1024, MLP 512 → 256, two value heads. The preference policy is the same network (the path
    policy, frozen) sharing the explorer's frozen encoder and its features, as `build_explorer`
    wires it (`preference_own_encoder_pass`: what it costs when it encodes the frame again). RND
    sees the 64×64 OD-masked frame.
    """
    from playtester.capture.frames import FrameSpec
    from playtester.exploration.acting import int8_actor, int8_frozen_encoder
    from playtester.capture.envs import mask_known_objects
    from playtester.exploration.imitation_ac import ImitationActorCritic
    from playtester.exploration.preference import preference_reward
    from playtester.exploration.rnd import EnsembleRND, RNDConfig, frames_to_rnd_input

    torch.manual_seed(0)
    path_policy = paper_shape_path_policy()
    explorer = ImitationActorCritic.from_policy(path_policy, num_values=2).eval()
    explorer8 = ImitationActorCritic.from_policy(path_policy, num_values=2).eval()  # as acting: int8 runs it
    int8_frozen_encoder(explorer8, calibration_frames=1)  # random frames: one is as good a calibration as 64
    actor = int8_actor(explorer8)
    preference = ImitationActorCritic.from_policy(path_policy, num_values=1).eval()
    separate = ImitationActorCritic.from_policy(path_policy, num_values=1).eval()  # with its own encoder pass
    preference.share_encoder(explorer)  # as build_explorer wires them
    rnd = EnsembleRND(RNDConfig(obs_warmup_frames=0))
    rnd_shared = EnsembleRND(RNDConfig(obs_warmup_frames=0, predictors="shared_trunk"))
    from lightning.fabric import Fabric

    from playtester.exploration.modes import explorer_preset
    from playtester.exploration.hook import StepView
    from playtester.exploration.reward import ExplorationReward

    preset = explorer_preset("ppgta").reward
    hook = ExplorationReward(replace(preset, rnd=replace(preset.rnd, obs_warmup_frames=0)), 1, preference_policy=preference)
    hook.setup(Fabric(accelerator="cpu", devices=1))
    rollout = 128
    batched: list[float] = []
    hook_steps: list[float] = []
    rng = np.random.default_rng(0)
    e_state, p_state, q_state, done = explorer.initial_state(1), preference.initial_state(1), explorer.initial_state(1), torch.zeros(1, 1)
    box = [[100, 60, 160, 140]]  # one OOI in view (its box kept in colour for RND)
    parts: dict[str, list[float]] = {"policy": [], "preference": [], "rnd": [], "total": [], "rnd_shared_trunk": [],
                                     "total_shared_trunk": [], "preference_own_encoder_pass": []}
    for _ in range(steps):
        frame = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
        t0 = time.perf_counter()
        with torch.no_grad():
            masked = FrameSpec.square(128).resize(mask_known_objects(frame, box))  # what the env wrapper gives
            x = explorer.prepare(torch.from_numpy(masked[None]))
            out = explorer(x.unsqueeze(0), e_state, done)
            e_state = out.state
            action = torch.distributions.Categorical(logits=out.logits[0]).sample()
            t1 = time.perf_counter()
            pref = preference(preference.prepare(torch.from_numpy(masked[None])).unsqueeze(0), p_state, done)
            p_state = pref.state
            preference_reward(out.logits[0], pref.logits[0])
            t2 = time.perf_counter()
            rnd.reward(frames_to_rnd_input(masked[None]))
            t3 = time.perf_counter()
            rnd_shared.reward(frames_to_rnd_input(masked[None]))
            t4 = time.perf_counter()
            separate(separate.prepare(torch.from_numpy(masked[None])).unsqueeze(0), p_state, done)
            t5 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3, t2 - t0 + t4 - t3, t5 - t4)):
            parts[k].append(v * 1000)
        int(action)
        # the action path now: the decision above, then the reward hook's step (the frame's features are the explorer's)
        t0 = time.perf_counter()
        hook.step(StepView(masked[None], out.logits[0], done[0].bool(), masked[None]))
        hook_steps.append((time.perf_counter() - t0) * 1000)
        parts.setdefault("action_path", []).append(parts["policy"][-1] + hook_steps[-1])
        explorer8._features.clear()  # a decision encodes its frame
        t0 = time.perf_counter()
        with torch.no_grad():
            out8 = actor(explorer8.prepare(torch.from_numpy(masked[None])).unsqueeze(0), q_state, done)
            q_state = out8.state
            int(torch.distributions.Categorical(logits=out8.logits[0]).sample())
        parts.setdefault("policy_int8", []).append((time.perf_counter() - t0) * 1000)
        parts.setdefault("action_path_int8", []).append(parts["policy_int8"][-1] + hook_steps[-1])
        if len(hook._recorded.reached) == rollout:
            t0 = time.perf_counter()
            hook._rollout_rewards(hook._recorded, None)
            batched.append((time.perf_counter() - t0) * 1000 / rollout)
            hook._clear()
    parts["hook_step"], parts["rewards_batched_per_step"] = hook_steps, batched
    medians = {k: statistics.median(v) for k, v in parts.items()}
    # The fastest tenth of the decisions: what the step costs when other jobs leave the core alone.
    medians["total_p10"] = float(np.percentile(parts["total"], 10))
    medians["total_shared_trunk_p10"] = float(np.percentile(parts["total_shared_trunk"], 10))
    return medians


def update_time(envs: int = 2, rollout: int = 64, seq_lens: tuple[int, ...] = (0, 16, 8), rounds: int = 5) -> dict[int, list[float]]:
    """Seconds of one PPO update (`ppo.update`: the epochs, minibatches, backward passes and Adam
    steps) of the explorer at the paper's shape, for each `seq_len` in turn, `rounds` times.

    The rollout is what `playtester run explore` trains on: `envs` instances × `rollout` steps of
    the frozen encoder's 512 features (random: the cost does not depend on them), an episode start
    at the first step, the tester run's PPO settings (4 epochs, `gcd(envs, 4)` minibatches), the
    recurrent state kept before every step (from the actor-critic's own forward over the rollout,
    as a rollout keeps it). Each `seq_len` updates its own copy of the same network from the same
    weights; 0 is whole rollouts.
    """
    import copy
    import math

    from lightning.fabric import Fabric

    from playtester.exploration.imitation_ac import ImitationActorCritic
    from playtester.exploration.ppo import RolloutBatch, update

    torch.manual_seed(0)
    base = ImitationActorCritic.from_policy(paper_shape_path_policy(), num_values=2)
    fabric = Fabric(accelerator="cpu", devices=1)
    T, N = rollout, envs
    obs = torch.randn(T, N, 512)
    dones = torch.zeros(T, N)
    dones[0] = 1.0
    with torch.no_grad():
        state, states, logits, values = base.initial_state(N), [], [], []
        for t in range(T):
            states.append(state)
            out = base(obs[t : t + 1], state, dones[t : t + 1])
            state = out.state
            logits.append(out.logits[0])
            values.append(out.values[0])
    dist = torch.distributions.Categorical(logits=torch.stack(logits))
    actions = dist.sample()
    batch = RolloutBatch(obs, actions, dist.log_prob(actions), dones, torch.stack(values), torch.randn(T, N),
                         torch.randn(T, N, 2), states[0], torch.stack(states))
    runs = {}
    for seq_len in seq_lens:
        agent = copy.deepcopy(base)
        optimizer = torch.optim.Adam([p for p in agent.parameters() if p.requires_grad], lr=2.5e-4, eps=1e-5)
        cfg = PPOConfig(num_envs=N, num_steps=T, num_minibatches=math.gcd(N, 4), seq_len=seq_len, total_timesteps=T * N)
        runs[seq_len] = (cfg, agent, optimizer)
    times: dict[int, list[float]] = {s: [] for s in seq_lens}
    for r in range(rounds + 1):  # round 0 warms up
        for seq_len in seq_lens if r % 2 else reversed(seq_lens):
            cfg, agent, optimizer = runs[seq_len]
            t0 = time.perf_counter()
            update(cfg, fabric, agent, optimizer, batch)
            if r:
                times[seq_len].append(time.perf_counter() - t0)
    return times


def rewards_time(envs: int = 2, rollout: int = 64, rounds: int = 5) -> dict[str, list[float]]:
    """Milliseconds per step of the rollout's batched rewards (`ExplorationReward._rollout_rewards`
    and the normalisation and mix of `end_rollout`, RND's training left out) for the explorers
    `ppgta`, `ppgta-episodic` and `episodic`, at the paper's shape, `rounds` times in turn.

    Each hook sees the same rollout of `envs` × `rollout` random 128-px frames (an episode start
    at the first step and half-way on the first instance), the explorer's frozen encoder shared
    as `build_explorer` wires it (its features of the frame acted on are a look-up). The episodic
    bonus adds its Sherman–Morrison pass and the encoder pass of the frames no step acted on
    (an episode's last frame, the rollout's last frames)."""
    from lightning.fabric import Fabric

    from playtester.exploration.imitation_ac import ImitationActorCritic
    from playtester.exploration.modes import explorer_preset
    from playtester.exploration.hook import StepView
    from playtester.exploration.reward import ExplorationReward

    torch.manual_seed(0)
    path_policy = paper_shape_path_policy()
    explorer = ImitationActorCritic.from_policy(path_policy, num_values=2).eval()
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (rollout + 1, envs, 128, 128, 3), dtype=np.uint8)
    modes = ("ppgta", "ppgta-episodic", "episodic")
    hooks = {}
    for mode in modes:
        preference = ImitationActorCritic.from_policy(path_policy, num_values=1).eval()
        preference.share_encoder(explorer)
        preset = explorer_preset(mode).reward
        hooks[mode] = ExplorationReward(replace(preset, rnd=replace(preset.rnd, obs_warmup_frames=0)), envs, preference_policy=preference)
        hooks[mode].setup(Fabric(accelerator="cpu", devices=1))
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode in modes:
            hook = hooks[mode]
            for t in range(rollout):
                start = torch.tensor([t == 0 or (i == 0 and t == rollout // 2) for i in range(envs)])
                with torch.no_grad():
                    logits = explorer(explorer.prepare(torch.from_numpy(frames[t])).unsqueeze(0), explorer.initial_state(envs),
                                      start.float().unsqueeze(0)).logits[0]
                hook.step(StepView(frames[t], logits, start, frames[t + 1]))
            t0 = time.perf_counter()
            raw, episodic, preference = hook._rollout_rewards()
            if raw is not None:
                hook.rnd.normalize_rewards(raw)
            if episodic is not None:
                hook.episodic.normalize(episodic, torch.stack(hook._episode_start))
            times[mode].append((time.perf_counter() - t0) * 1000 / rollout)
            hook._clear()
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--timesteps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    parser.add_argument("--only", choices=list(CONTENDERS), help="run one contender (for tuning)")
    parser.add_argument("--part", choices=["ppo", "latency", "update", "rewards", "all"], default="all",
                        help="rewards: the batched rewards of ppgta, ppgta-episodic and episodic a step (--envs, --rollout, --rounds)")
    parser.add_argument("--envs", type=int, default=2, help="--part update: game instances of the rollout")
    parser.add_argument("--rollout", type=int, default=64, help="--part update: steps per instance")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[0, 16, 8], help="--part update: seq_len values (0: whole rollouts)")
    parser.add_argument("--rounds", type=int, default=5, help="--part update: alternating rounds")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    if args.part == "update":
        times = update_time(args.envs, args.rollout, tuple(args.seq_lens), args.rounds)
        whole = statistics.median(times[args.seq_lens[0]])
        for seq_len, ts in times.items():
            med = statistics.median(ts)
            print(f"seq_len {seq_len or 'whole'}: one update of {args.envs} × {args.rollout} steps {med:.3f} s median "
                  f"({', '.join(f'{t:.3f}' for t in ts)}), ×{med / whole:.2f}", flush=True)
        return

    if args.part == "rewards":
        times = rewards_time(args.envs, args.rollout, args.rounds)
        base = statistics.median(times["ppgta"])
        for mode, ts in times.items():
            med = statistics.median(ts)
            print(f"{mode}: the rollout's rewards {med:.2f} ms a step median ({', '.join(f'{t:.2f}' for t in ts)}), "
                  f"×{med / base:.2f} ppgta's", flush=True)
        return

    if args.part in ("latency", "all"):
        lat = decision_latency()
        print("explorer decision latency, median ms (imitation-shaped policies, paper shape): " + ", ".join(f"{k} {v:.2f}" for k, v in lat.items()), flush=True)
        print(f"the int8 copy against fp32: decision ×{lat['policy_int8'] / lat['policy']:.2f}, "
              f"action path ×{lat['action_path_int8'] / lat['action_path']:.2f}", flush=True)
    if args.part == "latency":
        return

    names = available([args.only] if args.only else list(CONTENDERS))
    rows = []
    for seed in args.seeds:
        row = {name: CONTENDERS[name][1](args.env, args.timesteps, seed, args.eval_episodes) for name in names}
        rows.append(row)
        print(f"seed {seed}: " + "  ".join(
            f"{CONTENDERS[name][0]}: eval {r['eval']:.1f}, train(last 20) {r['train_last20']:.1f}, {r['sps']:.0f} steps/s"
            for name, r in row.items()), flush=True)
    print(summary_table(rows, args))


def summary_table(rows: list[dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    """Mean ± standard deviation over the seeds per contender, and the ratios ours / each other."""
    spread = (lambda v: statistics.stdev(v)) if len(rows) > 1 else (lambda v: 0.0)
    lines = [f"\n{args.env}, {args.timesteps} env steps, seeds {args.seeds}, torch threads {args.threads}",
             f"{'':13} {'eval return':>16} {'train last 20':>16} {'steps/s':>9}"]
    summary = {}
    for name in rows[0] if rows else ():
        values = {k: [r[name][k] for r in rows] for k in ("eval", "train_last20", "sps")}
        summary[name] = s = {k: statistics.mean(v) for k, v in values.items()}
        lines.append(f"{CONTENDERS[name][0]:13} {s['eval']:8.1f} ± {spread(values['eval']):5.1f} "
                     f"{s['train_last20']:8.1f} ± {spread(values['train_last20']):5.1f} {s['sps']:9.0f}")
    for other in ("sb3", "recurrent"):
        if "ours" in summary and other in summary:
            o, b = summary["ours"], summary[other]
            lines.append(f"{'ratio':13} {o['eval'] / b['eval']:16.2f} {o['train_last20'] / b['train_last20']:16.2f} "
                         f"{o['sps'] / b['sps']:9.2f}   (ours / {CONTENDERS[other][0]})")
    return "\n".join(lines)

if __name__ == "__main__":
    sys.exit(main())
