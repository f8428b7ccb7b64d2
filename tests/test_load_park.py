"""The performance-bugged park on the real engine, frame-time measurement and its bad input."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from playtester.errors import UserError
from playtester.capture.games import make_game, park_config_from_spec
from playtester.capture.park.perf import PerfParkConfig, build_perf_park, walk_distances
from playtester.capture.timing import FrameIntervalTimer, raise_priority, replay_timings, require_frame_time
from playtester.load.stats import spearman_reliability

PERF_PARK = "doom:park-perf:5:24x24"
TURN = 4  # the default key map's "turn left": the view sweeps the whole surroundings


@pytest.fixture(scope="module")
def perf_env():
    env = make_game(PERF_PARK)
    yield env
    env.close()


@pytest.fixture(scope="module")
def zones():
    return build_perf_park(PerfParkConfig(park=park_config_from_spec(PERF_PARK))).zones()


def step_times(env, x, y, steps=12):
    env.reset(seed=0, options={"start": (x, y, 0.0)})
    return [env.step(TURN)[4]["frame_time_ms"] for _ in range(steps)]


def test_slow_zones_slow_the_engine_step(perf_env, zones):
    plain = perf_env.unwrapped.scenario.layout.starts[0]
    slow, fast = [], []
    for _ in range(3):  # interleaved, so a burst of load elsewhere on the machine hits both alike
        fast += step_times(perf_env, plain.x, plain.y)
        for z in zones:
            slow += step_times(perf_env, z.x, z.y)
    ratio = np.median(slow) / np.median(fast)
    assert ratio > 2.0, f"slow zone {np.median(slow):.2f} ms vs plain {np.median(fast):.2f} ms"


def test_the_step_costs_cpu_time_by_default_and_the_wall_clock_on_request(perf_env, zones):
    perf_env.reset(seed=0, options={"start": (zones[0].x, zones[0].y, 0.0)})
    info = perf_env.step(TURN)[4]
    assert info["frame_time_ms"] == info["frame_cpu_ms"] > 0
    # the engine's CPU time cannot exceed the time that passed, bar the thread's own few µs
    assert info["frame_cpu_ms"] <= info["frame_wall_ms"] + 1.0
    wall = make_game(PERF_PARK, frame_clock="wall")
    try:
        wall.reset(seed=0)
        info = wall.step(TURN)[4]
        assert info["frame_time_ms"] == info["frame_wall_ms"] and "frame_cpu_ms" in info
    finally:
        wall.close()
    with pytest.raises(UserError, match="frame clock 'tics': use one of cpu, wall"):
        make_game(PERF_PARK, frame_clock="tics")


def test_a_process_cpu_clock_counts_work_not_waiting():
    import subprocess
    import sys
    import time

    from playtester.capture.timing import process_cpu_clock

    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        busy_clock, idle_clock = process_cpu_clock(busy.pid), process_cpu_clock(idle.pid)
        if busy_clock is None:
            pytest.skip("this system has no per-process CPU clock")
        deadline = time.monotonic() + 60
        while busy_clock() < 0.3 and time.monotonic() < deadline:  # however busy the machine, 0.3 s of CPU comes
            time.sleep(0.05)
        assert 0.3 <= busy_clock() < 0.5  # the loop's 0.3 s and the interpreter's start, no sleep counted
        idle_start, before = idle_clock(), -1.0
        while idle_start != before and time.monotonic() < deadline:  # its interpreter has started and sleeps
            time.sleep(0.2)
            before, idle_start = idle_start, idle_clock()
        time.sleep(0.5)
        assert idle_clock() - idle_start < 0.05  # sleeping costs nothing (its start-up, which a busy machine
        # can spread over the busy loop's time, is not counted: a full run at load failed so)
    finally:
        busy.kill()
        idle.kill()


def test_a_step_clock_whose_engine_died_times_nothing_and_raises_nothing():
    import subprocess
    import sys

    from playtester.capture.timing import StepCpuClock

    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    clock = StepCpuClock(engine.pid)
    if not clock.available:
        pytest.skip("this system has no per-process CPU clock")
    clock.start()
    assert clock.stop() is not None  # alive: the step is timed
    engine.kill()
    engine.wait()
    clock.start()  # killed before the step: the step itself meets the dead engine, not the clock
    assert clock.stop() is None


def test_zones_are_far_from_every_start_and_kept_from_the_agent(perf_env, zones):
    layout = perf_env.unwrapped.scenario.layout
    cfg = PerfParkConfig()
    from_zones = walk_distances(layout, [z.cell for z in zones])
    for s in layout.starts:
        col, row = layout.cell_of(s.x, s.y)
        assert from_zones[row, col] < 0 or from_zones[row, col] >= cfg.start_distance
    assert len(zones) == cfg.zones and all(z.walk_from_start >= cfg.start_distance for z in zones)
    assert all(layout.on_pathway(z.x, z.y) for z in zones)
    folder = build_perf_park(PerfParkConfig(park=park_config_from_spec(PERF_PARK))).folder
    assert "zones" not in json.loads((folder / "park.json").read_text())
    _, info = perf_env.reset(seed=1)
    _, _, _, _, info = perf_env.step(0)
    assert not any("zone" in k or "lag" in k.lower() for k in info)


def test_replays_of_one_action_sequence_rank_their_slow_steps_alike(perf_env, zones):
    z = zones[0]
    # walk east into a grove from 3 cells west of it, turning on the spot inside
    actions = [0] * 14 + [TURN] * 10
    timings = replay_timings(perf_env, actions, replays=3, game=PERF_PARK, seed=3,
                             reset_options={"start": (z.x - 3 * 128, z.y, 0.0)}, warmup_steps=5)
    assert timings.shape == (3, 24)
    # each replay against its own first steps: a busy machine slows whole replays, not single steps
    ratios = np.median(timings[:, -8:], axis=1) / np.median(timings[:, :3], axis=1)
    print("zone / open ground, per replay:", np.round(ratios, 2))
    assert np.median(ratios) > 1.5, ratios
    rel = spearman_reliability(timings)
    assert rel.rho_median > 0.3, rel.to_dict()


def test_no_frame_time_names_the_measurement_to_enable(small_park):
    from playtester.capture.gym_game import GymGame

    env = GymGame("CartPole-v1", frame_timing=False)
    try:
        env.reset(seed=0)
        info = env.step(0)[4]
        with pytest.raises(UserError, match="gym:CartPole-v1.*no frame time.*frame_time_ms.*leave frame timing on"):
            require_frame_time(info, "gym:CartPole-v1")
    finally:
        env.close()
    from playtester.capture.doom import DoomGame
    from playtester.capture.games import doom_scenario

    doom = DoomGame(doom_scenario(small_park), frame_timing=False)
    try:
        doom.reset(seed=0)
        with pytest.raises(UserError, match="leave frame timing on"):
            require_frame_time(doom.step(0)[4], small_park)
    finally:
        doom.close()
    with pytest.raises(UserError, match="telemetry-port"):
        require_frame_time({}, "window:My Game")
    assert require_frame_time({"fps": 40.0}, "window:My Game") == 25.0
    with pytest.raises(UserError, match="this backend measures no frame time"):
        require_frame_time({"position": (1, 2)}, "state:CartPole-v1")


class Frames(gym.Env):
    """Frames from a list: a stand-in for the screen of a window game, with a hand-set clock."""

    observation_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    action_space = gym.spaces.Discrete(1)

    def __init__(self, values, infos=None):
        self.values, self.infos, self.t = values, infos or [{}] * len(values), 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.full((8, 8, 3), self.values[0], np.uint8), dict(self.infos[0])

    def step(self, action):
        self.t += 1
        return np.full((8, 8, 3), self.values[self.t], np.uint8), 0.0, False, False, dict(self.infos[self.t])


def test_frame_interval_timer_times_distinct_frames():
    clock = iter([0.0, 0.1, 0.2, 0.3, 0.4]).__next__
    env = FrameIntervalTimer(Frames([0, 10, 10, 10, 20]), clock=clock)
    _, info = env.reset()
    assert "frame_time_ms" not in info
    times = [env.step(0)[4].get("frame_time_ms") for _ in range(4)]
    # new frame at 0.1 s (100 ms), the same picture twice (kept), a new one at 0.4 s (300 ms)
    assert times == pytest.approx([100.0, 100.0, 100.0, 300.0])
    told = FrameIntervalTimer(Frames([0, 10], [{}, {"fps": 50.0}]), clock=iter([0.0, 1.0]).__next__)
    told.reset()
    info = told.step(0)[4]
    assert "frame_time_ms" not in info and info["frame_time_source"] == "telemetry"
    assert require_frame_time(info, "window:x") == 20.0


def test_raise_priority_reports_what_it_did():
    said = raise_priority(niceness=100)  # asks for nothing higher than now: never changes anything
    assert said.startswith("nice already")
