"""One PPO rollout: its storage (`Rollout`, time first), where the games stand between steps
(`Games`), the episodes that ended in it (`Episodes`), and its lockstep collection
(`collect_rollout`: every game steps together; `free_rollout.py` holds the free-running one).
A time limit's cut is bootstrapped with the value of the frame it reached (`bootstrap_time_limit`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.distributions import Categorical

from playtester.exploration.hook import RewardHook, StepView
from playtester.exploration.ppo_config import PPOConfig


class Rollout:
    """Storage for one rollout, time first (CleanRL's `obs`, `actions`, `logprobs`, … buffers)."""

    def __init__(self, cfg: PPOConfig, num_values: int, device: torch.device):
        T, N = cfg.num_steps, cfg.num_envs
        self.device, self.num_values = device, num_values
        self.obs: Tensor | None = None
        """Prepared observations; allocated at the first step, when their shape is known."""
        self.actions = torch.zeros((T, N), dtype=torch.long, device=device)
        self.logprobs = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N, num_values), device=device)
        self.game_rewards = torch.zeros((T, N), device=device)
        self.dones = torch.zeros((T, N), device=device)
        self.values = torch.zeros((T, N, num_values), device=device)
        self.initial_state: Tensor | None = None
        """`N×…` recurrent state at the start of the rollout."""
        self.states: Tensor | None = None
        """`T×N×…` recurrent state before each step's decision, where `cfg.seq_len` cuts the
        rollout for the update (`keep_state`); else None."""
        self.keeps_states = 0 < cfg.seq_len < T

    def keep_state(self, steps: Tensor | int, rows: Tensor | slice, state: Tensor) -> None:
        """The recurrent state the decision of `steps` × `rows` starts from (`cfg.seq_len` only)."""
        if not self.keeps_states:
            return
        if self.states is None:
            self.states = torch.zeros((self.actions.shape[0], *state.shape), dtype=state.dtype, device=self.device)
        self.states[steps, rows] = state


class Games:
    """Where the games stand between steps (CleanRL's `next_obs`, `next_done`, `next_lstm_state`),
    with the steps taken so far and the running episodes' returns and lengths."""

    def __init__(self, cfg: PPOConfig, envs: gym.vector.VectorEnv, module: nn.Module, start_iteration: int, global_step: int, device: torch.device):
        N = cfg.num_envs
        # The environments' state is not in the checkpoint (games cannot be snapshotted in
        # general): a resumed run starts fresh episodes, seeded from the iteration it resumes at.
        self.next_obs, _ = envs.reset(seed=cfg.seed + 1000 * (start_iteration - 1))
        self.next_done = torch.ones(N, device=device)  # the first observations start episodes
        self.next_state = module.initial_state(N)
        self.global_step = global_step
        self.episode_return = np.zeros(N)
        self.episode_length = np.zeros(N, dtype=np.int64)


class Episodes(NamedTuple):
    """The episodes that ended during one rollout."""

    returns: list[float]
    lengths: list[int]
    stopped: bool = False
    """`stop` ended the rollout before its last step."""


def collect_rollout(
    cfg: PPOConfig, envs: gym.vector.VectorEnv, agent: nn.Module, module: nn.Module, rollout: Rollout, games: Games,
    reward_hook: RewardHook | None, stop: Callable[[dict[str, Any]], bool] | None,
) -> Episodes:
    """Play `num_steps` steps of every game into `rollout`, showing each step to the hook."""
    device, N = rollout.device, cfg.num_envs
    rollout.initial_state = games.next_state.clone()
    returns: list[float] = []
    lengths: list[int] = []
    for step in range(cfg.num_steps):
        games.global_step += N
        with torch.no_grad():
            next_input = module.prepare(torch.as_tensor(games.next_obs, device=device))
            if rollout.obs is None:
                rollout.obs = torch.zeros((cfg.num_steps, N, *next_input.shape[1:]), dtype=next_input.dtype, device=device)
            rollout.obs[step] = next_input
            rollout.dones[step] = games.next_done
            rollout.keep_state(step, slice(None), games.next_state)
            out = agent(next_input.unsqueeze(0), games.next_state, games.next_done.unsqueeze(0))
            logits, games.next_state = out.logits[0], out.state
            dist = Categorical(logits=logits, validate_args=False)
            action = dist.sample()
            rollout.logprobs[step] = dist.log_prob(action)
            rollout.values[step] = out.values[0]
        rollout.actions[step] = action

        obs_before = games.next_obs
        games.next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
        if stop is not None and stop(infos):
            return Episodes(returns, lengths, stopped=True)
        done = np.logical_or(terminations, truncations)
        reward_t = torch.as_tensor(reward, dtype=torch.float32, device=device)
        rollout.game_rewards[step] = reward_t
        rollout.rewards[step, :, 0] = cfg.env_reward_coef * reward_t
        reached_obs = games.next_obs
        if done.any():
            reached_obs = games.next_obs.copy()
            for i in np.flatnonzero(done):
                reached_obs[i] = infos["final_obs"][i]
            # Time-limit truncation: the episode did not really end, so bootstrap its value.
            for i in np.flatnonzero(truncations & ~terminations):
                bootstrap_time_limit(cfg, agent, module, rollout, games, step, int(i), reached_obs[i])
        if reward_hook is not None:
            reward_hook.step(StepView(obs_before, logits, rollout.dones[step].bool().cpu(), reached_obs, infos, done))

        games.episode_return += reward
        games.episode_length += 1
        for i in np.flatnonzero(done):
            returns.append(float(games.episode_return[i]))
            lengths.append(int(games.episode_length[i]))
        games.episode_return[done] = 0.0
        games.episode_length[done] = 0
        games.next_done = torch.as_tensor(done, dtype=torch.float32, device=device)
    return Episodes(returns, lengths)


def bootstrap_time_limit(cfg: PPOConfig, agent: nn.Module, module: nn.Module, rollout: Rollout, games: Games, step: int,
                         i: int, final_obs: np.ndarray) -> None:
    """A time limit cut game `i`'s episode at `step`: the episode did not really end, so the value
    of the frame it reached (from the state after the step's decision), discounted, joins the
    step's episodic reward."""
    device = rollout.device
    with torch.no_grad():
        final_input = module.prepare(torch.as_tensor(final_obs[None], device=device))
        final_value = agent(final_input.unsqueeze(0), games.next_state[i : i + 1], torch.zeros(1, 1, device=device)).values[0, 0, 0]
    rollout.rewards[step, i, 0] += cfg.gamma * final_value
