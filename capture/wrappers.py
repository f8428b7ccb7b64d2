"""Preprocessing as small wrappers that recompute `observation_space`."""

from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np


def resize_frame(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an RGB frame to `size` = (height, width) without aliasing, quickly.

    Area interpolation is the right filter for shrinking, but OpenCV's general INTER_AREA path is
    slow for non-integer ratios (0.6 ms for 320×240 → 128×128 here). So: first an exact
    integer-factor area reduction (block means, 0.04 ms) that may undershoot the target by up to
    a fifth, then INTER_AREA where both sides still shrink, or bilinear for the remaining mild
    change (the 160×120 → 128×128 case). Same quality in practice, 5× faster.
    """
    h, w = size
    f = int(min(frame.shape[0] / h, frame.shape[1] / w) + 0.2)
    if f >= 2:
        frame = cv2.resize(frame, (frame.shape[1] // f, frame.shape[0] // f), interpolation=cv2.INTER_AREA)
    if frame.shape[:2] == (h, w):
        return frame
    shrink = frame.shape[0] >= h and frame.shape[1] >= w
    return cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


class ResizeFrame(gym.ObservationWrapper):
    """Resize RGB frames to `size` = (height, width) with `resize_frame` (no aliasing)."""

    def __init__(self, env: gym.Env, size: tuple[int, int] = (128, 128)) -> None:
        super().__init__(env)
        self.size = (int(size[0]), int(size[1]))
        self.observation_space = gym.spaces.Box(0, 255, shape=(*self.size, 3), dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        if observation.shape[:2] == self.size:
            return observation
        return resize_frame(observation, self.size)
