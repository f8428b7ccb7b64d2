"""A tester run: one `TesterEnv` per game instance, driven by the explorer.

`RunSpec` holds what a game instance needs to build its tester loop (paths and options only, so
that it pickles into `AsyncVectorEnv`'s worker processes). Two drivers share it:

- `explore_with_ppo`: the PPO explorer, trained online while it plays (PPGTA's agent, `ppgta`,
  or the Inspector-style baseline, `inspector`), on `num_envs` game instances at once. Each
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
from typing import TYPE_CHECKING, Any, Callable

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
    from playtester.capture.level_map import level_objects
    from playtester.perception.detector import load_detector
    from playtester.tester.serving import ServedDetector

    model = ServedDetector(served) if served is not None else load_detector(spec.detector, map_location=spec.device)
    # the objects it can place by telemetry: the park's OOIs, --oois, or a Doom level's things of its classes
    known = layout.oois if layout else load_known_oois(spec.oois) if spec.oois else level_objects(spec.game, model.classes)
    return ModelDetector(model, known)


def worker_threads(num_envs: int, cores: int | None = None) -> int:
    """Torch threads for one game instance's networks (detector, test policy). The explorer waits
    while an instance runs an OOI test, so a lone instance, which plays in the explorer's own
    process (`build_explorer`), gets every core: ×1.4 on the test policy's pass on two. Several
    instances play in forked workers, one thread each: OpenMP's threads do not survive a fork (a
    forked worker that starts a pool of its own hangs), and more would only fight. `OMP_NUM_THREADS`,
    when set, caps the lone instance's threads: on a machine busy with other work (the game under
    test, another run) two threads that wait on each other lose to one (docs/BENCHMARKS.md)."""
    import os

    if num_envs > 1:
        return 1
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if asked.isdigit() and int(asked) > 0:
        return int(asked)
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores)


def tester_env(spec: RunSpec, env: gym.Env, index: int = 0, served: "ServedModels | None" = None) -> TesterEnv:
    """Game instance `index` inside its tester loop, carrying on the run folder's logs; with
    `served`, its detector and test policy are the run's model server's."""
    import torch

    from playtester.imitation.live import load_policy
    from playtester.bugs.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, load_assertion
    from playtester.tester.serving import ServedPolicy

    torch.set_num_threads(worker_threads(spec.num_envs))
    if served is not None:
        live = ServedPolicy(served)
    else:
        live = load_policy(spec.tester, map_location=spec.device) if spec.tester else None
        if live is not None and spec.acting == "int8":
            live.quantise()
    texture = TextureOracle.from_coco(spec.texture_reference) if spec.texture_reference else None
    oracles = [CrashOracle(), StuckOracle(spec.stuck_steps), AssertionOracle([load_assertion(a) for a in spec.assertions])]
    layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
    wrapped = TesterEnv(
        env, tester=live, detector=make_detector(spec, layout, served), oracles=oracles, run_dir=spec.run_dir, game=spec.game,
        game_options=spec.game_options(), texture=texture,
        config=TesterConfig(test_steps=spec.test_steps, seed=spec.seed, track_every=spec.track_every, min_score=spec.min_score), env_index=index, n_envs=spec.num_envs,
        episodes=spec.episodes, max_restarts=spec.max_restarts, places=place_log(spec, index),
    )
    wrapped.continue_run()
    return wrapped


def place_log(spec: RunSpec, index: int):
    """A `PlaceLog` for a run with no map (a window game without --map, a Gymnasium game): its
    steps clustered into places by the pixel embedding (`playtester/perception/places.py` says why
    not the encoder). None for a run drawn on a map (the park, a Doom level, a window game's --map)."""
    from playtester.perception.places import PixelEmbedding
    from playtester.tester.runlog import PlaceLog

    if spec.game.startswith("doom:") or spec.map:
        return None
    return PlaceLog(Path(spec.run_dir), index, PixelEmbedding())
