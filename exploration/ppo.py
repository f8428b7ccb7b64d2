"""Recurrent PPO on Lightning Fabric, as one readable loop: rollout → GAE → minibatch epochs.

The names are CleanRL's (`obs`, `actions`, `logprobs`, `rewards`, `dones`, `values`,
`b_advantages`, `pg_loss`, `v_loss`, `entropy_loss`), and so are the log keys (`charts/…`,
`losses/…`). Recurrent state is done the way `ppo_atari_lstm.py` does it: the state is reset by the
done mask inside the forward pass, the state at the start of each rollout is kept, and minibatches
are cut by environment so that every sequence stays whole. With `seq_len`, the state before every
step is kept as well and the update cuts each environment's rollout into sequences of `seq_len`
steps, each from its stored state (sb3-contrib's RecurrentPPO does the same), so that a minibatch
runs several sequences side by side.

Rewards come in two streams, each with its own value head and GAE (as in CleanRL's RND PPO):

- episodic (value head 0): the game's reward, plus what a `RewardHook` adds as episodic
  (the explorer's `α r^p`); bootstrapped through time-limit truncations;
- non-episodic (value head 1, only with a hook that has one): the explorer's `(1 − α) r^e`; its
  return runs on across episode ends, as RND's intrinsic return should.

The advantages of the two streams are added with weights `ext_coef` and `int_coef`.

`train` is the loop; its phases are `rollout.collect_rollout` (or, with several game processes,
`free_rollout.collect_rollout_free`, each game stepping as soon as it answers), the hook's rewards,
`compute_advantages`, `update` and `metrics` (all but the collection through `Updates`, which with
`overlap_update` runs a rollout's rewards, advantages and update in a thread while the next rollout
plays), and `RunControl` (`exploration/run_control.py`) does what happens around it (checkpoints, Ctrl-C, early stop).
Everything trained runs on one Fabric: the actor-critic, and the reward hook's own models (its
`setup(fabric)`); Fabric seeds the run, saves the checkpoints and restores them on resume.
With `acting="int8"` the frozen encoder runs in int8 for the whole run and the rollouts are
collected by an int8 copy of the actor-critic made anew before each one; the update trains the
fp32 network (`exploration/acting.py`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.distributions import Categorical

from playtester.errors import UserError
from playtester.exploration.acting import fp32_actor, int8_actor, int8_frozen_encoder
from playtester.exploration.background import BackgroundJob
from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig
from playtester.exploration.free_rollout import collect_rollout_free, free_running
from playtester.exploration.hook import RewardHook, ShapedRewards
from playtester.exploration.losses import compute_gae, entropy_bonus, explained_variance, policy_loss, value_loss
from playtester.exploration.ppo_config import PPOConfig
from playtester.exploration.run_control import RunControl, TrainResult, defer_interrupt, open_run, restore
from playtester.exploration.rollout import Episodes, Games, Rollout, collect_rollout
from playtester.exploration.vector_env import close_envs, make_vector_env


def make_fabric(cfg: PPOConfig) -> Any:
    """The run's Fabric, seeded, logging to TensorBoard in the run folder."""
    from lightning.fabric import Fabric
    from lightning.fabric.loggers import TensorBoardLogger

    logger = TensorBoardLogger(root_dir=str(Path(cfg.run_dir)), name="tensorboard", version="", default_hp_metric=False)
    fabric = Fabric(accelerator=cfg.accelerator, devices=1, loggers=logger)
    fabric.seed_everything(cfg.seed, verbose=False)
    torch.backends.cudnn.deterministic = cfg.torch_deterministic
    return fabric


class Trainee(NamedTuple):
    """What `train` trains, set up on its Fabric (`set_up`)."""

    agent: nn.Module
    """The actor-critic as Fabric wraps it."""
    module: nn.Module
    """The actor-critic itself."""
    optimizer: torch.optim.Optimizer
    spec: dict[str, Any]
    """What the checkpoint keeps to rebuild the actor-critic (`checkpoint_spec()`)."""
    num_values: int
    start_iteration: int
    global_step: int


