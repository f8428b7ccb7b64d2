"""Exploration: recurrent PPO, ensemble RND, the preference reward and its adaptive mix.

    losses.py        GAE, clipped policy and value losses, entropy: pure functions
    actor_critic.py  the `ActorCritic` protocol PPO trains; `GRUActorCritic`; `RandomAgent`
    ppo.py           recurrent PPO on Lightning Fabric (one loop), `RewardHook`, --resume
    vector_env.py    the games PPO plays (`state:ID` or a game spec), `AsyncVectorEnv`/`SyncVectorEnv`
    checkpoints.py   atomic checkpoint files, RNG state, `load_agent` (rebuilds from the file alone)
    rnd.py           `EnsembleRND`: frozen target, N predictors, replay, normalisation
    preference.py    `preference_reward` (−KL(π^e ‖ π^p)), `AlphaSchedule`, `mix_rewards`
    reward.py        `ExplorationReward`: the `RewardHook` that blends novelty and preference
    modes.py         `explorer_preset`: ppgta | inspector | random
    imitation_ac.py  `ImitationActorCritic`: the path policy (frozen encoder) with two value heads
    explorer.py      `build_explorer(game, preference_ckpt, mode)` → (cfg, agent, hook, env_fn)
                     for `ppo.train`; `KnownObjectsMask` (OD mask from the engine's boxes)
    evolution.py     Wuji's operators, pure: non-dominated sort, crowding distance, survivors,
                     binary tournament, single-point crossover, Gaussian mutation of weights
    state_coverage.py  states = telemetry features in equal intervals (frame cells without)
    evaluation.py    policies played on a vector env, one seeded job an episode; their scores
    game_reward.py   the winning objective's reward: the game's own or a `--reward` callable
    population.py    `Evolution`: Wuji's generation loop (PPO-refined offspring, NSGA-II), resume

Done in `imitation_ac.py` and `explorer.py` (the first three points below): the actor-critic
around the imitation policy, the frozen preference policy (sharing the explorer's encoder and
features), the OD-masked RND input (an env wrapper, `KnownObjectsMask`, rather than
`rnd_frames`; ground-truth boxes from `info["objects"]` stand in for the detector), the checks
before training. Left: `playtester run` (its own issue), the detector's boxes in place of the
ground truth, and the optional `FeatureEncoder` trunk inside RND (not wired).

What wiring the full explorer (after issues 4 and 5) needed:

- An `ActorCritic` around the imitation policy: `prepare(obs)` = the frozen `FeatureEncoder` trunk
  on the (K-frame, OD-masked) frames, so rollouts store features (`frozen_trunk = True`);
  `forward(features, state, done)` = the local/global GRUs with `done` resetting the global state;
  a second value head (`num_values = 2`) next to the action head; weights of everything but the
  value heads loaded from the path-following checkpoint; `checkpoint_spec`/`from_config`.
- The same policy, frozen, as `ExplorationReward(preference_policy=…)`; its action count is
  checked against the game's by `ExplorationReward.check_game` before training.
- `rnd_frames`: downsample to 64×64 and apply `od_mask` (perception) before RND;
  `rnd_trunk_factory` to use the `FeatureEncoder` trunk in the RND networks if wanted (then
  `normalize_obs=False`).
- The `playtester run` command: `make_game` → `ResizeFrame` → `PPOConfig(env_id=spec,
  vector_env="async")`, `explorer_preset(mode)`, `train(cfg, agent, hook)`.
"""
