"""Screen zones that a sprite enters, the sprite found by its colour: RELINE's injected bugs.

RELINE's first study (its Table 1) injects "performance bugs" into Ms. Pac-Man: gates at the
maze's side tunnels that reveal themselves the first time the player enters each in an episode
(a stand-in for a heavy load, the HWO mutation operator), and rewards its agent +50 for each. The
zones here are rectangles of the game's own frame; a zone is hit in a step whose frame has a pixel
of the sprite's colour inside it. The judge reads pixels only, the frame the agent sees before it
is resized, never the game's memory.

`ZoneHits` puts what was hit in `info` (`zones_hit`: the zones hit so far this episode, in zone
order; `zones_new`: those first hit in this step) and, with `bonus`, adds it to the reward at
each first hit (RELINE's agent; the RL baseline and random play get `bonus=0`, the same oracle).

Ms. Pac-Man's first maze (`gym:ALE/MsPacman-v5`, 160×210 frames): the tunnels open at the left
and right edges on rows 50–61 (upper) and 98–109 (lower); the opening between them (rows 74–85)
is walled off inside and cannot be entered. Ms. Pac-Man is the only sprite of colour
(210, 164, 74) in the playfield (rows 0–171; the lives and fruit below it are not hers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from playtester.errors import UserError


@dataclass(frozen=True)
class ScreenZone:
    """A rectangle of the game's frame, in pixels: `x0 ≤ x < x1`, `y0 ≤ y < y1`."""

    name: str
    x0: int
    y0: int
    x1: int
    y1: int

    def check(self, width: int, height: int, what: str = "zone") -> None:
        """A one-line `UserError` unless the zone is a non-empty rectangle inside a `width×height` frame."""
        if not (0 <= self.x0 < self.x1 <= width and 0 <= self.y0 < self.y1 <= height):
            raise UserError(f"{what} {self.name} ({self.x0},{self.y0})–({self.x1},{self.y1}) lies outside the "
                            f"{width}×{height} screen or is empty; give x0 < x1 ≤ {width} and y0 < y1 ≤ {height}")

    @classmethod
    def parse(cls, text: str, name: str) -> "ScreenZone":
        """`X0,Y0,X1,Y1` (pixels); a one-line `UserError` naming the text otherwise."""
        try:
            x0, y0, x1, y1 = (int(v) for v in text.split(","))
        except ValueError:
            raise UserError(f"zone {name} {text!r}: give four whole numbers X0,Y0,X1,Y1 (pixels of the game's frame)") from None
        return cls(name, x0, y0, x1, y1)


@dataclass(frozen=True)
class SpriteColour:
    """Where a sprite is: the pixels of one exact colour inside the playfield rows."""

    rgb: tuple[int, int, int]
    rows: tuple[int, int] | None = None
    """`(first, end)` rows of the playfield (end exclusive); None: the whole frame."""

    def mask(self, frame: np.ndarray) -> np.ndarray:
        """`H×W` bools: the sprite's pixels."""
        mask = np.all(frame == np.asarray(self.rgb, dtype=frame.dtype), axis=-1)
        if self.rows is not None:
            mask[: self.rows[0]] = False
            mask[self.rows[1]:] = False
        return mask


MS_PACMAN = SpriteColour((210, 164, 74), rows=(0, 172))
MS_PACMAN_ZONES = (
    ScreenZone("upper-left", 0, 50, 8, 62),
    ScreenZone("upper-right", 152, 50, 160, 62),
    ScreenZone("lower-left", 0, 98, 8, 110),
    ScreenZone("lower-right", 152, 98, 160, 110),
)
"""The four gates of RELINE's Ms. Pac-Man study: the two side tunnels, at each screen edge."""


def zones_entered(mask: np.ndarray, zones: Sequence[ScreenZone]) -> list[bool]:
    """For each zone, whether any sprite pixel of `mask` lies inside it."""
    return [bool(mask[z.y0 : z.y1, z.x0 : z.x1].any()) for z in zones]


class ZoneHits(gym.Wrapper):
    """The zone oracle over a game's frames, and RELINE's reward for it (see the module doc)."""

    def __init__(self, env: gym.Env, zones: Sequence[ScreenZone] = MS_PACMAN_ZONES, sprite: SpriteColour = MS_PACMAN,
                 bonus: float = 0.0):
        super().__init__(env)
        shape = env.observation_space.shape
        if shape is None or len(shape) != 3:
            raise UserError(f"zones need the game's RGB frames; its observations are {env.observation_space}")
        if not zones:
            raise UserError("zones: give at least one")
        for z in zones:
            z.check(shape[1], shape[0])
        if len({z.name for z in zones}) != len(zones):
            raise UserError(f"zones: names {[z.name for z in zones]} repeat; give each zone its own name")
        self.zones, self.sprite, self.bonus = tuple(zones), sprite, float(bonus)
        self.hit = np.zeros(len(self.zones), dtype=bool)

    def _look(self, frame: np.ndarray, info: dict[str, Any]) -> int:
        entered = np.array(zones_entered(self.sprite.mask(frame), self.zones))
        new = entered & ~self.hit
        self.hit |= entered
        info["zones_hit"] = [z.name for z, h in zip(self.zones, self.hit) if h]
        info["zones_new"] = [z.name for z, n in zip(self.zones, new) if n]
        return int(new.sum())

    def reset(self, **kwargs):
        frame, info = self.env.reset(**kwargs)
        self.hit[:] = False
        self._look(frame, info)  # the start is not rewarded: no step led there
        return frame, info

    def step(self, action):
        frame, reward, terminated, truncated, info = self.env.step(action)
        new = self._look(frame, info)
        return frame, float(reward) + self.bonus * new, terminated, truncated, info
