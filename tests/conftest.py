"""Shared fixtures. Generated scenarios go to a per-session cache so tests never touch ~/.cache."""

from __future__ import annotations

import os

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


@pytest.fixture(scope="session")
def bc_demos_and_encoder(tmp_path_factory, small_park):
    """Five inspect demos on the small park and a tiny encoder trained on them (64 px, 32 features)."""
    from playtester.cli import main

    root = tmp_path_factory.mktemp("bc")
    demos = root / "inspect"
    assert main(["demos", "--game", small_park, "--behavior", "inspect", "--episodes", "5", "--steps", "60", "--out", str(demos)]) == 0
    encoder = root / "encoder.ckpt"
    assert main(["train", "encoder", "--demos", str(demos), "--out", str(encoder), "--image-size", "64", "--pretrained", "none",
                 "--feature-dim", "32", "--epochs", "1"]) == 0
    return demos, encoder


TINY_POLICY = {"global_hidden": 32, "local_hidden": 16, "mlp": (32, 16)}


@pytest.fixture(scope="session")
def tiny_inspect_policy(bc_demos_and_encoder, tmp_path_factory):
    """A tiny inspect policy checkpoint trained for one epoch on the fixture demos."""
    from playtester.imitation.fit import fit_policy
    from playtester.imitation.training import TrainConfig

    demos, encoder = bc_demos_and_encoder
    out = tmp_path_factory.mktemp("policy") / "inspect.ckpt"
    fit_policy(demos, encoder, out, TrainConfig(epochs=1, batch_size=2), shape=TINY_POLICY, progress=False,
               logdir=out.parent / "logs", say=lambda m: None)
    return out
