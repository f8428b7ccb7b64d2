"""The vector of game instances PPO plays, each built by `make_env` (`capture/envs.py`), in worker
processes (`in_worker`) or as Ray actors, and closing them."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Sequence

import gymnasium as gym

from playtester.errors import UserError
from playtester.capture.envs import make_env

if TYPE_CHECKING:
    from playtester.exploration.ppo_config import PPOConfig


class Spaces(gym.Env):
    """Stands in for a game instance where only its spaces are read: `AsyncVectorEnv` builds one
    instance in the starting process to read them, and a run knows them from its probe."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space):
        self.observation_space, self.action_space = observation_space, action_space


def in_worker(env_fn: Callable[[], gym.Env], spaces: tuple[gym.Space, gym.Space] | None = None) -> gym.Env:
    """Build the env in an `AsyncVectorEnv` worker that dies with the process that started it:
    SIGKILL the run and the workers go too, and with them (their watchdogs) their games' engines.
    Ctrl-C is left to the starting process, which closes the workers.
    In the starting process itself (the vector env's first look at the spaces) `spaces` stand in
    for the instance where they are known; otherwise one is built and closed, and nothing changes,
    torch's thread count included."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        from playtester.capture.engine_guard import die_with_parent, leave_interrupts_to_parent

        die_with_parent()
        leave_interrupts_to_parent()
        return env_fn()
    if spaces is not None:
        return Spaces(*spaces)
    # The starting process builds one instance to read the spaces and closes it. What the instance
    # sets for its own networks (a worker's one torch thread: `tester_env`) must not stay with the
    # explorer: its update and RND's training run while every game waits, on all the cores.
    import torch

    threads = torch.get_num_threads()
    try:
        return env_fn()
    finally:
        torch.set_num_threads(threads)


def quiet_worker(*args) -> None:
    """gymnasium's own `AsyncVectorEnv` worker, except that a reply with nowhere to go ends it
    quietly: Ctrl-C reaches the run and its workers at once, and the run may hang up while a
    worker still answers its last command (it printed two BrokenPipeError tracebacks, which
    read as a crash). Any other error still reaches the run through gymnasium's error queue."""
    from gymnasium.vector.async_vector_env import _async_worker

    try:
        _async_worker(*args)
    except (BrokenPipeError, ConnectionResetError):
        pass


def close_envs(envs: gym.vector.VectorEnv, pending_timeout: float = 10.0) -> None:
    """Close a vector env whose workers may be gone already (Ctrl-C reaches the whole process
    group, workers included): their broken pipes are not an error, the processes are ended.

    A step still pending waits at most `pending_timeout` seconds, then the workers are ended:
    a Ctrl-C that lands while the run collects the workers' answers leaves some answers read
    and the rest not, and waiting for all of them again would wait for ever."""
    try:
        if isinstance(envs, gym.vector.AsyncVectorEnv):
            envs.close(timeout=pending_timeout)
        else:
            envs.close()
    except (BrokenPipeError, ConnectionError, EOFError):
        for process in getattr(envs, "processes", []):
            if process.is_alive():
                process.terminate()
            process.join(timeout=10)
        envs.closed = True


def worker_start(accelerator: str) -> str | None:
    """How the game workers start: forked (None, the platform's default), except on a GPU run,
    where they are spawned: CUDA set up in this process does not survive a fork, and each worker
    puts its tester's networks on the GPU itself. Spawned workers get their env factories pickled
    (`make_env`'s partials pickle)."""
    return "spawn" if accelerator in ("cuda", "gpu") else None


def make_vector_env(
    cfg: "PPOConfig", env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]] | None = None,
    spaces: tuple[gym.Space, gym.Space] | None = None,
) -> gym.vector.VectorEnv:
    """`num_envs` instances, reset in the same step they end (`final_obs` in `infos`); `env_fn`
    is one factory for all, or a list of one factory per instance; a `RayInstances` list runs
    them as Ray actors (`--cluster`, `exploration/ray_env.py`) whatever `cfg.vector_env` says.
    `spaces`, one instance's `(observation, action)` spaces where known: worker processes are
    started without an instance built here first to read them (`in_worker`)."""
    from playtester.exploration.ray_env import RayInstances, RayVectorEnv

    env_fn = env_fn or functools.partial(make_env, cfg.env_id, cfg.frames, states=True)
    env_fns = list(env_fn) if isinstance(env_fn, Sequence) else [env_fn] * cfg.num_envs
    if len(env_fns) != cfg.num_envs:
        raise ValueError(f"{len(env_fns)} env factories for num_envs={cfg.num_envs}")
    if isinstance(env_fn, RayInstances):
        envs: gym.vector.VectorEnv = RayVectorEnv(env_fns, link=env_fn.link)
    else:
        if cfg.vector_env == "async":
            env_fns = [functools.partial(in_worker, fn, spaces) for fn in env_fns]
            envs = gym.vector.AsyncVectorEnv(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
                                             context=worker_start(cfg.accelerator), worker=quiet_worker)
        else:
            envs = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        envs.close()
        raise UserError(f"env {cfg.env_id!r}: its actions are {envs.single_action_space}; PPO here needs a Discrete action space")
    return envs
