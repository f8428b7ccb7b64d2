"""Replay: send a recorded episode's actions to a game again, at the recorded timing.

The game starts as the episode did: `meta["reset"]` (`seed`, `options`) is passed to
`env.reset`, and `meta["game_options"]` (engine resolution, frame skip, …) to `make_game`; a
`doom:` game is opened at the episode's frame size. Each action is sent when its step was
recorded (`time` in `steps.jsonl`, else `t / fps`), scaled by `speed` (0: as fast as possible).

After each step the frame the game shows is compared with the recorded one: `frames[0]` with the
reset's frame, `frames[t + 1]` with the frame after step `t`. On a deterministic backend
(`doom:`, `gym:`) a faithful episode matches bit for bit; a live window game will not, and the
comparison is then only a measure of how alike the runs looked: `alike` counts the frames that
show the same screen (SSIM of small grey looks, `capture/window/play_state.py`). A window game
recorded with `--launch` is launched again the same way, so that the replay starts as the
recording did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from playtester.errors import UserError


SYNC_MATCH = 0.9
"""SSIM of the first frame a live game must show before the replay sends its first action: close to
the recording's, not just alike (a level's opening screen wipe is alike and takes no input)."""


@dataclass
class ReplayResult:
    steps: int = 0
    """Actions sent."""
    compared: int = 0
    """Frames compared with the recording (0 when the sizes differ)."""
    identical: int = 0
    """Of those, bit-for-bit equal."""
    alike: int = 0
    """Of those, the same screen to the eye: SSIM of their 64×48 grey looks at least `MATCH` (0.6),
    the measure for a live window game, which no replay reproduces bit for bit."""
    first_mismatch: int | None = None
    """Index of the first recorded frame that differed."""
    ended_early: bool = False
    """The game terminated (or crashed) before the episode's last step."""
    notes: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.compared > 0 and self.identical == self.compared and not self.ended_early


def check_actions(actions: list[Any], env, what: str) -> None:
    """Refuse, before the game is played, recorded actions the game cannot take: a damaged step,
    or an episode replayed on another game (`--game`) with fewer actions."""
    for t, action in enumerate(actions):
        if isinstance(action, bool) or not isinstance(action, int) or action < 0:
            raise UserError(f"{what}: step {t} has action {action!r}, not an action number; the recording is damaged")
    n = getattr(env.action_space, "n", None)
    if actions and (n is None or max(actions) >= n):
        has = f"{n} actions" if n is not None else f"actions {env.action_space}"
        raise UserError(f"{what}: its actions go up to {max(actions)}, but the game it is replayed on has {has}; "
                        "replay it on the game it was recorded on")


def replay_options(meta: dict[str, Any], spec: str) -> dict[str, Any]:
    """The `make_game` options that open `spec` the way the episode was recorded."""
    options = dict(meta.get("game_options") or {})
    if spec.startswith("doom:") and "resolution" not in options and meta.get("size"):
        h, w = meta["size"]
        options["resolution"] = f"{w}x{h}"
    if spec.startswith("window:"):
        options = {k: v for k, v in options.items() if k in ("region", "size", "fps", "launch")}
        options.setdefault("fps", float(meta.get("fps") or 10.0))
        if meta.get("size"):
            h, w = meta["size"]
            options["size"] = (w, h)
    return options


def replay_episode(
    episode,
    env,
    *,
    speed: float = 1.0,
    on_step: Callable[[int, bool | None], None] | None = None,
    sync: float = 0.0,
) -> ReplayResult:
    """Send `episode`'s actions to `env` (made with the episode's key map) and compare frames.
    `sync`: seconds to wait, resetting, for the game to show the recording's first frame (a
    live window game just launched is still drawing its first screens)."""
    from playtester.capture.window.play_state import MATCH, look, similarity

    if speed < 0:
        raise UserError(f"--speed {speed}: use 0 (as fast as possible) or a positive factor")
    check_actions([step.get("action") for step in episode.steps], env, f"episode {episode.name}")
    result = ReplayResult()
    frames = episode.frames
    obs, comparable = _reset_as_recorded(episode, env, sync, result.notes)

    def compare(index: int, frame: np.ndarray) -> bool | None:
        if not comparable or index >= len(frames):
            return None
        same = bool(np.array_equal(frame, frames[index]))
        result.compared += 1
        result.identical += same
        result.alike += same or similarity(look(frame), look(np.asarray(frames[index]))) >= MATCH
        if not same and result.first_mismatch is None:
            result.first_mismatch = index
        return same

    compare(0, obs)
    fps = float(episode.meta.get("fps") or 10.0)
    release = getattr(env.unwrapped, "release_keys", None)  # a live window game holds its keys between steps
    start = time.perf_counter()
    steps = list(episode.steps)
    for t, step in enumerate(steps):
        if speed > 0:
            _keep_recorded_pace(steps, t, fps, start, speed, release)
        obs, _, terminated, truncated, _ = env.step(int(step["action"]))
        result.steps += 1
        same = compare(t + 1, obs)
        if on_step is not None:
            on_step(t, same)
        if terminated and t + 1 < len(episode.steps):
            result.ended_early = True
            result.notes.append(f"the game ended at step {t} of {len(episode.steps)}")
            break
    return result


def _reset_as_recorded(episode, env, sync: float, notes: list[str]) -> tuple[np.ndarray, bool]:
    """Reset `env` with the recording's seed and options; the first frame, and whether its frames
    can be compared with the recording's (same shape). With `sync`, reset again until a live game
    shows the recording's first frame or `sync` seconds pass. Why the start may differ goes to `notes`."""
    from playtester.capture.window.play_state import look, similarity

    frames = episode.frames
    reset = episode.meta.get("reset") or {}
    seed = reset.get("seed")
    if seed is None:
        notes.append("the episode has no reset seed: the start may differ from the recording")
    obs, _ = env.reset(seed=seed, options=reset.get("options") or None)
    comparable = tuple(obs.shape) == tuple(frames.shape[1:])
    if sync > 0 and comparable:  # a live game: start when it shows what the recording started on
        deadline = time.perf_counter() + sync
        while similarity(look(obs), look(np.asarray(frames[0]))) < SYNC_MATCH and time.perf_counter() < deadline:
            time.sleep(0.05)
            obs, _ = env.reset(seed=seed, options=reset.get("options") or None)
    if not comparable:
        notes.append(f"frames are {obs.shape}, the recording's {frames.shape[1:]}: not compared")
    return obs, comparable


def _keep_recorded_pace(steps: list[dict], t: int, fps: float, start: float, speed: float, release: Callable[[], None] | None) -> None:
    """Wait until step `t` is due at the recording's pace (scaled by `speed`); a live window game
    also lets go of its keys where the recording had a gap with no action held."""
    due = float(steps[t].get("time", t / fps))
    if release is not None and t and due - float(steps[t - 1].get("time", (t - 1) / fps)) > 1.5 / fps:
        # the recording skipped moments when no action's keys were held: let go of them there too
        _sleep_until(start + (float(steps[t - 1].get("time", (t - 1) / fps)) + 1 / fps) / speed)
        release()
    _sleep_until(start + due / speed)


def _sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
