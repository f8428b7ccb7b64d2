"""Every env a policy plays, built by one factory: `make_env` (`make_game` → the objective's reward
→ the tester loop → the known objects' OD mask, `KnownObjectsMask` → frames at a `FrameSpec`),
each part an option. The PPO explorer's instances, the random explorer's, the population's, a
load test's, `eval policy`'s and `plan run`'s game are all built here."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec, grayscale, pixel_box


def make_env(game: str, frames: FrameSpec | None = None, *, mask: bool = False, reward: str | None = None,
             game_options: dict[str, Any] | None = None, wrap: Callable[[gym.Env, int], gym.Env] | None = None,
             index: int = 0, states: bool = False) -> gym.Env:
    """Game instance `index` as a policy sees it: the one env factory (module level, so that
    `AsyncVectorEnv` can pickle a `functools.partial` of it).

    `make_game(game, **game_options)` → the objective's `reward` (`capture/game_reward.py`)
    → `wrap(env, index)` (the tester loop of `playtester run`) → with `mask`, the known objects'
    OD mask (`KnownObjectsMask`) → frames at `frames`'s size (`capture/frames.py`; None: as the
    game gives them). A `state:ID` game is Gymnasium's env as it is (state vectors, no frames: PPO's
    own tests), with `states` only; a policy that sees pixels refuses it.
    """
    from playtester.capture.games import make_game, make_state_env

    if game.startswith("state:"):
        if not states:
            check_shows_frames(game, f"game {game!r}", "a policy here")
        return make_state_env(game)
    from playtester.capture.wrappers import ResizeFrame

    env = make_game(game, **(game_options or {}))
    if reward is not None:
        from playtester.capture.game_reward import CallableReward

        env = CallableReward(env, reward)
    if frames is not None or mask:
        check_rgb_frames(env.observation_space, f"game {game!r}")
    if wrap is not None:
        env = wrap(env, index)
    if mask:
        env = KnownObjectsMask(env)
    if frames is not None:
        env = ResizeFrame(env, frames)
    return env


def check_shows_frames(game: str, where: str, who: str) -> None:
    """Raise `UserError` for a `state:ID` game (state vectors, no frames), which `who` cannot play."""
    if game.startswith("state:"):
        raise UserError(f"{where}: state vectors, no frames; {who} sees only pixels: give a game that shows its screen "
                        "(see `playtester games`)")


def check_rgb_frames(space: gym.Space, what: str) -> None:
    """Raise `UserError` unless `space` holds uint8 `H×W×3` frames."""
    if not (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3 and space.shape[2] == 3):
        raise UserError(f"{what}: its observations are {space}, not RGB frames (uint8 H×W×3); the explorer sees only pixels")


def mask_known_objects(frame: np.ndarray, boxes: list[Any]) -> np.ndarray:
    """uint8 H×W×3 frame grayscale except inside each of `boxes` (`[x0, y0, x1, y1]`, end-exclusive)."""
    h, w = frame.shape[:2]
    out = np.repeat(grayscale(frame)[..., None], 3, axis=2)
    for box in boxes:
        x0, y0, x1, y1 = pixel_box(box, w, h)
        out[y0:y1, x0:x1] = frame[y0:y1, x0:x1]
    return out


class KnownObjectsMask(gym.Wrapper):
    """OD-mask each frame with the boxes of the objects of interest.

    Under the tester loop these are its detector's latest boxes (`info["detections"]`); without
    it, the boxes the engine reports (`info["objects"]`, ground truth on the park); on a game
    with neither every frame goes all grayscale.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        check_rgb_frames(env.observation_space, "the explorer's game")

    def _mask(self, obs: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        if "detections" in info:  # under the tester loop: what its detector saw last
            return mask_known_objects(obs, list(info["detections"]))
        boxes = [o["box"] for o in info.get("objects") or () if o.get("box") is not None]
        return mask_known_objects(obs, boxes)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._mask(obs, info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._mask(obs, info), reward, terminated, truncated, info
