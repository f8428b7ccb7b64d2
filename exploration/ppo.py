"""Recurrent PPO on Lightning Fabric, as one readable loop: rollout → GAE → minibatch epochs.

The names are CleanRL's (`obs`, `actions`, `logprobs`, `rewards`, `dones`, `values`,
`b_advantages`, `pg_loss`, `v_loss`, `entropy_loss`), and so are the log keys (`charts/…`,
`losses/…`). Recurrent state is done the way `ppo_atari_lstm.py` does it: the state is reset by the
done mask inside the forward pass, the state at the start of each rollout is kept, and minibatches
are cut by environment so that every sequence stays whole.

Rewards come in two streams, each with its own value head and GAE (as in CleanRL's RND PPO):

- episodic (value head 0): the game's reward, plus what a `RewardHook` adds as episodic
  (the explorer's `α r^p`); bootstrapped through time-limit truncations;
- non-episodic (value head 1, only with a hook that has one): the explorer's `(1 − α) r^e`; its
  return runs on across episode ends, as RND's intrinsic return should.

The advantages of the two streams are added with weights `ext_coef` and `int_coef`.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.distributions import Categorical

from playtester.capture.errors import UserError
from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig
from playtester.exploration.checkpoints import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from playtester.exploration.losses import compute_gae, entropy_bonus, explained_variance, policy_loss, value_loss
from playtester.exploration.ppo_config import PPOConfig, check_resumable
from playtester.exploration.vector_env import close_envs, make_vector_env

CHECKPOINT_NAME = "last.ckpt"


class StepView(NamedTuple):
    """What a reward hook sees of one vector step."""

    obs: np.ndarray
    """Raw observations the actions were taken on, `N×…`."""
    logits: Tensor
    """The explorer's action logits on `obs`, `N×A`."""
    episode_start: Tensor
    """`N` bools: `obs` is the first observation of an episode."""
    next_obs: np.ndarray
    """Raw observations reached (the final one where an episode ended), `N×…`."""
    infos: dict[str, Any] | None = None
    """The vector env's `infos` of this step (telemetry such as `frame_time_ms`; the ended
    episodes' own in `final_info`)."""
    dones: np.ndarray | None = None
    """`N` bools: the episode ended (terminated or truncated) in this step."""


class ShapedRewards(NamedTuple):
    """A hook's rewards for a whole rollout."""

    episodic: Tensor
    """`T×N`, added to the game's reward in the episodic stream."""
    non_episodic: Tensor | None
    """`T×N` for the non-episodic stream (needs an actor-critic with 2 value heads), or None."""
    logs: dict[str, float]
    """Scalars to log (`rewards/…`, `charts/alpha`, `losses/…`)."""


class RewardHook(Protocol):
    """Extra rewards computed from what the agent sees (the explorer's novelty and preference)."""

    non_episodic: bool
    """Whether `end_rollout` returns a non-episodic stream."""

    def step(self, view: StepView) -> None:
        """Record one vector step (called after the env step, before the next action)."""
        ...

    def end_rollout(self) -> ShapedRewards:
        """Rewards of the rollout just recorded; also the moment to train the hook's own models."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class RolloutBatch(NamedTuple):
    """One rollout (or a minibatch of its environments), time first: `T×N×…`."""

    obs: Tensor
    """Prepared observations (what `ActorCritic.prepare` returns)."""
    actions: Tensor
    logprobs: Tensor
    dones: Tensor
    """`dones[t]`: `obs[t]` starts an episode (the state is reset before it)."""
    values: Tensor
    """`T×N×V` values at collection time."""
    advantages: Tensor
    """Weighted sum of the streams' advantages."""
    returns: Tensor
    """`T×N×V` per-stream returns."""
    initial_state: Tensor
    """`N×…` recurrent state at the start of the rollout."""

    def environments(self, envs: Tensor) -> "RolloutBatch":
        """The minibatch holding whole sequences of the environments `envs`."""
        return RolloutBatch(*(x[envs] if name == "initial_state" else x[:, envs] for name, x in zip(self._fields, self)))


class TrainResult(NamedTuple):
    global_step: int
    iteration: int
    episode_returns: list[float]
    """Returns of the episodes finished during this call, in order."""
    sps: float
    """Environment steps per second over this call."""
    checkpoint: Path
    agent: nn.Module
    stopped_early: bool = False
    """Training ended before `total_timesteps` (early stop or time limit)."""


