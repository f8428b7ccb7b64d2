"""A game instance of a run: `tester_env` puts it inside its tester loop (the test policy, the
detector, the oracles, the run folder's logs), with the torch threads its process gets; and the
`stop` tests over the instances' infos. The run's drivers (`runner.py`) and its Ray actors
(`cluster.py`) both build their instances here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.tester.spec import RunSpec, load_known_oois
from playtester.tester.loop import TesterConfig, TesterEnv

if TYPE_CHECKING:
    from playtester.tester.serving import ServedModels


def make_detector(spec: RunSpec, layout: Any, served: "ServedModels | None" = None, loaded: Any = None):
    """What finds the OOIs in the tester loop: a trained model whose detections are matched to
    the known OOIs (the park's, or `--oois`) by telemetry, or with `oracle_labels` the engine's
    labels; None without a test policy (nothing to test with). `layout`: the park's (`GameInfo.layout`), else None.
    `served`: the model runs in the run's model server (`playtester/tester/serving.py`); `loaded`:
    the run's detector checkpoint, read already (`assemble.LoadedDetector`)."""
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

    if served is not None:
        model = ServedDetector(served)
    else:
        model = loaded.model if loaded is not None else load_detector(spec.detector, map_location=spec.device)
    # the objects it can place by telemetry: the park's OOIs, --oois, or a Doom level's things of its classes
    known = layout.oois if layout else load_known_oois(spec.oois) if spec.oois else level_objects(spec.game, model.classes)
    return ModelDetector(model, known, thresholds=loaded.thresholds if loaded is not None else read_thresholds(spec.detector))


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


def tester_env(spec: RunSpec, env: gym.Env, index: int = 0, served: "ServedModels | None" = None,
               loaded: Any = None, game_options: dict[str, Any] | None = None) -> TesterEnv:
    """Game instance `index` inside its tester loop, carrying on the run folder's logs; with
    `served`, its detector and test policy are the run's model server's; with `loaded`, those the
    run loaded in this process (`assemble.RunInputs`, `Run.here`), else it loads its own. `game_options`: what the
    game was made with (`Run.game_options`; default `spec.game_options()`)."""
    import torch

    from playtester.imitation.live import load_policy
    from playtester.bugs.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, load_assertion
    from playtester.tester.serving import ServedPolicy

    torch.set_num_threads(threads_of(spec).worker)
    if served is not None:
        live = ServedPolicy(served)
    else:
        if loaded is not None:
            live = loaded.tester
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
        env, tester=live, detector=make_detector(spec, layout, served, loaded and loaded.detector), oracles=oracles,
        run_dir=spec.run_dir, game=spec.game, game_options=spec.game_options() if game_options is None else game_options,
        texture=texture,
        config=TesterConfig(test_steps=spec.test_steps, seed=spec.seed, track_every=spec.track_every, min_score=spec.min_score,
                            confirm_hits=spec.confirm_hits, confirm_window=spec.confirm_window, returns=spec.returns),
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


def all_idle(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: every instance has played its share of the budget."""
    idle = infos.get("tester_idle")
    return idle is not None and bool(np.all(idle))


def run_stopped(infos: dict[str, Any]) -> bool:
    """`stop` for PPO: an instance's game crashed beyond the restart budget (`TesterEnv`)."""
    mask = infos.get("_run_stopped")
    return mask is not None and bool(np.any(mask))
