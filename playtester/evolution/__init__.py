"""Wuji's room: evolutionary testing. `run` is `playtester run evolve` (oracles on every
evaluation); `population` the loop of a population evolved for exploration and winning with
PPO-refined offspring; `operators` NSGA-II selection and weight-space variation as pure
functions; `evaluation` plays policies on several game instances; `state_coverage` Wuji's
measure of exploration. The winning objective's reward is a game's (`capture/game_reward.py`)."""