# -- training ----------------------------------------------------------------------------------
def train(
    cfg: PPOConfig,
    agent: nn.Module | None = None,
    reward_hook: RewardHook | None = None,
    env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]] | None = None,
    stop: Callable[[dict[str, Any]], bool] | None = None,
) -> TrainResult:
    """Train `agent` (by default a `GRUActorCritic` shaped by `cfg`) with PPO; see the module doc.

    `stop(infos)` is asked after every step of the games with that step's infos; when it says
    so, training ends before `total_timesteps`: the rollout in progress is dropped (no update
    from it) and the last update is saved. Ctrl-C saves the last completed update too, so
    `resume` continues from it.
    """
    from lightning.fabric import Fabric
    from lightning.fabric.loggers import TensorBoardLogger

    run_dir = Path(cfg.run_dir)
    checkpoint_path = run_dir / "checkpoints" / CHECKPOINT_NAME
    ckpt = None
    if not cfg.resume and checkpoint_path.exists():
        raise UserError(f"{checkpoint_path} exists: pass --resume to continue that run, or choose another run directory")
    if cfg.resume:
        ckpt = load_checkpoint(checkpoint_path)
        check_resumable(PPOConfig(**ckpt["config"]), cfg)

    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.backends.cudnn.deterministic = cfg.torch_deterministic
    logger = TensorBoardLogger(root_dir=str(run_dir), name="tensorboard", version="", default_hp_metric=False)
    fabric = Fabric(accelerator=cfg.accelerator, devices=1, loggers=logger)
    device = fabric.device

    envs = make_vector_env(cfg, env_fn)
    try:
        num_actions = int(envs.single_action_space.n)
        num_values = 2 if reward_hook is not None and reward_hook.non_episodic else 1
        if agent is None:
            agent_cfg = GRUActorCriticConfig(
                obs_shape=envs.single_observation_space.shape, num_actions=num_actions, encoder=cfg.encoder,
                hidden_dim=cfg.hidden_dim, rnn_dim=cfg.rnn_dim, num_values=num_values,
            )
            agent = GRUActorCritic(agent_cfg)
        check_agent(agent, num_actions, num_values, cfg.env_id)
        optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
        start_iteration, global_step = 1, 0
        if ckpt is not None:
            agent.load_state_dict(ckpt["agent"])
            optimizer.load_state_dict(ckpt["optimizer"])
            if reward_hook is not None:
                reward_hook.load_state_dict(ckpt["reward_hook"])
            start_iteration, global_step = ckpt["iteration"] + 1, ckpt["global_step"]
            set_rng_state(ckpt["rng"])
        agent_spec = agent.checkpoint_spec()
        agent, optimizer = fabric.setup(agent, optimizer)
        module = agent.module if hasattr(agent, "module") else agent
        trained = sum(p.numel() for p in agent.parameters() if p.requires_grad)
        total = sum(p.numel() for p in agent.parameters())
        trunk = "frozen encoder trunk, features stored in the rollout buffer" if getattr(module, "frozen_trunk", False) else "whole network trained"
        fabric.print(f"PPO on {cfg.env_id}: {num_envs_text(cfg, envs)}, {num_values} value head(s), "
                     f"{trained} of {total} parameters trained ({trunk}), iterations {start_iteration}..{cfg.num_iterations}")
        if ckpt is not None:
            fabric.print(f"resumed from {checkpoint_path} at step {global_step}")

        def save(iteration: int, step: int, rng: dict[str, Any] | None = None) -> Path:
            return save_checkpoint(checkpoint_path, {
                "config": asdict(cfg), "agent_spec": agent_spec, "agent": module.state_dict(),
                "optimizer": optimizer.state_dict(), "iteration": iteration, "global_step": step,
                "reward_hook": reward_hook.state_dict() if reward_hook is not None else None,
                "rng": rng if rng is not None else rng_state(),
            })

        # Storage for one rollout, time first.
        T, N = cfg.num_steps, cfg.num_envs
        actions = torch.zeros((T, N), dtype=torch.long, device=device)
        logprobs = torch.zeros((T, N), device=device)
        rewards = torch.zeros((T, N, num_values), device=device)
        game_rewards = torch.zeros((T, N), device=device)
        dones = torch.zeros((T, N), device=device)
        values = torch.zeros((T, N, num_values), device=device)
        gammas = [cfg.gamma, cfg.int_gamma][:num_values]
        adv_coefs = [cfg.ext_coef, cfg.int_coef][:num_values]

        # The environments' state is not in the checkpoint (games cannot be snapshotted in
        # general): a resumed run starts fresh episodes, seeded from the iteration it resumes at.
        next_obs_np, _ = envs.reset(seed=cfg.seed + 1000 * (start_iteration - 1))
        next_done = torch.ones(N, device=device)  # the first observations start episodes
        next_state = module.initial_state(N)
        episode_return = np.zeros(N)
        episode_length = np.zeros(N, dtype=np.int64)
        finished_returns: list[float] = []
        start_time, start_step = time.time(), global_step
        obs = None
        best_return, stale, stopped_early = -np.inf, 0, False
        # What Ctrl-C saves: the last completed update, with the random state it ended with.
        completed, completed_step, completed_rng = start_iteration - 1, global_step, rng_state()
        saved_through = start_iteration - 1
        stopped = False  # by `stop`

        try:
            for iteration in range(start_iteration, cfg.num_iterations + 1):
                initial_state = next_state.clone()
                if cfg.anneal_lr:
                    frac = 1.0 - (iteration - 1.0) / cfg.num_iterations
                    optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
                iteration_returns, iteration_lengths = [], []

                # 1. Rollout.
                for step in range(T):
                    global_step += N
                    with torch.no_grad():
                        next_input = module.prepare(torch.as_tensor(next_obs_np, device=device))
                        if obs is None:
                            obs = torch.zeros((T, N, *next_input.shape[1:]), dtype=next_input.dtype, device=device)
                        obs[step] = next_input
                        dones[step] = next_done
                        out = agent(next_input.unsqueeze(0), next_state, next_done.unsqueeze(0))
                        logits, next_state = out.logits[0], out.state
                        dist = Categorical(logits=logits, validate_args=False)
                        action = dist.sample()
                        logprobs[step] = dist.log_prob(action)
                        values[step] = out.values[0]
                    actions[step] = action

                    obs_before = next_obs_np
                    next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                    if stop is not None and stop(infos):
                        stopped = True
                        break
                    done = np.logical_or(terminations, truncations)
                    reward_t = torch.as_tensor(reward, dtype=torch.float32, device=device)
                    game_rewards[step] = reward_t
                    rewards[step, :, 0] = cfg.env_reward_coef * reward_t
                    reached_obs = next_obs_np
                    if done.any():
                        reached_obs = next_obs_np.copy()
                        for i in np.flatnonzero(done):
                            reached_obs[i] = infos["final_obs"][i]
                        # Time-limit truncation: the episode did not really end, so bootstrap its value.
                        for i in np.flatnonzero(truncations & ~terminations):
                            with torch.no_grad():
                                final_input = module.prepare(torch.as_tensor(reached_obs[i : i + 1], device=device))
                                final_value = agent(final_input.unsqueeze(0), next_state[i : i + 1], torch.zeros(1, 1, device=device)).values[0, 0, 0]
                            rewards[step, i, 0] += cfg.gamma * final_value
                    if reward_hook is not None:
                        reward_hook.step(StepView(obs_before, logits, dones[step].bool().cpu(), reached_obs, infos, done))

                    episode_return += reward
                    episode_length += 1
                    for i in np.flatnonzero(done):
                        iteration_returns.append(float(episode_return[i]))
                        iteration_lengths.append(int(episode_length[i]))
                    episode_return[done] = 0.0
                    episode_length[done] = 0
                    next_done = torch.as_tensor(done, dtype=torch.float32, device=device)

                if stopped:
                    break
                hook_logs: dict[str, float] = {}
                if reward_hook is not None:
                    shaped = reward_hook.end_rollout()
                    rewards[:, :, 0] += shaped.episodic.to(device)
                    if num_values == 2:
                        rewards[:, :, 1] = shaped.non_episodic.to(device)
                    hook_logs = shaped.logs

                # 2. Advantages: GAE per stream; the non-episodic stream ignores episode ends.
                with torch.no_grad():
                    next_input = module.prepare(torch.as_tensor(next_obs_np, device=device))
                    next_value = agent(next_input.unsqueeze(0), next_state, next_done.unsqueeze(0)).values[0]
                    advantages = torch.zeros((T, N), device=device)
                    returns = torch.zeros_like(values)
                    for v in range(num_values):
                        episodic = v == 0
                        adv_v, returns[:, :, v] = compute_gae(
                            rewards[:, :, v], values[:, :, v],
                            dones if episodic else torch.zeros_like(dones),
                            next_value[:, v], next_done if episodic else torch.zeros_like(next_done),
                            gammas[v], cfg.gae_lambda,
                        )
                        advantages += adv_coefs[v] * adv_v
                batch = RolloutBatch(obs, actions, logprobs, dones, values, advantages, returns, initial_state)

                # 3. Minibatch epochs over whole environment sequences. Ctrl-C waits for the
                # update to end, so that what is saved is always a whole update.
                with defer_interrupt():
                    envs_per_batch = N // cfg.num_minibatches
                    clipfracs, approx_kls = [], []
                    for epoch in range(cfg.update_epochs):
                        env_order = torch.randperm(N, device=device)
                        for start in range(0, N, envs_per_batch):
                            mb = batch.environments(env_order[start : start + envs_per_batch])
                            out = agent(mb.obs, mb.initial_state, mb.dones)
                            dist = Categorical(logits=out.logits, validate_args=False)
                            newlogprob = dist.log_prob(mb.actions)
                            pg_loss, approx_kl, clipfrac = policy_loss(
                                newlogprob.flatten(), mb.logprobs.flatten(), mb.advantages.flatten(), cfg.clip_coef, normalize=cfg.norm_adv
                            )
                            v_loss = sum(
                                value_loss(out.values[..., v].flatten(), mb.values[..., v].flatten(), mb.returns[..., v].flatten(),
                                           cfg.clip_coef if cfg.clip_vloss else None)
                                for v in range(num_values)
                            )
                            entropy_loss = entropy_bonus(out.logits)
                            loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss

                            optimizer.zero_grad()
                            fabric.backward(loss)
                            fabric.clip_gradients(agent, optimizer, max_norm=cfg.max_grad_norm)
                            optimizer.step()
                            clipfracs.append(float(clipfrac))
                            approx_kls.append(float(approx_kl))
                        if cfg.target_kl is not None and approx_kls[-1] > cfg.target_kl:
                            break

                    finished_returns.extend(iteration_returns)
                    sps = (global_step - start_step) / max(time.time() - start_time, 1e-9)
                    if cfg.log_every and iteration % cfg.log_every == 0:
                        metrics = {
                            "charts/learning_rate": optimizer.param_groups[0]["lr"],
                            "charts/SPS": sps,
                            "losses/value_loss": float(v_loss.detach()),
                            "losses/policy_loss": float(pg_loss.detach()),
                            "losses/entropy": float(entropy_loss.detach()),
                            "losses/approx_kl": float(np.mean(approx_kls)),
                            "losses/clipfrac": float(np.mean(clipfracs)),
                            "losses/explained_variance": explained_variance(batch.values[..., 0].flatten(), batch.returns[..., 0].flatten()),
                            "rewards/env": float(game_rewards.mean()),
                            **hook_logs,
                        }
                        if iteration_returns:
                            metrics["charts/episodic_return"] = float(np.mean(iteration_returns))
                            metrics["charts/episodic_length"] = float(np.mean(iteration_lengths))
                        fabric.log_dict(metrics, step=global_step)
                    completed, completed_step, completed_rng = iteration, global_step, rng_state()
                if cfg.checkpoint_every and iteration % cfg.checkpoint_every == 0:
                    save(iteration, global_step, completed_rng)
                    saved_through = iteration
                if iteration_returns:
                    mean_return = float(np.mean(iteration_returns))
                    best_return, stale = (mean_return, 0) if mean_return > best_return else (best_return, stale + 1)
                if (cfg.early_stop_patience and stale >= cfg.early_stop_patience) or (
                        cfg.max_train_seconds and time.time() - start_time >= cfg.max_train_seconds):
                    stopped_early = iteration < cfg.num_iterations
                    break
        except KeyboardInterrupt:
            if completed > saved_through:
                save(completed, completed_step, completed_rng)
            if checkpoint_path.exists():
                fabric.print(f"interrupted: {checkpoint_path} holds the update of step {load_checkpoint(checkpoint_path)['global_step']}; "
                             "resume continues from it")
            raise

        path = save(completed, completed_step, completed_rng)
        for lg in fabric.loggers:
            lg.finalize("success")
        sps = (global_step - start_step) / max(time.time() - start_time, 1e-9)
        if stopped:
            fabric.print(f"stopped at step {global_step}: the run's budget is spent; the update of step {completed_step} is saved")
        return TrainResult(completed_step, completed, finished_returns, sps, path, module, stopped_early or stopped)
    finally:
        close_envs(envs)


@contextlib.contextmanager
def defer_interrupt():
    """Hold back Ctrl-C (SIGINT) until the block ends, then raise it: an update interrupted
    half-way would leave weights that belong to no step. Outside the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def num_envs_text(cfg: PPOConfig, envs: gym.vector.VectorEnv | None = None) -> str:
    kind = "Ray actors" if type(envs).__name__ == "RayVectorEnv" else cfg.vector_env
    return f"{cfg.num_envs} envs ({kind}) × {cfg.num_steps} steps"


def check_agent(agent: nn.Module, num_actions: int, num_values: int, env_id: str) -> None:
    """The actor-critic must act over the env's actions and have the value heads the rewards need."""
    if getattr(agent, "num_actions", None) != num_actions:
        raise UserError(f"env {env_id!r} has {num_actions} actions but the policy has {getattr(agent, 'num_actions', '?')}; use a policy trained with this game's key map")
    if getattr(agent, "num_values", None) != num_values:
        raise UserError(f"the rewards need {num_values} value head(s) but the actor-critic has {getattr(agent, 'num_values', '?')}")
    if not any(p.requires_grad for p in agent.parameters()):
        raise UserError("the agent has nothing to train (the random baseline is run, not trained)")
