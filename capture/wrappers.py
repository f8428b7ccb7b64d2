"""Preprocessing as small wrappers that recompute `observation_space`."""

from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np


class ResizeFrame(gym.ObservationWrapper):
    """Resize RGB frames to `size` = (height, width) with area interpolation (no aliasing)."""

    def __init__(self, env: gym.Env, size: tuple[int, int] = (128, 128)) -> None:
        super().__init__(env)
        self.size = (int(size[0]), int(size[1]))
        self.observation_space = gym.spaces.Box(0, 255, shape=(*self.size, 3), dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        h, w = self.size
        if observation.shape[:2] == (h, w):
            return observation
        return cv2.resize(observation, (w, h), interpolation=cv2.INTER_AREA)
