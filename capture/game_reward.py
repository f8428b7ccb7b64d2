"""The winning objective's reward: the game's own, or a tester's callable over frame and telemetry.

ViZDoom scenarios and Gymnasium envs have a reward of their own. A game in a window has none,
and neither has the built-in park (it has no mission): there the tester names a function with
`--reward module:function` (or `file.py:function`) that takes `(frame, info)` — the RGB frame
and the telemetry dict, as an assertion does — and returns a number; it replaces the game's
reward wherever it is given.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.plugins import load_function

REWARD_OPTION = "--reward"


def game_has_reward(game: str) -> bool:
    """Whether the backend scores play itself: Gymnasium envs and ViZDoom levels do; a window
    game and the mission-less park do not."""
    if game.startswith("window:"):
        return False
    parts = game.split(":")
    return not (parts[0] == "doom" and len(parts) > 1 and parts[1].startswith("park"))


def check_game_reward(game: str, reward: str | None) -> None:
    """Refuse a game without a reward when the winning objective needs one and none is given."""
    if reward is None and not game_has_reward(game):
        raise UserError(
            f"game {game!r} has no reward of its own for the winning objective; give {REWARD_OPTION} "
            "module:function (or file.py:function), a function (frame, info) -> number"
        )
    if reward is not None:
        load_function(reward, REWARD_OPTION)  # fail now, not in a game process


class CallableReward(gym.Wrapper):
    """Replace the game's reward by `fn(frame, info)`; the function is loaded from its spec here,
    so that each game process loads its own."""

    def __init__(self, env: gym.Env, spec: str):
        super().__init__(env)
        self.reward_spec = spec
        self.fn = load_function(spec, REWARD_OPTION)

    def step(self, action):
        frame, _, terminated, truncated, info = self.env.step(action)
        try:
            reward = float(self.fn(frame, info))
        except Exception as e:
            raise UserError(f"{REWARD_OPTION} {self.reward_spec!r} raised {type(e).__name__}: {e}") from None
        if not np.isfinite(reward):
            raise UserError(f"{REWARD_OPTION} {self.reward_spec!r} returned {reward}; return a finite number")
        return frame, reward, terminated, truncated, info
