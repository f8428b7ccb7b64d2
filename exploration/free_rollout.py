"""Free-running rollouts: every game instance steps again as soon as it answers, not in lockstep.

In the tester loop a whole OOI test (about 100 game steps, a detector and a test-policy pass
each) is one explorer step. `collect_rollout` steps the instances together, so while one runs
its test the others have answered their one step long ago and wait, and so do their cores.
`collect_rollout_free` talks to `AsyncVectorEnv`'s workers one by one instead: whichever
instances have answered get their next action at once (one batched decision for those that
answered together), and the others keep playing meanwhile. Each instance still plays `num_steps`
consecutive steps of the rollout, so every column of the rollout is the sequence it would be
in lockstep; the instances only meet again at the rollout's end, for the update.

The reward hook sees the rollout afterwards, step by step in time order, as `collect_rollout`
shows it (the hook only records during the rollout; its rewards are computed at the end); the
`stop` callback sees each answer as it arrives, in a vector env's `infos` with the latest info
of every instance. With a policy that samples, the run differs from a lockstep one (the random
numbers are drawn in another order), as a run with several instances always differed from
another with the same seed (which instance claims an OOI first depends on timing).

While the rollout is collected the explorer decides on one torch thread: its decisions now
overlap the games' test passes, and two OpenMP threads that wait on each other while a game
worker holds one of the cores lose to one (the update, when every game waits, gets them all back).

Only for several instances in worker processes (`free_running`): `AsyncVectorEnv`'s, or Ray's
actors (`ray_env.RayWorkers`, the same protocol over remote calls); a single instance or a
`SyncVectorEnv` keeps `collect_rollout`. `PPOConfig.lockstep` forces it back.
"""

from __future__ import annotations

from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any, Callable

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

if TYPE_CHECKING:
    from playtester.exploration.hook import RewardHook
    from playtester.exploration.rollout import Episodes, Games, Rollout
    from playtester.exploration.ppo_config import PPOConfig

IDLE_KEY = "tester_idle"
"""An instance whose info says so has nothing left to record (the tester loop past its episode
budget, `TesterEnv`): it steps only when another instance has answered, as often as it would in
lockstep, instead of spending a decision a few milliseconds and hurrying the rollout to its end."""

FINAL_KEYS = ("final_obs", "final_info")
"""What a worker adds to the info of a step that ended an episode (`AutoresetMode.SAME_STEP`)."""


def free_running(cfg: "PPOConfig", envs: gym.vector.VectorEnv) -> bool:
    """Whether `train` collects its rollouts with `collect_rollout_free`: several instances in
    `AsyncVectorEnv`'s workers, or in a vector env that hands out its own (`RayVectorEnv.workers`)."""
    return not cfg.lockstep and cfg.num_envs > 1 and (isinstance(envs, gym.vector.AsyncVectorEnv) or hasattr(envs, "workers"))


