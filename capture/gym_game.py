"""`GymGame`: any Gymnasium env that renders RGB, seen only through its pixels.

The wrapped env's own observation is ignored; the observation is `env.render()`. Its reward is
passed on (Wuji's winning objective uses it); its own `info` is kept under `env_info`, and the
telemetry keys the oracles and coverage read (`position`, `angle`, `crashed`, …) are also
copied to the top level when the env reports them.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.capture.keymap import KeyAction, KeyMap

TELEMETRY_KEYS = ("position", "angle", "pitch", "objects", "crashed", "crash_reason")
"""Keys of the env's own `info` passed on at the top level, where backends put telemetry."""

ENV_PACKAGES = {"ALE/": ("ale_py", "atari")}
"""Id prefix → (the module that registers those envs, the extra that installs it). Gymnasium 1.x
no longer finds plugins by itself: the module is imported before `gym.make`."""


def register_env_package(env_id: str) -> None:
    """Import the package that registers `env_id`'s namespace; a missing one is a one-line error
    naming the extra to install."""
    if env_id.startswith("playtester/"):  # this package's own envs register on import
        import playtester.capture.block_maze  # noqa: F401
        return
    for prefix, (module, extra) in ENV_PACKAGES.items():
        if env_id.startswith(prefix):
            try:
                package = importlib.import_module(module)
            except ImportError:
                raise UserError(f"gym:{env_id}: needs {module.replace('_', '-')}, which is not installed; "
                                f"install it with pip install 'playtester[{extra}]'") from None
            gym.register_envs(package)


def index_keymap(name: str, n: int) -> KeyMap:
    """A key map of `n` key-less actions for envs that take action indices, not keys."""
    return KeyMap(name=name, actions=tuple(KeyAction(name=f"action{i}", keys=()) for i in range(n)))


class GymGame(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, env_id: str, *, max_steps: int | None = None, render_mode: str | None = None,
        frame_timing: bool = True, **kwargs: Any,
    ):
        register_env_package(env_id)
        try:
            self.env = gym.make(env_id, render_mode="rgb_array", **kwargs)
        except gym.error.Error as e:
            raise UserError(f"gym:{env_id}: cannot make it ({e}); check the id with `playtester games`") from None
        except TypeError as e:
            raise UserError(f"gym:{env_id}: it does not take render_mode='rgb_array' ({e})") from None
        if not isinstance(self.env.action_space, gym.spaces.Discrete):
            raise UserError(f"gym:{env_id}: its action space is {self.env.action_space}; only Discrete(n) games are supported")
        self.env_id = env_id
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.frame_timing = frame_timing
        self.keymap = index_keymap(f"gym:{env_id}", int(self.env.action_space.n))
        self.action_space = gym.spaces.Discrete(int(self.env.action_space.n))
        self.env.reset(seed=0)
        frame = self._render()
        self.observation_space = gym.spaces.Box(0, 255, shape=frame.shape, dtype=np.uint8)
        self._frame = frame
        self._steps = 0

    def _render(self) -> np.ndarray:
        frame = self.env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3:
            raise UserError(f"gym:{self.env_id}: render() did not return an RGB frame (H×W×3); it cannot be played from pixels")
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        _, env_info = self.env.reset(seed=int(self.np_random.integers(0, 2**31 - 1)), options=options)
        self._steps = 0
        self._frame = self._render()
        return self._frame, self._info(0.0, env_info)

    def step(self, action):
        t0 = time.perf_counter()
        _, reward, terminated, truncated, env_info = self.env.step(int(action))
        self._frame = self._render()
        frame_time_ms = (time.perf_counter() - t0) * 1000.0
        self._steps += 1
        if self.max_steps is not None and self._steps >= self.max_steps and not terminated:
            truncated = True
        return self._frame, float(reward), bool(terminated), bool(truncated), self._info(frame_time_ms, env_info)

    def _info(self, frame_time_ms: float, env_info: dict) -> dict[str, Any]:
        info: dict[str, Any] = {"step": self._steps, "env_info": env_info}
        info.update((k, env_info[k]) for k in TELEMETRY_KEYS if k in env_info)
        if self.frame_timing:  # a wall-clock reading; see DoomGame's note on determinism
            info["frame_time_ms"] = frame_time_ms
        return info

    def render(self):
        return self._frame.copy() if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        self.env.close()
