"""Free-running rollouts: each game process steps as soon as it answers, and the rollout is the
one lockstep collection would make."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from playtester.exploration.actor_critic import GRUActorCritic, GRUActorCriticConfig
from playtester.exploration.free_rollout import collect_rollout_free, free_running
from playtester.exploration.hook import StepView
from playtester.exploration.ppo import PPOConfig
from playtester.exploration.rollout import Games, Rollout, collect_rollout
from playtester.exploration.vector_env import close_envs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Walk(gym.Env):
    """Deterministic: a position on 0…9 that the action moves; the reward is the position. Instance
    `index` ends its episodes at its own length (a time limit), and with `wall` they end earlier
    (terminated) where the walk reaches the wall. `delay(index, t)` seconds are slept before step t
    answers; `log` gets a line `index t time` after each step."""

    def __init__(self, index: int, wall: bool = False, delay=None, log: str | None = None, fail_at: int | None = None,
                 idle: bool = False):
        self.observation_space = gym.spaces.Box(0.0, 9.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.index, self.wall, self.delay, self.log, self.fail_at, self.idle = index, wall, delay, log, fail_at, idle
        self.length = 5 + 2 * index
        self.steps = 0

    def _obs(self):
        return np.array([self.pos, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = float(self.index), 0
        return self._obs(), {"start": self.index, **({"tester_idle": True} if self.idle else {})}

    def step(self, action):
        if self.delay is not None:
            time.sleep(self.delay(self.index, self.steps))
        if self.fail_at is not None and self.steps == self.fail_at:
            raise RuntimeError(f"game {self.index} broke at step {self.steps}")
        self.steps += 1
        self.pos = float(np.clip(self.pos + (1 if action == 1 else -1), 0, 9))
        self.t += 1
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{self.index} {self.steps} {time.monotonic()}\n")
        terminated = self.wall and self.pos >= 8
        info = {"t": self.t, "tester_idle": True} if self.idle else {"t": self.t}
        return self._obs(), self.pos, terminated, self.t >= self.length, info


class Recorder:
    """A reward hook that keeps what it is shown."""

    non_episodic = False

    def __init__(self):
        self.views: list[StepView] = []

    def step(self, view: StepView) -> None:
        self.views.append(view)


def greedy_agent(num_actions: int = 2) -> GRUActorCritic:
    """A real recurrent actor-critic whose actor always picks the last action (logits 0 … 50), so
    that what it does not depend on the order in which random numbers are drawn."""
    torch.manual_seed(0)
    agent = GRUActorCritic(GRUActorCriticConfig(obs_shape=(2,), num_actions=num_actions, hidden_dim=8, rnn_dim=8))
    with torch.no_grad():
        agent.actor.weight.zero_()
        agent.actor.bias.copy_(torch.linspace(0, 50, num_actions))
    return agent


def collect(kind, make, n=3, steps=9, rollouts=2, stop=None, seq_len=0):
    cfg = PPOConfig(env_id="state:Walk", num_envs=n, num_steps=steps, num_minibatches=1, vector_env="async",
                    lockstep=kind == "lockstep", seq_len=seq_len)
    envs = gym.vector.AsyncVectorEnv([lambda i=i: make(i) for i in range(n)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent, hook = greedy_agent(), Recorder()
    try:
        games = Games(cfg, envs, agent, 1, 0, torch.device("cpu"))
        out = []
        for _ in range(rollouts):
            rollout = Rollout(cfg, 1, torch.device("cpu"))
            fn = collect_rollout_free if kind == "free" else collect_rollout
            assert free_running(cfg, envs) == (kind == "free")
            episodes = fn(cfg, envs, agent, agent, rollout, games, hook, stop)
            out.append((rollout, episodes))
            if episodes.stopped:
                break
        # the pipes are clean after the rollouts: a lockstep step still works
        envs.step(np.ones(n, dtype=np.int64))
        return out, hook, games
    finally:
        close_envs(envs)


def test_free_running_rollouts_equal_lockstep_ones(tmp_path):
    """Same policy, same games: the same rollout, column by column, and the hook shown the same
    steps in the same order, although the instances answer out of order (instance 0 sleeps on
    every other step, so the others run ahead)."""
    def make(i):
        return Walk(i, wall=True, delay=lambda index, t: 0.02 if index == 0 and t % 2 else 0.0)

    lock, lock_hook, lock_games = collect("lockstep", make)
    free, free_hook, free_games = collect("free", make)
    for (a, ea), (b, eb) in zip(lock, free):
        for name in ("obs", "actions", "logprobs", "rewards", "game_rewards", "dones", "values", "initial_state"):
            torch.testing.assert_close(getattr(b, name), getattr(a, name), msg=name)
        assert sorted(eb.returns) == sorted(ea.returns) and sorted(eb.lengths) == sorted(ea.lengths)
        assert not eb.stopped
    # both kinds of end are in there: time limits (5 steps; bootstrapped) and the wall (6 steps)
    assert {5, 6} <= {n for _, e in lock for n in e.lengths}
    assert len(lock_hook.views) == len(free_hook.views) == 18
    for u, v in zip(lock_hook.views, free_hook.views):
        np.testing.assert_array_equal(v.obs, u.obs)
        np.testing.assert_array_equal(v.next_obs, u.next_obs)
        np.testing.assert_array_equal(v.dones, u.dones)
        torch.testing.assert_close(v.logits, u.logits)
        torch.testing.assert_close(v.episode_start, u.episode_start)
        assert sorted(v.infos) == sorted(u.infos)
        np.testing.assert_array_equal(v.infos["t"], u.infos["t"])
    assert any(v.dones.any() for v in free_hook.views)
    torch.testing.assert_close(free_games.next_state, lock_games.next_state)
    torch.testing.assert_close(free_games.next_done, lock_games.next_done)
    np.testing.assert_array_equal(free_games.next_obs, lock_games.next_obs)
    assert free_games.global_step == lock_games.global_step == 2 * 3 * 9


@pytest.mark.parametrize("kind", ["lockstep", "free"])
def test_the_rollout_keeps_the_state_each_decision_started_from(kind):
    """With `seq_len` the rollout keeps the recurrent state before every step's decision: the state
    the network reaches replaying the rollout from its start, and the update's sequences of 3 steps,
    each from its kept state, give the whole rollout's logits (before any weight changes)."""
    from playtester.exploration.ppo import RolloutBatch

    def make(i):
        return Walk(i, wall=True, delay=lambda index, t: 0.02 if index == 0 and t % 2 else 0.0)

    out, _, _ = collect(kind, make, seq_len=3)
    agent = greedy_agent()
    torch.nn.init.normal_(agent.actor.weight)  # logits that depend on the state (its actions are already played)
    for rollout, _ in out:
        assert rollout.states.shape == (9, 3, 8)
        torch.testing.assert_close(rollout.states[0], rollout.initial_state)
        with torch.no_grad():
            state = rollout.initial_state
            for t in range(9):
                torch.testing.assert_close(rollout.states[t], state, msg=f"step {t}")
                state = agent(rollout.obs[t : t + 1], state, rollout.dones[t : t + 1]).state
            whole = agent(rollout.obs, rollout.initial_state, rollout.dones).logits  # 9×3×2
            zeros = torch.zeros(9, 3)
            batch = RolloutBatch(rollout.obs, rollout.actions, zeros, rollout.dones, rollout.values, zeros,
                                 rollout.values, rollout.initial_state, rollout.states)
            cut = batch.sequences(3)  # 3 steps × (3 sequences × 3 instances)
            pieces = agent(cut.obs, cut.initial_state, cut.dones).logits
        torch.testing.assert_close(pieces.view(3, 3, 3, 2).transpose(0, 1).reshape(9, 3, 2), whole)