def set_up(cfg: PPOConfig, fabric: Any, envs: gym.vector.VectorEnv, agent: nn.Module | None,
           reward_hook: RewardHook | None, resume_from: Path | None) -> Trainee:
    """The actor-critic (by default a `GRUActorCritic` shaped by `cfg`), its optimiser and the
    hook's own models on `fabric`, restored from the checkpoint `resume_from` if given."""
    num_values = 2 if reward_hook is not None and reward_hook.non_episodic else 1
    agent = make_agent(cfg, envs, agent, num_values)
    optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
    agent_spec = agent.checkpoint_spec()
    agent, optimizer = fabric.setup(agent, optimizer)
    module = agent.module if hasattr(agent, "module") else agent
    if reward_hook is not None and hasattr(reward_hook, "setup"):
        reward_hook.setup(fabric)
    start_iteration, global_step = restore(fabric, resume_from, agent, optimizer, reward_hook) if resume_from is not None else (1, 0)
    print_start(fabric, cfg, envs, agent, module, num_values, start_iteration)
    if resume_from is not None:
        fabric.print(f"resumed from {resume_from} at step {global_step}")
    return Trainee(agent, module, optimizer, agent_spec, num_values, start_iteration, global_step)


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
    states: Tensor | None = None
    """`T×N×…` recurrent state before each step's decision (kept where `seq_len` cuts the rollout)."""

    def environments(self, envs: Tensor) -> "RolloutBatch":
        """The minibatch holding whole sequences of the environments `envs`."""
        return RolloutBatch(*(x if x is None else x[envs] if name == "initial_state" else x[:, envs]
                              for name, x in zip(self._fields, self)))

    def sequences(self, seq_len: int) -> "RolloutBatch":
        """The rollout as `T / seq_len × N` sequences of `seq_len` steps side by side (`seq_len×…`),
        each starting from the state the rollout had at its first step; sequence `c·N + n` is
        environment n's c-th."""
        T, N = self.actions.shape[:2]
        if self.states is None:
            raise ValueError("sequences: the rollout kept no states (its config's seq_len cuts nothing)")
        cut = T // seq_len

        def split(x: Tensor) -> Tensor:  # T×N×… → seq_len×(cut·N)×…
            return x.reshape(cut, seq_len, N, *x.shape[2:]).transpose(0, 1).reshape(seq_len, cut * N, *x.shape[2:])

        starts = self.states[::seq_len].reshape(cut * N, *self.states.shape[2:])
        fields = {name: split(x) for name, x in zip(self._fields, self) if name not in ("initial_state", "states")}
        return RolloutBatch(**fields, initial_state=starts)


# -- training ----------------------------------------------------------------------------------
def train(
    cfg: PPOConfig,
    agent: nn.Module | None = None,
    reward_hook: RewardHook | None = None,
    env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]] | None = None,
    spaces: tuple[gym.Space, gym.Space] | None = None,
    stop: Callable[[dict[str, Any]], bool] | None = None,
) -> TrainResult:
    """Train `agent` (by default a `GRUActorCritic` shaped by `cfg`) with PPO; see the module doc.
    `spaces`: one instance's, known already (`Explorer.spaces`; `make_vector_env`). `stop(infos)`
    is asked after every step of the games with that step's infos; when it says so, training
    ends before `total_timesteps`: the rollout in progress is dropped (no update from it) and the
    last update is saved. Ctrl-C saves the last completed update too, so `resume` continues from it.
    """
    checkpoint_path, resuming = open_run(cfg)
    fabric = make_fabric(cfg)
    envs = make_vector_env(cfg, env_fn, spaces)
    try:
        trainee = set_up(cfg, fabric, envs, agent, reward_hook, checkpoint_path if resuming else None)
        agent, module, optimizer, num_values = trainee.agent, trainee.module, trainee.optimizer, trainee.num_values
        start_iteration, global_step = trainee.start_iteration, trainee.global_step

        # With `overlap_update` the rewards, advantages and update of one rollout run while the next
        # is collected into the other of two buffers; each rollout then plays with the weights from
        # before the update running beside it (one update behind, as asynchronous PPO does).
        rollouts = [Rollout(cfg, num_values, fabric.device) for _ in range(2 if cfg.overlap_update else 1)]
        collect = collect_rollout_free if free_running(cfg, envs) else collect_rollout
        games = Games(cfg, envs, module, start_iteration, global_step, fabric.device)
        run = RunControl(cfg, fabric, checkpoint_path, trainee.spec, module, optimizer, reward_hook, start_iteration, global_step)
        updates = Updates(cfg, fabric, agent, optimizer, run)
        if cfg.acting == "int8":
            int8_frozen_encoder(module)  # once for the run: exploration/acting.py
        actor = acting_copy(cfg, agent, module)
        with run.saving_on_interrupt(), updates.settled(games):
            for iteration in range(start_iteration, cfg.num_iterations + 1):
                rollout = rollouts[iteration % len(rollouts)]

                # 1. Rollout. What follows (the hook's rewards for the whole of it; advantages, GAE
                # per stream; minibatch epochs: `Updates.work`) starts from what it left here, then
                # the log, the checkpoint and early stop (`Updates.finish`).
                episodes = collect(cfg, envs, actor, module, rollout, games, reward_hook, stop)
                if episodes.stopped:  # by `stop`: the rollout in progress is dropped
                    run.stopped = True
                    break
                done = Pending(iteration, games.global_step, rollout, actor, rollout_rewards(reward_hook),
                               RolloutEnd.of(games, module, rollout.device), episodes)
                if cfg.overlap_update:
                    if updates.finish(games.global_step):  # the update that ran beside this rollout
                        break
                    actor = acting_copy(cfg, agent, module)  # plays the next rollout while `done` trains
                    updates.start(done)
                else:
                    updates.start(done)
                    if updates.finish(games.global_step):
                        break
                    actor = acting_copy(cfg, agent, module)
        return run.finish(games.global_step)
    finally:
        close_envs(envs)


