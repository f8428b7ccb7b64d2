"""Game instances as Ray actors: a Gymnasium `VectorEnv` for `--cluster` (issue 22).

`RayVectorEnv` holds one game per Ray actor (`GameWorker`), built by the same factories as the
`AsyncVectorEnv` workers of `make_vector_env`, spread over the cluster's nodes (Ray's `SPREAD`
scheduling). `step` steps them all at once: one remote call per instance, one `ray.get` for the
batch; `workers()` steps them one at a time, each as soon as it has answered (`RayWorkers`, what
`free_rollout.collect_rollout_free` plays with, as with `AsyncVectorEnv`'s workers). Episodes
reset in the step they end, as `AsyncVectorEnv(autoreset_mode=SAME_STEP)` does (`final_obs`,
`final_info` in `infos`), so PPO is unchanged: inference and learning stay on the driver, and only
actions go out and frames and infos come back (no weights to broadcast). What that costs is one
round trip a step of an instance; a whole OOI test of the tester loop is one step, one call.

A worker that dies (its actor killed, its node lost) does not end the run: its game starts again
in a new actor (on another node where its own is gone), and the step it died in ends that
instance's episode, truncated, with `info["worker_lost"]` (not a crash: a game that crashed says
`info["crashed"]` itself). After `MAX_LOSSES` losses in a row of the same instance the run stops
with one line.

An optional `link` carries what an instance writes besides its frames (the run folder's records,
`playtester/tester/cluster.py`): `link.setup(i)` is handed to a new actor, which calls `.open()` on it
before building its game; `link.send(i)` goes with every call and `link.receive(i, up)` takes
what `.collect()` returned after it; `link.lost(i, reason, node)`, where the link has it, hears of
each lost worker. Every info carries `node`, the Ray node the game ran on.

Ray is optional (the `cluster` extra): nothing here imports it until a `RayVectorEnv` is made.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from playtester.errors import UserError

RAY_MISSING = 'Ray is not installed; pip install -e ".[cluster]"'
MAX_LOSSES = 3
"""Workers of one instance lost in a row (the new one dying before its first reset too) before the run stops."""


def import_ray(option: str = "--cluster"):
    """The `ray` module, or the one-line `UserError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(f"{option}: {RAY_MISSING}") from None
    return ray


class RayInstances(list):
    """Game factories to run as Ray actors (what `make_vector_env` turns into a `RayVectorEnv`),
    with the driver's side of their `link` (or None)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], link: Any = None) -> None:
        super().__init__(env_fns)
        self.link = link


class GameWorker:
    """One game instance inside a Ray actor; see the module doc."""

    def __init__(self, env_fn: Callable[[], gym.Env], side: Any = None, autoreset: bool = True) -> None:
        from playtester.capture.engine_guard import die_with_parent, leave_interrupts_to_parent

        # Like an AsyncVectorEnv worker: go with the process that started this one (Ray's raylet;
        # the engine watchdog of this process then ends its engines), leave Ctrl-C to the driver.
        die_with_parent()
        leave_interrupts_to_parent()
        self.node = node_id()
        self.autoreset = autoreset
        self.side = side.open() if side is not None else None
        self.env = env_fn()

    def spaces(self) -> tuple[gym.Space, gym.Space, dict[str, Any]]:
        return self.env.observation_space, self.env.action_space, dict(self.env.metadata)

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> str:
        """The Ray node this game plays on."""
        return self.node

    def _tag(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, "node": self.node}

    def _receive(self, down: Any) -> None:
        if self.side is not None and down is not None:
            self.side.receive(down)

    def _collect(self) -> Any:
        return self.side.collect() if self.side is not None else None

    def reset(self, seed: int | None, options: dict[str, Any] | None, down: Any = None):
        self._receive(down)
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._tag(info), self._collect()

    def step(self, action: Any, down: Any = None):
        """One step, and the reset in the same call when the episode ends (`final`: its last
        observation and info)."""
        self._receive(down)
        obs, reward, terminated, truncated, info = self.env.step(action)
        final = None
        if self.autoreset and (terminated or truncated):
            final = (obs, self._tag(info))
            obs, info = self.env.reset()
        return obs, float(reward), bool(terminated), bool(truncated), self._tag(info), final, self._collect()

    def close(self) -> Any:
        self.env.close()
        up = self._collect()
        if self.side is not None:
            self.side.close()
        return up


def node_id() -> str:
    """The Ray node this process runs on (the hostname outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    import socket

    return socket.gethostname()


class RayVectorEnv(gym.vector.VectorEnv):
    """`len(env_fns)` game instances, one Ray actor each, stepped together (see the module doc).
    Ray must be initialised already (`playtester.tester.cluster.ray_session`)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], link: Any = None, num_cpus: float = 1,
                 autoreset_mode: gym.vector.AutoresetMode = gym.vector.AutoresetMode.SAME_STEP) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            raise RuntimeError("RayVectorEnv: start Ray first (ray.init, or playtester.tester.cluster.ray_session)")
        self._ray = ray
        self.env_fns = list(env_fns)
        self.link = link
        self.num_envs = len(self.env_fns)
        self._worker = ray.remote(num_cpus=num_cpus, max_restarts=0, scheduling_strategy="SPREAD")(GameWorker)
        self.autoreset_mode = autoreset_mode
        """`SAME_STEP` (PPO's), or `DISABLED` (an evaluation that resets instances itself, `reset_mask`)."""
        self.actors = [self._start(i) for i in range(self.num_envs)]
        try:
            obs_space, act_space, metadata = self._get(self.actors[0].spaces.remote())
        except ray.exceptions.RayActorError as e:  # its game would not start there (a game file missing on that node, …)
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            self.close()
            raise UserError(f"game instance 0: its Ray worker could not start the game ({lines[-1] if lines else e})") from None
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = gym.vector.utils.batch_space(obs_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(act_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = None
        self.closed = False
        self._obs: list[Any] = [None] * self.num_envs
        self.losses = [0] * self.num_envs
        """Workers lost in a row, by instance (0 after a step that came back)."""
        self.lost = 0
        """Workers lost in the whole run."""
        self.nodes: list[str | None] = [None] * self.num_envs
        """The node each instance last answered from."""

    # -- actors -----------------------------------------------------------------------------
    def _start(self, i: int):
        side = self.link.setup(i) if self.link is not None else None
        return self._worker.remote(self.env_fns[i], side, self.autoreset_mode == gym.vector.AutoresetMode.SAME_STEP)

    def _down(self, i: int) -> Any:
        return self.link.send(i) if self.link is not None else None

    def _up(self, i: int, up: Any) -> None:
        if self.link is not None and up is not None:
            self.link.receive(i, up)

    def _get(self, refs):
        """`ray.get`, with a game's own one-line error (a `UserError` raised in an actor) kept as it is."""
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, UserError):
                raise e.cause from None
            raise

    def _gather(self, refs: list) -> list:
        """Every result of a batch of calls, one per actor; a lost worker's is its `RayActorError`."""
        try:
            return self._get(refs)
        except self._ray.exceptions.RayActorError:
            out = []
            for ref in refs:
                try:
                    out.append(self._get(ref))
                except self._ray.exceptions.RayActorError as e:
                    out.append(e)
            return out

    def _replace(self, i: int, error: BaseException) -> tuple[Any, dict[str, Any]]:
        """Instance `i`'s worker is gone: a new actor, its game reset; its first observation and info."""
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        while True:
            self.losses[i] += 1
            self.lost += 1
            if self.link is not None and hasattr(self.link, "lost"):
                self.link.lost(i, reason, self.nodes[i])
            if self.losses[i] > MAX_LOSSES:
                raise UserError(f"game instance {i}: its Ray worker was lost {MAX_LOSSES} times in a row (last: {reason}); "
                                "check the cluster's nodes (ray status), or run without --cluster")
            try:
                self._ray.kill(self.actors[i], no_restart=True)
            except Exception:  # gone already
                pass
            self.actors[i] = self._start(i)
            try:
                obs, info, up = self._get(self.actors[i].reset.remote(None, None, self._down(i)))
            except self._ray.exceptions.RayActorError as e:
                reason = str(e).strip().splitlines()[0]
                continue
            self._up(i, up)
            print(f"game instance {i}: its Ray worker was lost ({reason}); the episode ends there and the game goes on in a new worker")
            return obs, {**info, "worker_lost": reason}

    # -- the VectorEnv API ------------------------------------------------------------------
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        seeds = [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        chosen = [i for i in range(self.num_envs) if mask is None or mask[i]]
        refs = [self.actors[i].reset.remote(seeds[i], options or None, self._down(i)) for i in chosen]
        infos: dict[str, Any] = {}
        for i, result in zip(chosen, self._gather(refs)):
            if isinstance(result, BaseException):
                obs, info = self._replace(i, result)
            else:
                obs, info, up = result
                self._up(i, up)
            self._obs[i] = obs
            self.nodes[i] = info.get("node")
            infos = self._add_info(infos, info, i)
        return np.stack(self._obs), infos

    def step(self, actions):
        actions = np.asarray(actions)
        refs = [a.step.remote(actions[i].item() if actions[i].ndim == 0 else actions[i], self._down(i))
                for i, a in enumerate(self.actors)]
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, result in enumerate(self._gather(refs)):
            _, rewards[i], terminated[i], truncated[i], info = self.answer(i, result)
            final = {key: info.pop(key) for key in ("final_obs", "final_info") if key in info}
            if final:
                infos = self._add_info(infos, final, i)
            infos = self._add_info(infos, info, i)
        return np.stack(self._obs), rewards, terminated, truncated, infos

    def answer(self, i: int, result: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Instance `i`'s answer to one step call (`result`: what it returned, or the error its lost
        worker raised: then a new worker and the episode ended), as an `AsyncVectorEnv` worker's
        answer is: the reached episode's end in `info["final_obs"]`, `["final_info"]`."""
        if isinstance(result, BaseException):
            last = self._obs[i]
            obs, info = self._replace(i, result)
            self._obs[i] = obs
            return obs, 0.0, False, True, {**info, "final_obs": np.array(last), "final_info": {"worker_lost": info["worker_lost"]}}
        obs, reward, terminated, truncated, info, final, up = result
        self.losses[i] = 0
        self._up(i, up)
        self.nodes[i] = info.get("node")
        if final is not None:  # (Ray hands arrays back read-only)
            info = {**info, "final_obs": np.array(final[0]), "final_info": final[1]}
        self._obs[i] = obs
        return obs, reward, terminated, truncated, info

    def workers(self) -> "RayWorkers":
        """The actors, to step one at a time (`RayWorkers`)."""
        return RayWorkers(self)

    def worker_pids(self) -> list[int]:
        """The process id of each instance's actor (for tests that kill one)."""
        return self._get([a.pid.remote() for a in self.actors])

    def close_extras(self, **kwargs: Any) -> None:
        """Close every game (what they wrote last comes back first), then end the actors."""
        refs = [a.close.remote() for a in self.actors]
        for i, result in enumerate(self._gather(refs)):
            if not isinstance(result, BaseException):
                self._up(i, result)
        for a in self.actors:
            try:
                self._ray.kill(a, no_restart=True)
            except Exception:
                pass
        self.actors = []


class RayWorkers:
    """A `RayVectorEnv`'s actors stepped one at a time, as `free_rollout.Workers` steps
    `AsyncVectorEnv`'s: `send` a step's call, `answers` once at least one is in (every answer in
    by then), `drain` what is still on its way (its records still written: they come back with it)."""

    def __init__(self, envs: RayVectorEnv) -> None:
        self.envs = envs
        self.calls: dict[Any, int] = {}
        """A step's call on its way → its instance."""

    @property
    def pending(self) -> set[int]:
        return set(self.calls.values())

    def send(self, index: int, action: int) -> None:
        envs = self.envs
        self.calls[envs.actors[index].step.remote(int(action), envs._down(index))] = index

    def answers(self) -> list[tuple[int, Any]]:
        from playtester.exploration.free_rollout import Answer

        ray = self.envs._ray
        refs = list(self.calls)
        ready, rest = ray.wait(refs, num_returns=1)
        more = ray.wait(rest, num_returns=len(rest), timeout=0)[0] if rest else []
        out = []
        for ref in ready + more:
            i = self.calls.pop(ref)
            obs, reward, terminated, truncated, info = self.envs.answer(i, self.envs._gather([ref])[0])
            out.append((i, Answer(np.array(obs), float(reward), bool(terminated), bool(truncated), info)))
        return out

    def drain(self) -> None:
        for ref, i in list(self.calls.items()):
            result = self.envs._gather([ref])[0]
            if not isinstance(result, BaseException):
                self.envs._up(i, result[-1])
            self.calls.pop(ref)
