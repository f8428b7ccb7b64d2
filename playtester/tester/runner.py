"""A tester run: one `TesterEnv` per game instance, driven by the explorer.

`RunSpec` holds what a game instance needs to build its tester loop (paths and options only, so
that it pickles into `AsyncVectorEnv`'s worker processes); the drivers take the `Run` assembled
from it once (`assemble.py`: its checkpoints loaded, its game probed). Two drivers share it:

- `explore_with_ppo`: the PPO explorer, trained online while it plays (PPGTA's agent, `ppgta`,
  with E3B's episodic novelty `ppgta-episodic` or `episodic`, or the Inspector-style baseline,
  `inspector`), on `num_envs` game instances at once. Each
  instance is `make_game` → `TesterEnv` → the explorer's OD mask → resize; the tester loop sits
  under the explorer, so a whole OOI test is one explorer step. The run ends when every
  instance has played its share of the episode budget.
- `explore_at_random`: uniform random actions on one instance (the random baseline), no
  learning.

Both write to the same run folder in the same formats, so reports and benchmarks compare them.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import gymnasium as gym
import numpy as np

from playtester.tester.assemble import Run, RunInputs
from playtester.tester.instance import all_idle, run_stopped, tester_env, threads_of
from playtester.tester.spec import RunSpec

if TYPE_CHECKING:
    from playtester.tester.serving import ServedModels


def _wrap(spec: RunSpec, env: gym.Env, index: int, served: "ServedModels | None" = None, loaded: RunInputs | None = None,
          game_options: dict[str, Any] | None = None) -> gym.Env:
    return tester_env(spec, env, index, served, loaded, game_options)


def episodes_left(spec: RunSpec) -> int:
    """Episodes of the budget not yet started in the run folder."""
    from playtester.tester.runlog import read_jsonl

    played = {r["episode"] for r in read_jsonl(Path(spec.run_dir) / "trajectory.jsonl")}
    return max(0, spec.episodes - len(played))


def explore_at_random(run: Run, progress: Callable[[int], None] = lambda n: None,
                      say: Callable[[str], None] = print) -> None:
    """The random baseline on one game instance; `progress(n)` after each episode. A crashed
    game is started again (`TesterEnv`) until `max_restarts` is spent; then the run ends here,
    and says why (the crash itself is said from crashes.jsonl, as for every run)."""
    from playtester.capture.envs import make_env
    from playtester.tester.crashes import clear_stop

    spec = run.spec
    clear_stop(Path(spec.run_dir))
    env = make_env(spec.game, game_options=run.game_options, wrap=functools.partial(
        tester_env, spec, loaded=run.here(), game_options=run.game_options))
    rng = np.random.default_rng(spec.seed + 1 + env.local_episode)
    first = env.episode + env.n_envs
    try:
        while True:
            env.reset()
            if env.stopped is not None:
                say(f"the run stops: {env.stopped}")
                return
            if env.idle:
                return
            for _ in range(spec.steps):
                _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
                if terminated or truncated:
                    break
            progress(env.episode + 1 - first)
    finally:
        env.close()


def explore_with_ppo(run: Run, progress: Callable[[int], None] = lambda n: None, resume: bool = False,
                     cluster: bool = False, objective: Callable[[Run, Any], Any] | None = None):
    """Train the PPO explorer online while it plays the run's episodes; see the module doc. With
    `cluster`, the game instances run as Ray actors (Ray started already; `playtester/tester/cluster.py`).
    `objective` changes the explorer before it trains (a load test's adds RELINE's reward:
    `playtester.load.objective.load_objective`)."""
    import functools

    import torch

    from playtester.cores import cores
    from playtester.exploration.checkpoints import load_checkpoint
    from playtester.exploration.run_control import CHECKPOINT_NAME
    from playtester.tester.serving import ModelServer, serving

    from playtester.tester.crashes import clear_stop

    spec = run.spec
    clear_stop(Path(spec.run_dir))
    # The trainer's share of the cores (on a cluster the games play elsewhere: all of them)
    torch.set_num_threads(cores() if cluster else threads_of(spec).trainer)
    explorer_dir = Path(spec.run_dir) / "explorer"
    checkpoint = explorer_dir / "checkpoints" / CHECKPOINT_NAME
    resume_ppo = resume and checkpoint.exists()
    saved = load_checkpoint(checkpoint) if resume_ppo else None
    trained = saved["global_step"] if saved else 0
    per_env = math.ceil(episodes_left(spec) / spec.num_envs)
    # An upper bound: a test takes many game steps but counts as one explorer step; `all_idle` ends the run.
    budget = trained + spec.num_envs * (per_env * spec.steps + 2 * spec.rollout)
    if saved:  # a resumed PPO run may not shrink its budget (its learning-rate schedule hangs on it)
        budget = max(budget, int(saved["config"]["total_timesteps"]))
    server = None  # on a cluster each Ray instance loads its own models (`serve` is refused there by `run`)
    if serving(spec) and not cluster:
        server = ModelServer(spec.tester, None if spec.oracle_labels else spec.detector, spec.device, threads_of(spec).server,
                             int8=spec.acting == "int8")
    wrap: Callable[[gym.Env, int], gym.Env] = functools.partial(_wrap, spec, served=server and server.models,
                                                                loaded=run.here(), game_options=run.game_options)
    if cluster:
        from playtester.tester.cluster import tester_on_worker

        wrap = tester_on_worker  # in an actor: the tester loop on its scratch copy of the run folder
    try:
        return _train_explorer(run, wrap, budget, resume_ppo, cluster, explorer_dir, progress, objective)
    finally:
        if server is not None:
            write_serving_stats(Path(spec.run_dir) / "serving.json", server)
            server.close()


def write_serving_stats(path: Path, server) -> None:
    """What the model server answered, in how many batches and seconds, per network (for the
    run's reader and the benchmarks: the mean batch is requests / batches)."""
    import json

    from playtester.files import write_text_atomic

    try:
        stats = server.stats()
    except (OSError, EOFError):  # the server is gone already: nothing to say
        return
    write_text_atomic(path, json.dumps(stats, indent=1))


def _train_explorer(run: Run, wrap: Callable[[gym.Env, int], gym.Env], budget: int, resume_ppo: bool, cluster: bool,
                    explorer_dir: Path, progress: Callable[[int], None], objective: Callable[[Run, Any], Any] | None):
    from playtester.exploration.explorer import build_explorer
    from playtester.exploration.ppo import train

    spec = run.spec
    explorer = build_explorer(
        spec.game, spec.preference, spec.explorer, run_dir=str(explorer_dir), total_timesteps=budget,
        num_envs=spec.num_envs, num_steps=spec.rollout, seed=spec.seed, checkpoint_every=5, resume=resume_ppo,
        game_options=run.game_options, wrap=wrap, accelerator=spec.device, preference=run.inputs.preference,
        probe=run.game, rnd_weight=spec.rnd_weight, episodic_weight=spec.episodic_weight, novelty_scale=spec.novelty_scale,
        episodic_memory=spec.episodic_memory,
    )
    if cluster:  # the same instances, each in a Ray actor; this process alone writes the run folder
        from playtester.tester.cluster import ray_instances

        explorer = explorer._replace(env_fn=ray_instances(spec, explorer.env_fn))
    if objective is not None:
        explorer = objective(run, explorer)

    ended = 0

    def stop(infos: dict[str, Any]) -> bool:
        nonlocal ended
        if "_final_obs" in infos and infos["_final_obs"].any():
            ended += int(np.sum(infos["_final_obs"]))  # idle instances' ends too: the bar is capped at the budget
            progress(ended)
        return all_idle(infos) or run_stopped(infos)

    return train(*explorer, stop=stop)
