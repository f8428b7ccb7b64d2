"""Frame-time measurement for every backend, and the habits that keep it steady.

Where a step's frame time comes from (`info["frame_time_ms"]`, milliseconds):

- `DoomGame`: the CPU time of the step (`frame_clock="cpu"`, the default): the engine process's
  CPU time over `make_action` (its tics and the render) plus this thread's, read from the
  kernel's per-process CPU clocks (`StepCpuClock`). It is what the frame costs the machine, and
  it is what a frame-rate drop is on a player's own machine, where nothing else waits for the
  cores; the wall clock (`frame_clock="wall"`, as RELINE timed it on a dedicated server) adds the
  time the engine waited for a core, which on a shared machine is other people's work. Both are
  in `info` (`frame_cpu_ms`, `frame_wall_ms`); `frame_time_ms` is the chosen one.
  `frame_timing=False` turns timing off.
- `GymGame`: the wall clock around the env's step and render (`frame_timing=False` turns it off).
- a window game: `fps` sent by the game's telemetry (`frame_time_ms = 1000 / fps`, see
  `window/telemetry.py`); without telemetry, `FrameIntervalTimer` times the interval between
  two distinct captured frames (a floor of one capture period: it only sees drops below the
  control rate).
- anything else: nothing, and `require_frame_time` says what to turn on.

Habits: `warm_up` plays a few steps first (the first frames load textures and caches),
`raise_priority` lifts this process's priority when the system allows it, and `replay_timings`
replays one fixed action sequence several times so that `playtester.load.stats.spearman_reliability` can
check that the slow steps stay slow from one replay to the next.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from playtester.errors import UserError

FRAME_TIME_KEY = "frame_time_ms"
FRAME_CLOCKS = ("cpu", "wall")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def process_cpu_clock(pid: int) -> Callable[[], float] | None:
    """A function returning process `pid`'s CPU time in seconds (all its threads, nanosecond
    resolution: the kernel's `clock_getcpuclockid`), or None where the system has no such clock."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        clock_id = ctypes.c_int()
        if libc.clock_getcpuclockid(int(pid), ctypes.byref(clock_id)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    cid = clock_id.value

    def seconds() -> float:
        ts = _Timespec()
        if libc.clock_gettime(cid, ctypes.byref(ts)) != 0:
            raise OSError(ctypes.get_errno(), f"CPU clock of process {pid} is gone")
        return ts.tv_sec + ts.tv_nsec * 1e-9

    try:
        seconds()
    except OSError:
        return None
    return seconds


class StepCpuClock:
    """CPU milliseconds a step costs: the engine process's CPU time plus the calling thread's.

    `start()` before the step, `stop()` after it. Other processes on the machine change how long
    the step waits for a core, not how much CPU it uses, so this reading holds on a busy machine
    where the wall clock does not. None from `stop()` when the engine's clock could not be read
    (the engine died in the step).
    """

    def __init__(self, engine_pid: int | None):
        self.engine = process_cpu_clock(engine_pid) if engine_pid is not None else None
        self._t0: tuple[float, float] | None = None

    @property
    def available(self) -> bool:
        return self.engine is not None

    def start(self) -> None:
        """Read both clocks; an engine already gone leaves nothing to time (the step that
        follows meets the dead engine and reports the crash)."""
        self._t0 = None
        if self.engine is not None:
            try:
                self._t0 = (self.engine(), time.thread_time())
            except OSError:
                self._t0 = None

    def stop(self) -> float | None:
        if self.engine is None or self._t0 is None:
            return None
        try:
            engine = self.engine() - self._t0[0]
        except OSError:
            return None
        return (engine + time.thread_time() - self._t0[1]) * 1000.0


def frame_time_of(info: dict[str, Any]) -> float | None:
    """The step's frame time in ms from `info` (`frame_time_ms`, else `1000 / fps`), or None."""
    value = info.get(FRAME_TIME_KEY)
    if value is not None:
        return float(value)
    fps = info.get("fps")
    if fps is not None and float(fps) > 0:
        return 1000.0 / float(fps)
    return None


def missing_frame_time_message(game: str) -> str:
    """What to enable so that `game` reports frame times, in one line."""
    prefix = game.split(":", 1)[0]
    if prefix in ("doom", "gym"):
        how = f"the {prefix} backend measures it unless frame_timing=False; leave frame timing on"
    elif prefix == "window":
        how = ("send \"fps\" in the game's telemetry (--telemetry-port PORT) or time distinct captured frames "
               "(wrap the game in capture.timing.FrameIntervalTimer)")
    else:
        how = ("this backend measures no frame time; put frame_time_ms (or fps) in the step's info, "
               "e.g. with a wrapper, or play the game through window: with telemetry")
    return f"game {game!r} reports no frame time (no frame_time_ms or fps in its step info): {how}"


def require_frame_time(info: dict[str, Any], game: str) -> float:
    """The step's frame time; a `UserError` naming the measurement to enable when there is none."""
    value = frame_time_of(info)
    if value is None:
        raise UserError(missing_frame_time_message(game))
    return value


class FrameIntervalTimer(gym.Wrapper):
    """Frame time from pixels: the interval between the two latest distinct captured frames.

    For window games without telemetry. A frame counts as new when its mean absolute change
    from the last distinct one passes `tolerance` (grey levels). A step whose frame did not
    change keeps the last interval (a still scene says nothing new). `frame_time_ms` already in
    `info` (telemetry `fps`) wins and is left alone.
    """

    def __init__(self, env: gym.Env, tolerance: float = 0.5, clock: Callable[[], float] = time.perf_counter):
        super().__init__(env)
        self.tolerance = float(tolerance)
        self.clock = clock
        self._last: np.ndarray | None = None
        self._last_time = 0.0
        self._interval: float | None = None

    def _time(self, obs: np.ndarray, info: dict[str, Any]) -> dict[str, Any]:
        if frame_time_of(info) is not None:
            return info | {"frame_time_source": "telemetry" if "fps" in info else "game"}
        now = self.clock()
        small = np.asarray(obs)[::4, ::4].astype(np.int16)
        if self._last is None:
            self._last, self._last_time = small, now
        elif float(np.abs(small - self._last).mean()) > self.tolerance:
            self._interval = (now - self._last_time) * 1000.0
            self._last, self._last_time = small, now
        if self._interval is None:
            return info
        return info | {FRAME_TIME_KEY: self._interval, "frame_time_source": "capture"}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._last, self._interval = None, None
        return obs, self._time(obs, info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._time(obs, info)


def raise_priority(niceness: int = -10, realtime: bool = False) -> str:
    """Lift this process's scheduling priority when allowed; says what was done.

    `niceness` is the target nice value (lower is more favoured; below 0 needs privileges).
    `realtime=True` asks for round-robin real-time scheduling at priority 1 (RELINE's
    `chrt --rr 1`); use it only on a machine given over to the measurement, since such a process
    can starve others. Nothing is raised as an error: a refused request is reported and the
    measurement goes on at normal priority.
    """
    done = []
    if realtime and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
            done.append("real-time round-robin priority 1")
        except (PermissionError, OSError) as e:
            done.append(f"real-time priority refused ({e.strerror or e})")
    if hasattr(os, "nice"):
        current = os.nice(0)
        if niceness < current:
            try:
                os.nice(niceness - current)
                done.append(f"nice {current} -> {os.nice(0)}")
            except (PermissionError, OSError):
                done.append(f"nice {niceness} refused (needs privileges); left at {current}")
        else:
            done.append(f"nice already {current}")
    return "; ".join(done) or "priority unchanged (not supported on this system)"


def warm_up(env: gym.Env, steps: int, *, seed: int | None = None, action: int | Callable[[], int] | None = None) -> None:
    """Play `steps` steps that are not measured (caches, textures and the JIT settle first)."""
    if steps <= 0:
        return
    env.reset(seed=seed)
    for _ in range(steps):
        a = action() if callable(action) else (action if action is not None else env.action_space.sample())
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()


def replay_timings(
    env: gym.Env,
    actions: Sequence[int],
    replays: int,
    *,
    game: str,
    seed: int = 0,
    reset_options: dict[str, Any] | None = None,
    warmup_steps: int = 20,
) -> np.ndarray:
    """`replays × len(actions)` frame times (ms) of one fixed action sequence replayed from the same
    reset (same seed and options) each time; the input to `spearman_reliability`."""
    if replays < 2:
        raise UserError(f"reliability check: {replays} replay(s); use at least 2 to correlate")
    if len(actions) < 3:
        raise UserError(f"reliability check: {len(actions)} action(s); use at least 3 steps")
    warm_up(env, warmup_steps, seed=seed)
    out = np.zeros((replays, len(actions)))
    for r in range(replays):
        env.reset(seed=seed, options=reset_options)
        for t, a in enumerate(actions):
            _, _, terminated, truncated, info = env.step(int(a))
            out[r, t] = require_frame_time(info, game)
            if (terminated or truncated) and t < len(actions) - 1:
                raise UserError(f"reliability check: the episode ended at step {t + 1} of {len(actions)}; "
                                "use a shorter action sequence or a longer episode limit")
    return out
