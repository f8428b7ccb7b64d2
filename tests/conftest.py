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