class UpdateStats(NamedTuple):
    """What one update logs: the last minibatch's losses and every minibatch's KL and clip fraction."""

    pg_loss: Tensor
    v_loss: Tensor
    entropy_loss: Tensor
    approx_kls: list[float]
    clipfracs: list[float]


class RolloutEnd(NamedTuple):
    """Where the games stood when a rollout ended (taken before the next rollout moves them): what
    its advantages bootstrap from."""

    next_input: Tensor
    """The next observations, prepared (`N×…`)."""
    next_state: Tensor
    next_done: Tensor

    @classmethod
    def of(cls, games: Games, module: nn.Module, device: torch.device) -> "RolloutEnd":
        with torch.no_grad():  # prepared here, where the encoder's last features are kept
            next_input = module.prepare(torch.as_tensor(games.next_obs, device=device))
        return cls(next_input, games.next_state.clone(), games.next_done.clone())


class Pending(NamedTuple):
    """A collected rollout on its way through the update, with what its rewards, advantages and
    log need."""

    iteration: int
    global_step: int
    """The games' steps when the rollout ended."""
    rollout: Rollout
    actor: nn.Module
    """The network that played it (its values and the games' next values come from it)."""
    rewards: Callable[[], ShapedRewards] | None
    """The reward hook's work for the rollout (`rollout_rewards`), or None without a hook."""
    end: RolloutEnd
    episodes: Episodes


class Updated(NamedTuple):
    """What `Updates.work` made of a rollout: its batch, the update's figures and the hook's scalars."""

    batch: RolloutBatch
    stats: UpdateStats
    hook_logs: dict[str, float]