class Answer:
    """One instance's answer to one step: what the rollout and the hook keep of it."""

    __slots__ = ("obs", "reward", "terminated", "truncated", "info")

    def __init__(self, obs: np.ndarray, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> None:
        self.obs, self.reward, self.terminated, self.truncated, self.info = obs, reward, terminated, truncated, info

    @property
    def done(self) -> bool:
        return bool(self.terminated or self.truncated)

    @property
    def reached(self) -> np.ndarray:
        """The frame the step reached: the episode's last one where it ended."""
        return self.info["final_obs"] if self.done else self.obs


class Workers:
    """`AsyncVectorEnv`'s worker processes, stepped one at a time (its own protocol: a `step`
    command down the pipe, the answer back, the frame in shared memory)."""

    def __init__(self, envs: gym.vector.AsyncVectorEnv) -> None:
        if envs.closed or envs._state.value != "default":
            raise RuntimeError("free-running rollouts need an open AsyncVectorEnv with no call pending")
        self.envs = envs
        self.pending: set[int] = set()

    def send(self, index: int, action: int) -> None:
        self.envs.parent_pipes[index].send(("step", np.int64(action)))
        self.pending.add(index)

    def answers(self) -> list[tuple[int, Answer]]:
        """Wait until at least one pending instance answers; every answer that is in."""
        pipes = {self.envs.parent_pipes[i]: i for i in self.pending}
        out = []
        for pipe in wait(list(pipes)):
            i = pipes[pipe]
            result, success = pipe.recv()
            self.pending.discard(i)
            if not success:  # the worker put its exception on the error queue: raise it here
                self.drain()
                self.envs._raise_if_errors([j != i for j in range(self.envs.num_envs)])
            obs, reward, terminated, truncated, info = result
            if self.envs.shared_memory:
                obs = self.envs.observations[i]
            out.append((i, Answer(np.array(obs), float(reward), bool(terminated), bool(truncated), info)))
        return out

    def drain(self) -> None:
        """Read the answers still on their way (a rollout cut short), so that the pipes are clean
        for the next call or for `close`."""
        for i in list(self.pending):
            pipe = self.envs.parent_pipes[i]
            if pipe is not None and not pipe.closed and pipe.poll(10.0):
                pipe.recv()
            self.pending.discard(i)


def vector_infos(envs: gym.vector.VectorEnv, infos: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-instance infos as a vector env's `infos` (each key with its `_key` mask)."""
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        out = envs._add_info(out, info, i)
    return out


def collect_rollout_free(
    cfg: "PPOConfig", envs: gym.vector.AsyncVectorEnv, agent: nn.Module, module: nn.Module, rollout: "Rollout",
    games: "Games", reward_hook: "RewardHook | None", stop: Callable[[dict[str, Any]], bool] | None,
) -> "Episodes":
    """`collect_rollout`'s contract (see the module doc): `num_steps` steps of every instance
    into `rollout`, each instance stepping as soon as it has answered."""
    from playtester.exploration.rollout import Episodes

    device, N, T = rollout.device, cfg.num_envs, cfg.num_steps
    rollout.initial_state = games.next_state.clone()
    workers = envs.workers() if hasattr(envs, "workers") else Workers(envs)
    t = np.zeros(N, dtype=np.int64)  # each instance's next step in the rollout
    taken_on: list[list[np.ndarray | None]] = [[None] * N for _ in range(T)]
    answers: list[list[Answer | None]] = [[None] * N for _ in range(T)]
    logits_seen: torch.Tensor | None = None
    latest: list[dict[str, Any]] = [{} for _ in range(N)]
    returns: list[float] = []
    lengths: list[int] = []
    ready = list(range(N))
    parked: list[int] = []  # idle instances waiting for an answer from one at work
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the cores are the games' now: see the module doc
    try:
        while ready or workers.pending or parked:
            if not ready and not workers.pending:  # only idle instances left to step
                ready, parked = parked, []
            if ready:
                steps, rows, logits = act(cfg, agent, module, rollout, games, workers, ready, t, taken_on)
                if logits_seen is None:
                    logits_seen = torch.zeros((T, N, logits.shape[-1]), device=device)
                logits_seen[steps, rows] = logits
                ready = []
            for i, answer in workers.answers():
                step = int(t[i])
                answers[step][i] = answer
                latest[i] = answer.info
                games.global_step += 1
                record(cfg, agent, module, rollout, games, i, step, answer)
                if answer.done:
                    end_episode(games, i, returns, lengths)
                if stop is not None:
                    fresh = [info if j == i else {k: v for k, v in info.items() if k not in FINAL_KEYS}
                             for j, info in enumerate(latest)]
                    if stop(vector_infos(envs, fresh)):
                        return Episodes(returns, lengths, stopped=True)
                t[i] += 1
                games.next_obs[i] = answer.obs
                if t[i] < T:
                    (parked if answer.info.get(IDLE_KEY) else ready).append(i)
                if not answer.info.get(IDLE_KEY) or not workers.pending:
                    ready += parked  # an answer from an instance at work: the idle ones step once
                    parked = []
    finally:
        torch.set_num_threads(threads)
        workers.drain()
    if reward_hook is not None:
        show_hook(reward_hook, envs, module, rollout, taken_on, answers, logits_seen)
    return Episodes(returns, lengths)


def end_episode(games: "Games", i: int, returns: list[float], lengths: list[int]) -> None:
    """Instance `i`'s episode ended: its return and length join the rollout's, its counts start anew."""
    returns.append(float(games.episode_return[i]))
    lengths.append(int(games.episode_length[i]))
    games.episode_return[i] = 0.0
    games.episode_length[i] = 0


def act(cfg: "PPOConfig", agent: nn.Module, module: nn.Module, rollout: "Rollout", games: "Games", workers: Any,
        ready: list[int], t: np.ndarray, taken_on: list[list[np.ndarray | None]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decision for the instances in `ready` (batched), their actions sent; the decision's
    rollout steps and instances, and its logits."""
    device = rollout.device
    rows = torch.as_tensor(ready, device=device)
    steps = torch.as_tensor(t[ready], device=device)
    obs = games.next_obs[ready]
    with torch.no_grad():
        inputs = module.prepare(torch.as_tensor(obs, device=device))
        if rollout.obs is None:
            rollout.obs = torch.zeros((cfg.num_steps, cfg.num_envs, *inputs.shape[1:]), dtype=inputs.dtype, device=device)
        rollout.obs[steps, rows] = inputs
        done = games.next_done[rows]
        rollout.dones[steps, rows] = done
        state = games.next_state[rows]
        rollout.keep_state(steps, rows, state)
        out = agent(inputs.unsqueeze(0), state, done.unsqueeze(0))
        dist = Categorical(logits=out.logits[0], validate_args=False)
        action = dist.sample()
        rollout.logprobs[steps, rows] = dist.log_prob(action)
        rollout.values[steps, rows] = out.values[0]
        games.next_state[rows] = out.state
    rollout.actions[steps, rows] = action
    for j, i in enumerate(ready):
        taken_on[int(t[i])][i] = obs[j]
        workers.send(i, int(action[j]))
    return steps, rows, out.logits[0]


def record(cfg: "PPOConfig", agent: nn.Module, module: nn.Module, rollout: "Rollout", games: "Games", i: int, step: int,
           answer: Answer) -> None:
    """Instance `i`'s answer to its step `step`, into the rollout (`collect_rollout`'s bookkeeping for one instance)."""
    from playtester.exploration.rollout import bootstrap_time_limit

    rollout.game_rewards[step, i] = answer.reward
    rollout.rewards[step, i, 0] = cfg.env_reward_coef * answer.reward
    if answer.truncated and not answer.terminated:
        bootstrap_time_limit(cfg, agent, module, rollout, games, step, i, answer.reached)
    games.episode_return[i] += answer.reward
    games.episode_length[i] += 1
    games.next_done[i] = float(answer.done)


def show_hook(reward_hook: "RewardHook", envs: gym.vector.VectorEnv, module: nn.Module, rollout: "Rollout",
              taken_on: list[list[np.ndarray | None]], answers: list[list[Answer | None]], logits: torch.Tensor) -> None:
    """The rollout's steps to the hook in time order, each as `collect_rollout` shows one."""
    from playtester.exploration.hook import StepView

    remember = getattr(module, "remember", None)
    for step, row in enumerate(answers):
        obs = np.stack(taken_on[step])
        if remember is not None:  # the features of these frames are in the rollout already
            remember(torch.as_tensor(obs, device=rollout.device), rollout.obs[step])
        done = np.array([a.done for a in row])
        infos = vector_infos(envs, [a.info for a in row])
        reached = np.stack([a.reached for a in row])
        reward_hook.step(StepView(obs, logits[step], rollout.dones[step].bool().cpu(), reached, infos, done))