def test_a_slow_game_does_not_hold_the_others_back(tmp_path):
    """Instance 0 takes 1.5 s over its first step (an OOI test, say): free-running, instance 1 plays
    its whole rollout meanwhile; in lockstep it waits at its second step."""
    def make(i, log):
        return Walk(i, delay=lambda index, t: 1.5 if index == 0 and t == 0 else 0.0, log=log)

    def finished(log):
        rows = [line.split() for line in open(log)]
        first_of_0 = min(float(r[2]) for r in rows if r[0] == "0")
        return [int(r[1]) for r in rows if r[0] == "1" and float(r[2]) < first_of_0]

    free_log, lock_log = str(tmp_path / "free.log"), str(tmp_path / "lock.log")
    collect("free", lambda i: make(i, free_log), n=2, steps=6, rollouts=1)
    collect("lockstep", lambda i: make(i, lock_log), n=2, steps=6, rollouts=1)
    assert finished(free_log) == [1, 2, 3, 4, 5, 6]
    assert finished(lock_log) == [1]


def test_an_idle_game_steps_only_as_often_as_the_others_answer(tmp_path):
    """An instance past its episode budget (`tester_idle`) has nothing to record: it is not stepped
    as fast as decisions come, which would only burn the explorer's core, but once for each answer
    of an instance at work, as in lockstep."""
    log = str(tmp_path / "idle.log")

    def make(i):
        return Walk(i, delay=lambda index, t: 0.05 if index == 0 else 0.0, log=log, idle=i == 1)

    out, _, _ = collect("free", make, n=2, steps=8, rollouts=1)
    assert not out[0][1].stopped
    rows = [line.split() for line in open(log)]
    order = [int(r[0]) for r in sorted(rows, key=lambda r: float(r[2]))]
    assert order.count(0) == order.count(1) == 9  # 8 in the rollout, then the lockstep step `collect` checks the pipes with
    for k in range(1, len(order) + 1):  # at any moment the idle one is at most one step ahead
        assert order[:k].count(1) <= order[:k].count(0) + 1, order


def test_stop_cuts_the_rollout_and_leaves_the_pipes_clean():
    """`stop` sees each answer with every instance's latest info; once it says so the rollout is
    dropped and the answers still on their way are read, so the vector env steps on and closes."""
    seen = []

    def stop(infos):
        seen.append(infos["t"].copy())
        return bool((infos["t"] >= 3).any())

    out, _, _ = collect("free", lambda i: Walk(i, delay=lambda index, t: 0.01 * index), stop=stop)
    (rollout, episodes), = out
    assert episodes.stopped
    assert seen[-1].max() == 3 and seen[0].shape == (3,)


def test_a_game_that_raises_is_reported_and_the_others_close():
    with pytest.raises(RuntimeError, match="game 1 broke at step 4"):
        collect("free", lambda i: Walk(i, fail_at=4 if i == 1 else None))


def test_only_several_game_processes_run_free():
    envs = gym.vector.SyncVectorEnv([lambda: Walk(0)] * 2)
    assert not free_running(PPOConfig(num_envs=2, num_minibatches=1), envs)
    envs.close()