class Updates:
    """What follows each rollout's collection: the hook's rewards, the advantages and PPO's update
    (`work`), then the log, the run's last completed update, the checkpoint and early stop.

    `start` does the work here and now, or, with `cfg.overlap_update`, in a `BackgroundJob`
    (`ppo-update`) while the games play the next rollout; `finish` waits for it and does the rest.
    One update at a time. Each update draws its minibatches from a generator seeded by the run's
    seed and the iteration, so that which thread draws first never changes a run, and a resumed run
    draws what the uninterrupted one would have.
    """

    def __init__(self, cfg: PPOConfig, fabric: Any, agent: nn.Module, optimizer: torch.optim.Optimizer, run: "RunControl"):
        self.cfg, self.fabric, self.agent, self.optimizer, self.run = cfg, fabric, agent, optimizer, run
        self.pending: Pending | None = None
        self.job = BackgroundJob("ppo-update")
        self.outcome: Updated | None = None

    def work(self, done: Pending, generator: torch.Generator) -> Updated:
        """The rollout's rewards added to its streams, its advantages and the update."""
        hook_logs = add_hook_rewards(done.rollout, done.rewards)
        # GAE per stream (the non-episodic stream ignores episode ends); the games' next values come
        # from the network that played the rollout, as its values did.
        batch = compute_advantages(self.cfg, done.actor, done.rollout, done.end)
        stats = update(self.cfg, self.fabric, self.agent, self.optimizer, batch, generator)
        return Updated(batch, stats, hook_logs)

    def start(self, done: Pending) -> None:
        if self.pending is not None:
            raise RuntimeError("Updates.start: the last update is not finished")
        cfg = self.cfg
        if cfg.anneal_lr:
            self.optimizer.param_groups[0]["lr"] = (1.0 - (done.iteration - 1.0) / cfg.num_iterations) * cfg.learning_rate
        generator = torch.Generator().manual_seed((cfg.seed * 1_000_003 + done.iteration) % 2**63)
        self.pending = done
        if not cfg.overlap_update:
            with defer_interrupt():  # Ctrl-C waits for the update: what is saved is always a whole update
                self.outcome = self.work(done, generator)
            return
        self.job.start(self.work, done, generator)

    def finish(self, global_step: int) -> bool:
        """Wait for the update started last (nothing to do if none), log it, make it the run's last
        completed update and save it every `checkpoint_every`; whether the run stops here (early
        stop or the time limit). `global_step`: the games' steps now, for the speed."""
        done = self.pending
        if done is None:
            return False
        self.pending = None
        outcome, self.outcome = (self.job.wait() if self.job.running else self.outcome), None
        cfg, run = self.cfg, self.run
        with defer_interrupt():
            if cfg.log_every and done.iteration % cfg.log_every == 0:
                logged = metrics(self.optimizer, run.sps(global_step), outcome.stats, outcome.batch, done.rollout,
                                 outcome.hook_logs, done.episodes)
                self.fabric.log_dict(logged, step=done.global_step)
            run.update_done(done.iteration, done.global_step, done.episodes.returns)
        run.checkpoint(done.iteration)
        return run.should_stop(done.iteration, done.episodes.returns)

    @contextlib.contextmanager
    def settled(self, games: Games):
        """However the loop ends (its last iteration, `stop`, Ctrl-C, an error), the update still
        running is finished first: the run's save then holds it, and never weights half-updated."""
        try:
            yield
        finally:
            self.finish(games.global_step)


def acting_copy(cfg: PPOConfig, agent: nn.Module, module: nn.Module) -> nn.Module:
    """The network that plays the next rollout: an int8 copy (`acting="int8"`), an fp32 copy where
    the update runs beside the rollout (`overlap_update`), else the very network PPO trains. Made
    anew before every rollout, from the weights as they stand (exploration/acting.py)."""
    if cfg.acting == "int8":
        return int8_actor(module)
    return fp32_actor(module) if cfg.overlap_update else agent


def rollout_rewards(reward_hook: RewardHook | None) -> Callable[[], ShapedRewards] | None:
    """The hook's rewards for the rollout just recorded, as work for the update's thread: its
    `hand_off()` where it has one, else its `end_rollout()` called here and now."""
    if reward_hook is None:
        return None
    hand_off = getattr(reward_hook, "hand_off", None)
    if hand_off is not None:
        return hand_off()
    shaped = reward_hook.end_rollout()
    return lambda: shaped


def add_hook_rewards(rollout: Rollout, rewards: Callable[[], ShapedRewards] | None) -> dict[str, float]:
    """Add the hook's rewards for the rollout (`rollout_rewards`' work, done now; the hook trains
    its own models then) to its streams; the hook's scalars to log."""
    if rewards is None:
        return {}
    shaped = rewards()
    rollout.rewards[:, :, 0] += shaped.episodic.to(rollout.device)
    if rollout.num_values == 2:
        rollout.rewards[:, :, 1] = shaped.non_episodic.to(rollout.device)
    return shaped.logs


def compute_advantages(cfg: PPOConfig, agent: nn.Module, rollout: Rollout, end: RolloutEnd) -> RolloutBatch:
    """GAE per stream, bootstrapped from the games' next values (where they stood at the rollout's
    `end`); the streams' advantages are added with weights `ext_coef` and `int_coef`."""
    num_values = rollout.num_values
    gammas = [cfg.gamma, cfg.int_gamma][:num_values]
    adv_coefs = [cfg.ext_coef, cfg.int_coef][:num_values]
    dones, next_done = rollout.dones, end.next_done
    with torch.no_grad():
        next_value = agent(end.next_input.unsqueeze(0), end.next_state, next_done.unsqueeze(0)).values[0]
        advantages = torch.zeros((cfg.num_steps, cfg.num_envs), device=rollout.device)
        returns = torch.zeros_like(rollout.values)
        for v in range(num_values):
            episodic = v == 0
            adv_v, returns[:, :, v] = compute_gae(
                rollout.rewards[:, :, v], rollout.values[:, :, v],
                dones if episodic else torch.zeros_like(dones),
                next_value[:, v], next_done if episodic else torch.zeros_like(next_done),
                gammas[v], cfg.gae_lambda,
            )
            advantages += adv_coefs[v] * adv_v
    return RolloutBatch(rollout.obs, rollout.actions, rollout.logprobs, dones, rollout.values, advantages, returns,
                        rollout.initial_state, rollout.states)


