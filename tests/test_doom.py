"""DoomGame against the real engine: the env contract, determinism, telemetry, bad input."""

import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from playtester.capture.doom import DoomGame
from playtester.errors import UserError
from playtester.capture.games import doom_scenario, make_game
from playtester.capture.keymap import KeyMap
from playtester.capture.frames import FrameSpec
from playtester.capture.wrappers import ResizeFrame


@pytest.mark.parametrize("spec", ["doom:park:5:24x24", "doom:freedoom2:MAP01"])
def test_check_env(spec):
    env = make_game(spec, frame_timing=False)
    try:
        check_env(env)
        assert env.observation_space.shape == (240, 320, 3)
        assert env.action_space.n == (9 if "park" in spec else 10), "a level's key map adds USE to the park's 9 actions"
    finally:
        env.close()


def test_same_seed_and_actions_give_identical_frames(small_park):
    env = make_game(small_park)
    try:
        actions = np.random.default_rng(0).integers(0, 9, size=60)
        runs = []
        for _ in range(2):
            frame, info = env.reset(seed=11)
            frames = [frame.copy()] + [env.step(int(a))[0].copy() for a in actions]
            runs.append(np.stack(frames))
        assert np.array_equal(runs[0], runs[1])
        env.reset(seed=12)
        other = np.stack([env.step(int(a))[0].copy() for a in actions])
        assert not np.array_equal(runs[0][1:], other)
    finally:
        env.close()


def test_telemetry_and_movement(park_env):
    layout = park_env.scenario.layout
    start = next(s for s in layout.starts if s.on_path)
    frame, info = park_env.reset(seed=0, options={"start": (start.x, start.y, 90.0)})
    assert frame.dtype == np.uint8 and frame.shape == (240, 320, 3) and frame.std() > 5
    x0, y0, _ = info["position"]
    assert math.hypot(x0 - start.x, y0 - start.y) < 1.0
    assert abs(((info["angle"] - 90.0) + 180) % 360 - 180) <= 4.0
    # forward along 90° (north) raises y and keeps x
    for _ in range(5):
        frame, _, _, _, info = park_env.step(park_env.keymap.index("forward"))
    x1, y1, _ = info["position"]
    assert y1 - y0 > 60 and abs(x1 - x0) < 0.2 * (y1 - y0)
    assert info["frame_time_ms"] > 0
    before = info["angle"]
    _, _, _, _, info = park_env.step(park_env.keymap.index("turn_left"))
    _, _, _, _, info = park_env.step(park_env.keymap.index("turn_left"))
    assert 5 < ((info["angle"] - before) % 360) < 60


def test_objects_have_boxes_inside_the_frame(park_env):
    layout = park_env.scenario.layout
    ooi = next(o for o in layout.oois if o.reachable)
    frame, info = park_env.reset(seed=0, options={"start": (ooi.x - 200, ooi.y, 0.0)})
    h, w = frame.shape[:2]
    target = [o for o in info["objects"] if o["ooi"] == ooi.id]
    assert len(target) == 1
    obj = target[0]
    assert obj["class"] == ooi.kind and obj["bug"] == ooi.bug
    x0, y0, x1, y1 = obj["box"]
    assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
    # the box is near the middle of the screen since we face the OOI
    assert abs((x0 + x1) / 2 - w / 2) < w / 6
    # and the pixels in it are not the grass around it
    assert np.abs(frame[y0:y1, x0:x1].mean((0, 1)) - frame[y1:, :].mean((0, 1))).sum() > 10


def test_random_starts_differ_between_seeds(park_env):
    positions = {tuple(round(v) for v in park_env.reset(seed=s)[1]["position"][:2]) for s in range(6)}
    assert len(positions) >= 3


def test_truncation_at_max_steps(small_park):
    env = make_game(small_park, max_steps=3)
    try:
        env.reset(seed=0)
        flags = [env.step(0)[3] for _ in range(3)]
        assert flags == [False, False, True]
    finally:
        env.close()


def test_resize_wrapper():
    env = ResizeFrame(make_game("doom:park:5:24x24"), FrameSpec.square(128))
    try:
        frame, _ = env.reset(seed=0)
        assert frame.shape == (128, 128, 3) and env.observation_space.shape == (128, 128, 3)
        assert env.step(0)[0].shape == (128, 128, 3)
    finally:
        env.close()


@pytest.mark.parametrize("spec, words", [
    ("doom:mars", ["unknown Doom game"]),
    ("quake:e1m1", ["unknown game spec", "doom:park", "gym:ENV_ID"]),
    ("doom:park:abc", ["seed", "'abc'", "not a whole number"]),
    ("doom:park:1:big", ["size", "24x24"]),
    ("doom:freedoom2:MAP99", ["no level"]),
    ("doom:park:1:4x4", ["at least 8x8"]),
    ("gym:", ["name the env"]),
])
def test_bad_specs_are_clear_errors(spec, words):
    with pytest.raises(UserError) as e:
        make_game(spec)
    for w in words:
        assert w in str(e.value)
    assert "\n" not in str(e.value)


def test_keymap_with_keys_the_engine_cannot_bind():
    km = KeyMap.from_dict({"name": "odd", "actions": [{"name": "w", "keys": ["w"]}, {"name": "menu", "keys": ["f5"]}]})
    with pytest.raises(UserError, match="no binding for f5"):
        DoomGame(doom_scenario("doom:park:5:24x24"), keymap=km)


def test_window_mode_without_display_says_so(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(UserError, match="DISPLAY"):
        make_game("doom:park:5:24x24", render_mode="human")


def test_gym_backend_check_env():
    env = make_game("gym:CartPole-v1", frame_timing=False)
    try:
        check_env(env)
        frame, _ = env.reset(seed=0)
        assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    finally:
        env.close()
