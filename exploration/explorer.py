"""The full explorer, wired: game → OD-masked frames → PPO actor-critic, RND and preference reward.

`build_explorer(game, preference_ckpt, mode)` returns what `ppo.train` takes, checked before any
training starts:

- the actor-critic: `ImitationActorCritic` initialised from the path-following policy (encoder
  frozen, features stored in the rollout buffer, two value heads); the `inspector` baseline uses
  the same network when a policy is given, else PPO's default conv GRU; `random` is `RandomAgent`;
- the reward hook: `ExplorationReward` with ensemble RND on 64×64 OD-masked frames and, in
  `ppgta` mode, the same path policy frozen as the preference policy (`−KL(π^e ‖ π^p)`) mixed by
  the adaptive α; `ppgta-episodic` adds E3B's elliptical episodic bonus on the path policy's
  encoder features, `episodic` has that bonus in RND's place (one value head then);
- the games: `make_env` (`make_game` → `KnownObjectsMask` → `ResizeFrame` to the policy's
  `FrameSpec`), several at once (async).

The OD mask needs the boxes of the objects of interest. Until the tester loop runs the detector
(the `playtester run` issue), `KnownObjectsMask` stands in for it with the boxes the engine knows
(`info["objects"]`, ground truth on the park): every visible OOI stays in colour, the rest is
grayscale; a frame with no known box is all grayscale. The policies grayscale every frame (the
path policy was trained on frames with no object under test), so the mask only changes what RND
sees.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec
from playtester.capture.games import probe_game
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.exploration.imitation_ac import ImitationActorCritic
from playtester.exploration.modes import MODES, ExplorerPreset, explorer_preset
from playtester.exploration.ppo import PPOConfig
from playtester.exploration.reward import ExplorationReward
from playtester.exploration.rnd import RNDConfig
from playtester.capture.envs import check_rgb_frames, make_env


GameWrapper = Callable[[gym.Env, int], gym.Env]
"""`wrap(game, index)`: what sits between game instance `index` and the explorer's mask (the
tester loop, in `playtester run`); picklable, since it runs in the worker processes."""


class Explorer(NamedTuple):
    """What `ppo.train(*explorer)` takes: config, actor-critic, reward hook, game factory."""

    cfg: PPOConfig
    agent: nn.Module | None
    """None: PPO builds its default conv GRU (inspector without a policy)."""
    hook: ExplorationReward | None
    """None for the random agent."""
    env_fn: Callable[[], gym.Env] | list[Callable[[], gym.Env]]
    """One factory for every instance, or one per instance."""
    spaces: tuple[gym.Space, gym.Space] | None = None
    """`(observation space, action space)` of one instance, from the game's probe: the vector env
    reads them here instead of starting a throwaway instance (`vector_env.make_vector_env`)."""


SEQ_LEN = 8
"""The explorer's update takes each instance's rollout as sequences of this many steps, several side
by side in a minibatch (`PPOConfig.seq_len`): at the paper's shape (global GRU 1024) the update in
×0.45 the time of whole rollouts, with no measured cost to coverage or the OOIs tested
(docs/benchmarks/ppo-and-loop.md). A rollout whose length it does not divide is taken whole."""


def explorer_options(num_envs: int, num_steps: int, accelerator: str) -> dict[str, Any]:
    """The explorer's `PPOConfig` settings besides CleanRL's defaults: one instance plays in this
    process, several in worker processes; the game's own reward ignored (`env_reward_coef=0`:
    novelty and style only); decisions in int8 on a CPU (`acting`: ×0.48 the time of fp32's, the
    same action 98 % of the time), fp32 on a GPU; the update on sequences of `SEQ_LEN` steps."""
    # One game instance plays in this process: a worker process would only wait while the explorer
    # decides and make the explorer wait while it tests, and a forked worker must keep to one torch
    # thread (OpenMP's threads do not survive a fork), where in here the test policy and detector
    # use every core the explorer leaves idle during a test.
    return {"vector_env": "async" if num_envs > 1 else "sync", "env_reward_coef": 0.0, "encoder": "conv",
            "num_minibatches": math.gcd(num_envs, 4), "acting": "int8" if accelerator == "cpu" else "fp32",
            "seq_len": SEQ_LEN if num_steps % SEQ_LEN == 0 and num_steps > SEQ_LEN else 0}


def rollout_memory(num_steps: int, num_envs: int, frames: FrameSpec, features: int | None = None) -> int:
    """Bytes of the PPO explorer's rollout and of its update, estimated from the run's options
    before anything is built (`run` refuses a --rollout × --envs the machine has no room for):
    each step's frame, kept by the novelty reward, and what the rollout stores of it (the frame,
    or the preference policy's `features` floats); then the update's pass over one minibatch of
    whole environment sequences (all the rollout's steps of `num_envs / gcd(num_envs, 4)`
    instances at once): each frame as floats and the activations of the convolutions over it,
    counted on the meta device, kept for the backward pass (as `training_bytes` counts them). A
    frozen trunk's features (ppgta) pass no convolution in the update."""
    from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig
    from playtester.perception.training import FLOAT_BYTES, activation_count, on_meta

    frame = 3 * frames.width * frames.height
    stored = frame if features is None else FLOAT_BYTES * features
    minibatch = num_steps * (num_envs // math.gcd(num_envs, 4))
    if features is None:
        net = on_meta(lambda: GRUActorCritic(GRUActorCriticConfig(obs_shape=(frames.height, frames.width, 3), num_actions=2,
                                                                  encoder="conv")))
        per_frame = frame + activation_count(net.encoder, (1, 3, frames.height, frames.width))
    else:
        per_frame = features
    return num_steps * num_envs * (frame + stored) + FLOAT_BYTES * minibatch * per_frame


def build_explorer(
    game: str,
    preference_ckpt: str | Path | None,
    mode: str = "ppgta",
    *,
    run_dir: str = "runs/explore",
    total_timesteps: int = 100_000,
    num_envs: int = 8,
    rnd: RNDConfig | None = None,
    rnd_weight: float | None = None,
    episodic_weight: float | None = None,
    novelty_scale: str | None = None,
    episodic_memory: str = "episode",
    game_options: dict[str, Any] | None = None,
    wrap: GameWrapper | None = None,
    preference: Any = None,
    probe: Any = None,
    **ppo_options: Any,
) -> Explorer:
    """The explorer of `mode` on `game`, every check done before training (see the module doc).

    `ppo_options` go to `PPOConfig` (e.g. `num_steps`, `vector_env`, `num_minibatches`, `seed`);
    by default the games run in separate processes (`async`) and the game's own reward is ignored
    (`env_reward_coef=0`: the explorer is rewarded for novelty and style only). `game_options`
    go to `make_game` (e.g. `max_steps`); `wrap` puts a wrapper on each instance (see
    `GameWrapper`); the game is probed unwrapped. The explorer's own defaults (`explorer_options`)
    make it play in int8 on a CPU and update on sequences of `SEQ_LEN` steps. `rnd_weight` and
    `episodic_weight` replace the mode's weights of its two novelties (`modes.NOVELTY_WEIGHTS`);
    `novelty_scale` is what each novelty is divided by (`ExplorationRewardConfig.novelty_scale`;
    default: the mode's own, `modes.NOVELTY_SCALE`); `episodic_memory` what the episodic bonus
    remembers (`EpisodicConfig.memory`).
    A run assembled already (`playtester/tester/assemble.py`) hands down its `preference` policy
    (the `LivePolicy` of `preference_ckpt`, loaded) and its game's `probe` (`GameInfo`), so that
    neither is loaded or started again.
    """
    if mode not in MODES:
        raise UserError(f"explorer mode {mode!r}: use one of {', '.join(MODES)}")
    preset = explorer_preset(mode, rnd, rnd_weight, episodic_weight, novelty_scale, episodic_memory)
    if preset.needs_preference_policy and preference_ckpt is None:
        raise UserError(f"explorer mode {mode!r} needs the path-following policy: pass --preference models/path.ckpt")

    policy = None
    if preference_ckpt is not None and mode != "random":
        from playtester.imitation.live import load_policy

        policy = (preference if preference is not None else load_policy(preference_ckpt)).policy
    frames = policy.cfg.frames if policy is not None else FrameSpec.square(64)  # a policy's frames are its encoder's

    cfg = explorer_config(game, run_dir, total_timesteps, num_envs, frames, ppo_options)
    env_fn = instance_factories(game, frames, game_options, wrap, num_envs)
    observation_space, action_space, n = probed_spaces(game, game_options, policy, preference_ckpt, probe)
    spaces = (gym.spaces.Box(0, 255, shape=frames.shape, dtype=np.uint8), action_space)  # `make_env`'s: resized frames
    if not preset.trained:
        return Explorer(cfg, RandomAgent(RandomAgentConfig(num_actions=int(n), num_values=1)), None, env_fn, spaces)

    agent, hook = explorer_networks(cfg, preset, policy, preference_ckpt, num_envs)
    hook.check_game(observation_space, action_space, game)
    return Explorer(cfg, agent, hook, env_fn, spaces)


def explorer_config(game: str, run_dir: str, total_timesteps: int, num_envs: int, frames: FrameSpec,
                    ppo_options: dict[str, Any]) -> PPOConfig:
    """The explorer's `PPOConfig`: `explorer_options`, then `ppo_options`; bad ones in one line."""
    options = {**explorer_options(num_envs, ppo_options.get("num_steps", PPOConfig.num_steps), ppo_options.get("accelerator", "cpu")),
               **ppo_options}
    try:
        return PPOConfig(env_id=game, run_dir=run_dir, total_timesteps=total_timesteps, num_envs=num_envs,
                         frames=frames, **options)
    except (TypeError, ValueError) as e:
        raise UserError(f"explorer options: {e}") from None


def instance_factories(game: str, frames: FrameSpec, game_options: dict[str, Any] | None, wrap: GameWrapper | None,
                       num_envs: int) -> Callable[[], gym.Env] | list[Callable[[], gym.Env]]:
    """`make_env` of the explorer's game instances: one factory for all, or (with `wrap`) one each."""
    env = functools.partial(make_env, game, frames, mask=True, game_options=game_options)
    if wrap is None:
        return env
    return [functools.partial(env, wrap=wrap, index=i) for i in range(num_envs)]


def probed_spaces(game: str, game_options: dict[str, Any] | None, policy: Any, preference_ckpt: str | Path | None,
                  probe: Any = None):
    """`(observation space, action space, number of actions)` of `game`, looked at before anything
    is built or trained (once a run: `probe_game` keeps what it saw, or the run hands its `probe`
    down), checked: RGB frames, Discrete actions, and the same number of actions as the path policy."""
    probe = probe if probe is not None else probe_game(game, **(game_options or {}))
    observation_space, action_space = probe.observation_space, probe.action_space
    check_rgb_frames(observation_space, f"game {game!r}")
    n = getattr(action_space, "n", None)
    if n is None:
        raise UserError(f"game {game!r}: its actions are {action_space}; the explorer needs a Discrete key map")
    if policy is not None and n != policy.cfg.n_actions:
        raise UserError(f"game {game!r} has {n} actions but the preference policy acts over {policy.cfg.n_actions} "
                        f"({preference_ckpt}); use a policy trained with this game's key map")
    return observation_space, action_space, n


def explorer_networks(cfg: PPOConfig, preset: ExplorerPreset, policy: Any, preference_ckpt: str | Path | None, num_envs: int):
    """`(actor-critic, exploration reward)` of a trained mode: the actor-critic from the path policy
    (None without one: PPO's default), the preference policy sharing its encoder where the mode
    has one."""
    # The networks drawn at random here (the value heads, RND's target and predictors) come from the
    # run's seed: `ppo.train` seeds the run only after they are built, so without this two runs of
    # one seed started from different novelty targets and played differently from the first update.
    # They are drawn from a fork of torch's generator, so that the caller's stream is not reseeded.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        agent = preference = None
        num_values = 2 if preset.reward.uses_rnd else 1  # RND's non-episodic stream has a value head of its own
        if policy is not None:
            agent = ImitationActorCritic.from_policy(policy, num_values=num_values, source=str(preference_ckpt))
            if preset.needs_preference_policy:
                preference = ImitationActorCritic.from_policy(policy, num_values=1, source=str(preference_ckpt))
                preference.share_encoder(agent)
        hook = ExplorationReward(preset.reward, num_envs, preference_policy=preference)  # on PPO's Fabric once training starts
    return agent, hook