def update(cfg: PPOConfig, fabric: Any, agent: nn.Module, optimizer: torch.optim.Optimizer, batch: RolloutBatch,
           generator: torch.Generator | None = None) -> UpdateStats:
    """PPO's epochs over minibatches of whole environment sequences, or of the rollout cut into
    sequences of `cfg.seq_len` steps (stopped early past `target_kl`); the minibatches are drawn
    from `generator` (torch's global one by default)."""
    if batch.states is not None and 0 < cfg.seq_len < batch.actions.shape[0]:
        batch = batch.sequences(cfg.seq_len)
    N = batch.actions.shape[1]
    num_values = batch.values.shape[-1]
    envs_per_batch = N // cfg.num_minibatches
    clipfracs, approx_kls = [], []
    for epoch in range(cfg.update_epochs):
        env_order = torch.randperm(N, generator=generator).to(batch.actions.device)
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
    return UpdateStats(pg_loss, v_loss, entropy_loss, approx_kls, clipfracs)


def metrics(
    optimizer: torch.optim.Optimizer, sps: float, stats: UpdateStats, batch: RolloutBatch, rollout: Rollout,
    hook_logs: dict[str, float], episodes: Episodes,
) -> dict[str, float]:
    """The scalars logged after an update, under CleanRL's names."""
    logged = {
        "charts/learning_rate": optimizer.param_groups[0]["lr"],
        "charts/SPS": sps,
        "losses/value_loss": float(stats.v_loss.detach()),
        "losses/policy_loss": float(stats.pg_loss.detach()),
        "losses/entropy": float(stats.entropy_loss.detach()),
        "losses/approx_kl": float(np.mean(stats.approx_kls)),
        "losses/clipfrac": float(np.mean(stats.clipfracs)),
        "losses/explained_variance": explained_variance(batch.values[..., 0].flatten(), batch.returns[..., 0].flatten()),
        "rewards/env": float(rollout.game_rewards.mean()),
        **hook_logs,
    }
    if episodes.returns:
        logged["charts/episodic_return"] = float(np.mean(episodes.returns))
        logged["charts/episodic_length"] = float(np.mean(episodes.lengths))
    return logged


# -- the agent ---------------------------------------------------------------------------------
def make_agent(cfg: PPOConfig, envs: gym.vector.VectorEnv, agent: nn.Module | None, num_values: int) -> nn.Module:
    """`agent`, or a `GRUActorCritic` shaped by `cfg` and the games; checked against both."""
    num_actions = int(envs.single_action_space.n)
    if agent is None:
        agent_cfg = GRUActorCriticConfig(
            obs_shape=envs.single_observation_space.shape, num_actions=num_actions, encoder=cfg.encoder,
            hidden_dim=cfg.hidden_dim, rnn_dim=cfg.rnn_dim, num_values=num_values,
        )
        agent = GRUActorCritic(agent_cfg)
    check_agent(agent, num_actions, num_values, cfg.env_id)
    return agent


def print_start(fabric: Any, cfg: PPOConfig, envs: gym.vector.VectorEnv, agent: nn.Module, module: nn.Module, num_values: int, start_iteration: int) -> None:
    trained = sum(p.numel() for p in agent.parameters() if p.requires_grad)
    total = sum(p.numel() for p in agent.parameters())
    trunk = "frozen encoder trunk, features stored in the rollout buffer" if getattr(module, "frozen_trunk", False) else "whole network trained"
    fabric.print(f"PPO on {cfg.env_id}: {num_envs_text(cfg, envs)}, {num_values} value head(s), "
                 f"{trained} of {total} parameters trained ({trunk}), iterations {start_iteration}..{cfg.num_iterations}")


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
