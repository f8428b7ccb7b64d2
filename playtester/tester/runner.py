"""A tester run: one `TesterEnv` per game instance, driven by the explorer.

`RunSpec` holds what a game instance needs to build its tester loop (paths and options only, so
that it pickles into `AsyncVectorEnv`'s worker processes). Two drivers share it:

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

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.tester.spec import RunSpec, load_known_oois
from playtester.tester.loop import TesterConfig, TesterEnv

if TYPE_CHECKING:
    from playtester.tester.serving import ServedModels


def make_detector(spec: RunSpec, layout: Any, served: "ServedModels | None" = None):
    """What finds the OOIs in the tester loop: a trained model whose detections are matched to
    the known OOIs (the park's, or `--oois`) by telemetry, or with `oracle_labels` the engine's
    labels; None without a test policy (nothing to test with). `layout`: the park's (`GameInfo.layout`), else None.
    `served`: the model runs in the run's model server (`playtester/tester/serving.py`)."""
    from playtester.tester.loop import GroundTruthDetector, ModelDetector

    if spec.tester is None:
        return None
    if spec.oracle_labels:
        if layout is None:
            raise UserError(f"--oracle-labels: {spec.game} has no engine labels to find objects with (only the built-in "
                            "park has); give --detector with a trained detector checkpoint")
        return GroundTruthDetector()
    from playtester.capture.games import level_objects
    from playtester.perception.detector import load_detector
    from playtester.tester.serving import ServedDetector

    from playtester.perception.calibration import read_thresholds

    model = ServedDetector(served) if served is not None else load_detector(spec.detector, map_location=spec.device)
    # the objects it can place by telemetry: the park's OOIs, --oois, or a Doom level's things of its classes
    known = layout.oois if layout else load_known_oois(spec.oois) if spec.oois else level_objects(spec.game, model.classes)
    return ModelDetector(model, known, thresholds=read_thresholds(spec.detector))


class RunThreads(NamedTuple):
    """Torch threads of a run's processes (`run_threads`)."""

    worker: int
    """A game instance's networks (detector, test policy)."""
    trainer: int
    """The explorer's process: its decisions, PPO's update, RND's training (and a lone instance's networks)."""
    server: int
    """The model server (`serve`)."""


def run_threads(num_envs: int, served: bool, forked: bool = True, given: int | None = None) -> RunThreads:
    """A run's share of the cores it was given (`given`, default `playtester.cores.cores()`): its
    busy processes are its game workers, its trainer and its model server, and each gets an equal
    share. A lone instance plays in the trainer's process (`build_explorer`), taking turns with it,
    so it has the trainer's threads. Forked workers keep to one thread: OpenMP's threads do not
    survive a fork (a forked worker that starts a pool of its own hangs)."""
    from playtester.cores import cores

    given = given or cores()
    processes = (num_envs if num_envs > 1 else 0) + 1 + int(served)
    each = max(1, given // processes)
    worker = each if num_envs == 1 else (1 if forked else each)
    return RunThreads(worker, each, each)


def threads_of(spec: RunSpec) -> RunThreads:
    """`run_threads` of the run `spec` names (its workers are spawned on a GPU run, forked otherwise)."""
    from playtester.tester.serving import serving

    return run_threads(spec.num_envs, serving(spec), forked=spec.device != "cuda")


def tester_env(spec: RunSpec, env: gym.Env, index: int = 0, served: "ServedModels | None" = None) -> TesterEnv:
    """Game instance `index` inside its tester loop, carrying on the run folder's logs; with
    `served`, its detector and test policy are the run's model server's."""
    import torch

    from playtester.imitation.live import load_policy
    from playtester.bugs.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, load_assertion
    from playtester.tester.serving import ServedPolicy

    torch.set_num_threads(threads_of(spec).worker)
    if served is not None:
        live = ServedPolicy(served)
    else:
        live = load_policy(spec.tester, map_location=spec.device) if spec.tester else None
        if live is not None and spec.acting == "int8":
            live.quantise()
    texture = TextureOracle.from_coco(spec.texture_reference) if spec.texture_reference else None
    from playtester.bugs.level_oracles import level_oracles

    oracles = [CrashOracle(), StuckOracle(spec.stuck_steps), AssertionOracle([load_assertion(a) for a in spec.assertions]),
               *level_oracles(spec.game, getattr(env.unwrapped, "keymap", None), getattr(env.unwrapped, "graph", None))]
    places = place_log(spec, index)
    if places is not None:  # no map: whether the agent is trapped is judged from pixels alone
        from playtester.bugs.confinement import ConfinementOracle

        oracles.append(ConfinementOracle())
    layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
    wrapped = TesterEnv(
        env, tester=live, detector=make_detector(spec, layout, served), oracles=oracles, run_dir=spec.run_dir, game=spec.game,
        game_options=spec.game_options(), texture=texture,
        config=TesterConfig(test_steps=spec.test_steps, seed=spec.seed, track_every=spec.track_every, min_score=spec.min_score,
                            confirm_hits=spec.confirm_hits, confirm_window=spec.confirm_window),
        env_index=index, n_envs=spec.num_envs,
        episodes=spec.episodes, max_restarts=spec.max_restarts, places=places,
    )
    wrapped.continue_run()
    return wrapped


def place_log(spec: RunSpec, index: int):
    """A `PlaceLog` for a run with no map (a window game given no map, a Gymnasium game): its
    steps clustered into places by the pixel embedding (`playtester/perception/places.py` says why
    not the encoder). None for a run drawn on a map (the park, a Doom level, a window game's map)."""
    from playtester.perception.places import PixelEmbedding
    from playtester.tester.runlog import PlaceLog

    if spec.game.startswith("doom:") or spec.map:
        return None
    return PlaceLog(Path(spec.run_dir), index, PixelEmbedding())


def _wrap(spec: RunSpec, env: gym.Env, index: int, served: "ServedModels | None" = None) -> gym.Env:
    return tester_env(spec, env, index, served)


def episodes_left(spec: RunSpec) -> int:
    """Episodes of the budget not yet started in the run folder."""
    from playtester.tester.runlog import read_jsonl

    played = {r["episode"] for r in read_jsonl(Path(spec.run_dir) / "trajectory.jsonl")}
    return max(0, spec.episodes - len(played))


def explore_at_random(spec: RunSpec, progress: Callable[[int], None] = lambda n: None,
                      say: Callable[[str], None] = print) -> None:
    """The random baseline on one game instance; `progress(n)` after each episode. A crashed
    game is started again (`TesterEnv`) until `max_restarts` is spent; then the run ends here,
    and says why (the crash itself is said from crashes.jsonl, as for every run)."""
    from playtester.capture.games import make_game
    from playtester.tester.crashes import clear_stop

    clear_stop(Path(spec.run_dir))
    env = tester_env(spec, make_game(spec.game, **spec.game_options()))
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


def all_idle(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: every instance has played its share of the budget."""
    idle = infos.get("tester_idle")
    return idle is not None and bool(np.all(idle))


def run_stopped(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: an instance's game crashed beyond the restart budget (`TesterEnv`)."""
    mask = infos.get("_run_stopped")
    return mask is not None and bool(np.any(mask))


def explore_with_ppo(spec: RunSpec, progress: Callable[[int], None] = lambda n: None, resume: bool = False,
                     cluster: bool = False, objective: Callable[[RunSpec, Any], Any] | None = None):
    """Train the PPO explorer online while it plays the run's episodes; see the module doc. With
    `cluster`, the game instances run as Ray actors (Ray started already; `playtester/tester/cluster.py`).
    `objective` changes the explorer before it trains (a load test's adds RELINE's reward:
    `playtester.load.objective.load_objective`)."""
    import functools

    import torch

    from playtester.cores import cores
    from playtester.exploration.checkpoints import load_checkpoint
    from playtester.exploration.ppo import CHECKPOINT_NAME
    from playtester.tester.serving import ModelServer, serving

    from playtester.tester.crashes import clear_stop

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
    wrap: Callable[[gym.Env, int], gym.Env] = functools.partial(_wrap, spec, served=server and server.models)
    if cluster:
        from playtester.tester.cluster import tester_on_worker

        wrap = tester_on_worker  # in an actor: the tester loop on its scratch copy of the run folder
    try:
        return _train_explorer(spec, wrap, budget, resume_ppo, cluster, explorer_dir, progress, objective)
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


def _train_explorer(spec: RunSpec, wrap: Callable[[gym.Env, int], gym.Env], budget: int, resume_ppo: bool, cluster: bool,
                    explorer_dir: Path, progress: Callable[[int], None], objective: Callable[[RunSpec, Any], Any] | None):
    from playtester.exploration.explorer import build_explorer
    from playtester.exploration.ppo import train
    explorer = build_explorer(
        spec.game, spec.preference, spec.explorer, run_dir=str(explorer_dir), total_timesteps=budget,
        num_envs=spec.num_envs, num_steps=spec.rollout, seed=spec.seed, checkpoint_every=5, resume=resume_ppo,
        game_options=spec.game_options(), wrap=wrap, accelerator=spec.device,
        rnd_weight=spec.rnd_weight, episodic_weight=spec.episodic_weight, novelty_scale=spec.novelty_scale,
    )
    if cluster:  # the same instances, each in a Ray actor; this process alone writes the run folder
        from playtester.tester.cluster import ray_instances

        explorer = explorer._replace(env_fn=ray_instances(spec, explorer.env_fn))
    if objective is not None:
        explorer = objective(spec, explorer)

    ended = 0

    def stop(infos: dict[str, Any]) -> bool:
        nonlocal ended
        if "_final_obs" in infos and infos["_final_obs"].any():
            ended += int(np.sum(infos["_final_obs"]))  # idle instances' ends too: the bar is capped at the budget
            progress(ended)
        return all_idle(infos) or run_stopped(infos)

    return train(*explorer, stop=stop)
