"""Preprocessing as small wrappers that recompute `observation_space`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from playtester.capture.frames import FrameSpec


class ResizeFrame(gym.ObservationWrapper):
    """RGB frames at `spec`'s size, by the one resize (`capture/frames.py`)."""

    def __init__(self, env: gym.Env, spec: FrameSpec) -> None:
        super().__init__(env)
        self.frames = spec
        self.observation_space = gym.spaces.Box(0, 255, shape=spec.shape, dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return self.frames.resize(observation)
