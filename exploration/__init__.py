"""Exploration: recurrent PPO, ensemble RND, the preference reward and its adaptive mix.

    losses.py        GAE, clipped policy and value losses, entropy: pure functions
    actor_critic.py  the `ActorCritic` protocol PPO trains; `GRUActorCritic`; `RandomAgent`
    hook.py          the `RewardHook` protocol: `StepView` (one vector step), `ShapedRewards`
    rollout.py       one rollout's storage (`Rollout`, `Games`, `Episodes`) and its lockstep collection
    free_rollout.py  the free-running collection: each game steps again as soon as it answers
    ppo.py           recurrent PPO on Lightning Fabric (one loop), --resume, `stop`
    ppo_config.py    `PPOConfig` (CleanRL's defaults) and what a resumed run must keep
    vector_env.py    the games PPO plays, each from `make_env` (`capture/envs.py`, with `KnownObjectsMask`,
                     the OD mask from the boxes known), in `AsyncVectorEnv`/`SyncVectorEnv`
    ray_env.py       `RayVectorEnv`: the game instances as Ray actors (`--cluster`)
    checkpoints.py   atomic checkpoint files through Fabric, RNG state, `load_agent` and `load_explorer`
                     (the agent, or agent and exploration reward, rebuilt from the file alone)
    rnd.py           `EnsembleRND`: frozen target, N predictors, replay, normalisation
    preference.py    `preference_reward` (−KL(π^e ‖ π^p)), `AlphaSchedule`, `mix_rewards`
    episodic.py      `EllipticalEpisodicBonus`: E3B's episodic novelty, Sherman–Morrison per instance
    reward.py        `ExplorationReward`: the `RewardHook` that blends novelty and preference
    modes.py         `explorer_preset`: ppgta | ppgta-episodic | episodic | inspector | random
    imitation_ac.py  `ImitationActorCritic`: the path policy (frozen encoder) with two value heads
    explorer.py      `build_explorer(game, preference_ckpt, mode)` → (cfg, agent, hook, env_fn)
                     for `ppo.train`

How `playtester run` uses it (`playtester/tester/runner.py`): `build_explorer(game, path_policy, mode,
wrap=…)` puts the tester loop (`playtester.tester.loop.TesterEnv`) on each game instance, under the
explorer's OD mask, so that a whole OOI test is one explorer step; `ppo.train(..., stop=…)` ends
when every instance has played its share of the run's episodes. Under the tester loop the OD
mask uses its detector's latest boxes (`info["detections"]`); without it, the engine's boxes.

Evolution (Wuji) and load testing (RELINE) are built on this area and live in rooms of their
own in the app: `playtester/evolution/` and `playtester/load/`.

Left: the optional `FeatureEncoder` trunk inside RND (`rnd_trunk_factory`, not wired).
"""
