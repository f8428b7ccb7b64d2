"""Shared fixtures. Generated scenarios go to a per-session cache so tests never touch ~/.cache."""

from __future__ import annotations

import os

import gymnasium as gym
import pytest

SMALL_PARK = "doom:park:5:24x24"
"""A small park for tests: quick to generate and load, with every terrain and OOI kind."""


@pytest.fixture(scope="session", autouse=True)
def _scenario_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("playtester-cache")
    old = os.environ.get("PLAYTESTER_CACHE")
    os.environ["PLAYTESTER_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("PLAYTESTER_CACHE", None)
    else:
        os.environ["PLAYTESTER_CACHE"] = old


@pytest.fixture(scope="session")
def small_park():
    """The small test park's spec."""
    return SMALL_PARK


@pytest.fixture
def park_env(small_park):
    """A headless DoomGame on the small park, closed after the test."""
    from playtester.capture.games import make_game

    env = make_game(small_park)
    yield env
    env.close()


@pytest.fixture
def run_config(tmp_path):
    """`["--config", FILE]` of run options that a `run` subcommand takes from a --config file only
    (e.g. a tiny --rollout, --assert), written as a user would: `run_config(rollout=8)`."""
    import itertools

    import yaml

    count = itertools.count()

    def write(**options):
        path = tmp_path / f"run-options-{next(count)}.yaml"
        path.write_text(yaml.safe_dump(options))
        return ["--config", str(path)]

    return write


TINY_POLICY = {"global_hidden": 32, "local_hidden": 16, "mlp": (32, 16)}
"""A policy shape small enough to train in seconds."""


@pytest.fixture(scope="session")
def tiny_parts(tmp_path_factory, small_park):
    """`tiny_parts(behavior)` → (demos folder, encoder checkpoint, tiny policy checkpoint) for
    `inspect` or `path`: a few scripted demos on the small park, a tiny encoder (64 px, 32
    features, one epoch) and a tiny policy (one epoch) trained on them; made once a session."""
    from playtester.cli import main
    from playtester.imitation.fit import fit_policy
    from playtester.imitation.training import TrainConfig

    made = {}

    def make(behavior: str = "inspect"):
        if behavior not in made:
            root = tmp_path_factory.mktemp(f"tiny-{behavior}")
            demos = root / behavior
            assert main(["demos", "--game", small_park, "--behavior", behavior, "--episodes", "5", "--steps", "60",
                         "--out", str(demos)]) == 0
            encoder = root / "encoder.ckpt"
            assert main(["train", "encoder", "--demos", str(demos), "--out", str(encoder), "--image-size", "64",
                         "--pretrained", "none", "--feature-dim", "32", "--epochs", "1"]) == 0
            policy = root / f"{behavior}.ckpt"
            fit_policy(demos, encoder, policy, TrainConfig(epochs=1, batch_size=2, chunk=16), shape=TINY_POLICY,
                       progress=False, logdir=root / "logs", say=lambda m: None)
            made[behavior] = (demos, encoder, policy)
        return made[behavior]

    return make


@pytest.fixture(scope="session")
def bc_demos_and_encoder(tiny_parts):
    """Inspect demos on the small park and a tiny encoder trained on them."""
    return tiny_parts("inspect")[:2]


@pytest.fixture(scope="session")
def tiny_inspect_policy(tiny_parts):
    """A tiny inspect policy checkpoint."""
    return tiny_parts("inspect")[2]


@pytest.fixture(scope="session")
def one_step_detector():
    """`make(root, shots, classes=None, **config)` → a detector checkpoint in `root`, trained one
    step on the shots `playtester shots` makes with the options `shots` (e.g. `--game G --n 6`);
    `classes` default to the shots' categories, `config` sets the rest of its `DetectorConfig`.
    Enough to run the loop with: what it finds is not the point."""
    from dataclasses import asdict

    import json

    import torch

    from playtester.cli import main
    from playtester.datasets.detection import DetectionDataModule
    from playtester.perception.detector import DetectorConfig, DetectorModule
    from playtester.perception.training import make_trainer, save_checkpoint_atomic

    def make(root, shots: list[str], classes: list[str] | None = None, **config):
        assert main(["shots", *shots, "--out", str(root / "shots")]) == 0
        labels = root / "shots" / "labels.json"
        classes = classes or [c["name"] for c in json.loads(labels.read_text())["categories"]]
        torch.manual_seed(0)
        cfg = DetectorConfig(classes=classes, pretrained="none", image_size=96, **config)
        trainer = make_trainer(name="det", logdir=root / "logs", epochs=1, progress=False, accelerator="cpu",
                               max_steps=1, limit_val_batches=0)
        trainer.fit(DetectorModule(**asdict(cfg)), datamodule=DetectionDataModule(labels, batch_size=2))
        return save_checkpoint_atomic(trainer, root / "detector.ckpt")

    return make


@pytest.fixture(scope="session")
def tiny_detector(tmp_path_factory, small_park, one_step_detector):
    """A detector checkpoint for the small park's OOIs, trained one step on a few auto-labelled
    shots, that keeps every box it finds (score threshold 0): something to run and compare."""
    return one_step_detector(tmp_path_factory.mktemp("tiny-detector"),
                             ["--game", small_park, "--n", "6", "--resolution", "160x120"],
                             backbone="compact", score_threshold=0.0)


@pytest.fixture
def one_torch_thread():
    """One torch thread: the machine's two cores are shared, and oversubscription is ~6× slower."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class TelemetryStripped(gym.Wrapper):
    """A game as one without telemetry would be: `drop` keys taken out of `info`; the whole
    `info` of the last step is kept in `last_info` for the test to look at."""

    def __init__(self, env: gym.Env, drop=("position", "angle", "pitch")):
        super().__init__(env)
        self.drop = set(drop)
        self.last_info: dict = {}

    def _strip(self, info):
        self.last_info = info
        return {k: v for k, v in info.items() if k not in self.drop}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self._strip(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._strip(info)


def walk_built_level(path, plan, waypoints: list[tuple], **walk) -> tuple:
    """A `WaypointWalk` (`capture/level_walk.py`) through a level plan, built as a WAD at `path`,
    in the real engine: the level's graph and every step's info."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import WaypointWalk
    from playtester.capture.park.level_builder import level_wad

    path.write_bytes(level_wad(plan))
    env = make_game(f"doom:wad:{path}")
    try:
        game = env.unwrapped
        walker = WaypointWalk(game.keymap, waypoints, **walk)
        _, info = env.reset(seed=0)
        infos = []
        while (action := walker.act(info)) is not None:
            _, _, _, _, info = env.step(action)
            infos.append(info)
        return game.graph, infos
    finally:
        env.close()
