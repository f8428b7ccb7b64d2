"""`WindowGame`: any game in a window, seen through screen grabs and played with key presses.

Each `step(a)` brings the window to the front, holds the keys of action `a` (keys shared with
the previous action stay down; the others are released), waits for the next tick of the fixed
control rate, and grabs the window's client area. The window's geometry is read again every step,
so a moved or resized window keeps working (frames keep the first size, resized with INTER_AREA).

The crash signal: when the window disappears or its process (`_NET_WM_PID`) has ended, the step
returns `terminated=True` with `info["crashed"] = True`; every key is released. Telemetry sent by
the game to a UDP port (see `telemetry.py`) is merged into `info`.

A game that ignores the keys (a window that does not take the keyboard, a game that drops
synthetic key events, a menu waiting for a click): when the picture has not changed at all in the
first `ignored_keys_steps` steps that sent keys since the game was opened, every step from then on
says so in `info["keys_ignored"]` (the number of those steps); the tester loop ends the run with
that line. Once the picture has changed under keys, it is never said.

`reset()` releases the keys, finds the window again if it had gone (a harness may have restarted
the game) and starts a new episode. The harness (issue "a window game's harness") adds three
things, each optional:
- `launch`: the command that starts the game (`launch.py`): started here, waited for, ended by
  `close()` (and by the engine watchdog if this process dies); after a crash `reset()` starts it
  again.
- `reset_recipe`: the keys that bring the game to a start of play (`reset.py`), played by every
  `reset()` outside the episode; a recipe that does not reach play is reported in the reset's
  `info["reset_failed"]` and the game is launched again (with `launch`) and the recipe played once
  more; when that fails too, `reset()` raises `ResetMissedPlay` (a `UserError`).
- `out_of_play`: reference screenshots of its game-over and menu screens (`play_state.py`); with
  a recipe and none given, a picture no action changes. A step that finds the game out of play
  ends the episode (`terminated`, `info["out_of_play"]`: why); an episode that was never in play
  also says `reset_failed`, and the next `reset()` launches the game again.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.capture.window.desktops import open_desktop, open_keyboard
from playtester.capture.window.ticker import Ticker
from playtester.capture.window.platform import (
    Desktop, Keyboard, WindowInfo, find_window, process_alive,
)


def _check_options(title: str | None, region: tuple[int, int, int, int] | None, fps: float, render_mode: str | None) -> None:
    """Refuse in one line, before any window is touched, options a window game cannot play with."""
    if title is None and region is None:
        raise UserError("window game: name the window (window:TITLE) or give a screen region X,Y,W,H")
    if not fps > 0:
        raise UserError(f"control rate {fps}: use a positive number of steps per second")
    if render_mode not in (None, "rgb_array"):
        raise UserError(f"render mode {render_mode!r}: a window game renders rgb_array only")


class IgnoredKeys:
    """Whether a game ignores the keys it is sent: the picture has not changed at all in the first
    `limit` steps that sent keys since the game was opened (the module's doc)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reference: np.ndarray | None = None
        """The first frame seen (every 4th pixel), until the picture changes under keys."""
        self.keyed_steps = 0
        """Steps that sent keys while the picture stayed the reference."""
        self.responds = False
        """The picture has changed since the game was opened, keys sent."""

    def remember(self, frame: np.ndarray) -> None:
        """Keep the first frame a reset shows, while the game has not yet answered a key."""
        if self.reference is None and not self.responds:
            self.reference = frame[::4, ::4].astype(np.int16)

    def still_ignored(self, frame: np.ndarray, keyed: bool) -> bool:
        """Whether the game has ignored every key sent since it was opened, for long enough to say so."""
        if self.responds or self.reference is None:
            return False
        if np.abs(frame[::4, ::4].astype(np.int16) - self.reference).mean() >= 0.5:
            self.responds, self.reference = True, None
            return False
        self.keyed_steps += keyed
        return self.keyed_steps >= self.limit


class WindowGame(gym.Env):
    """A game window as a Gymnasium env: RGB frames of its client area, `Discrete(n)` key-map actions.

    `title`: a substring of the window's title (a regular expression with `regex=True`).
    `region`: `(x, y, w, h)` screen pixels to capture when the window cannot be found by title;
    keys then go to whichever window has the focus. `size`: `(width, height)` of the
    observation (default: the window's size when found). `telemetry_port`: listen for the
    game's telemetry there (0 picks a free port, see `telemetry_port` afterwards);
    `reset()` waits up to `telemetry_wait` seconds for its first line. `launch`: the command
    that starts the game (its window must appear within `launch_wait` seconds).
    `reset_recipe`: `{"from": how it was given, "steps": [step dicts]}` (`reset.py`).
    `out_of_play`: screenshots of screens that are not play; `still_steps`: steps of a picture
    no action changes that count as out of play when no screenshot is given; `ignored_keys_steps`:
    steps that sent keys with no change of the picture before the keys count as ignored.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        title: str | None = None,
        *,
        regex: bool = False,
        region: tuple[int, int, int, int] | None = None,
        keymap: KeyMap | None = None,
        fps: float = 10.0,
        size: tuple[int, int] | None = None,
        max_steps: int | None = None,
        telemetry_port: int | None = None,
        telemetry_wait: float = 1.0,
        render_mode: str | None = None,
        desktop: Desktop | None = None,
        keyboard: Keyboard | None = None,
        launch: str | None = None,
        launch_wait: float | None = None,
        reset_recipe: dict[str, Any] | None = None,
        out_of_play: list[str] | None = None,
        still_steps: int | None = None,
        ignored_keys_steps: int = 100,
    ) -> None:
        _check_options(title, region, fps, render_mode)
        self.title, self.regex, self.region = title, regex, region
        self.keymap = keymap or KeyMap.default()  # KeyMap refuses system combinations unless allowed
        self.fps = float(fps)
        self.max_steps = max_steps
        self.telemetry_wait = telemetry_wait
        self.render_mode = render_mode
        self.spec = gym.envs.registration.EnvSpec(
            "playtester/WindowGame-v0", entry_point=f"{__name__}:WindowGame", nondeterministic=True,
        )
        self._closed = True
        self.desktop = desktop or open_desktop()  # held open: an Xvfb left with no client resets itself
        self._closed = False
        self.grabber = self.sender = self.recipe_sender = self.telemetry = self.launcher = None
        try:
            self.recipe, self.out_of_play = self._harness(reset_recipe, out_of_play, still_steps)
            self.window: WindowInfo | None = self._open_window(launch, launch_wait)
            w, h = size if size is not None else (self.window.width, self.window.height) if self.window else region[2:]  # type: ignore[index]
            self._open_senses(int(w), int(h), keyboard, telemetry_port)
        except BaseException:
            self.close()
            raise
        self.observation_space = gym.spaces.Box(0, 255, shape=(int(h), int(w), 3), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(self.keymap.n)
        self._frame = np.zeros(self.observation_space.shape, dtype=np.uint8)
        self._steps = 0
        self._started = False
        self._crashed = False
        self.ticker = Ticker(self.fps)
        self.late_ticks = 0
        self.keys_watch = IgnoredKeys(ignored_keys_steps)
        self._relaunch = False

    def _open_window(self, launch: str | None, launch_wait: float | None) -> WindowInfo | None:
        """The game's window: launched here with `launch` (and waited for), else found by its
        title; None when only a screen region is captured."""
        if launch is not None:
            from playtester.capture.window.launch import LAUNCH_WAIT, LaunchedGame

            if self.title is None:
                raise UserError("--launch: name the game's window too (window:TITLE), so that it can be found")
            self.launcher = LaunchedGame(launch, title=self.title, regex=self.regex, wait=launch_wait or LAUNCH_WAIT)
            return self.launcher.start(self.desktop)
        return self._find() if self.title is not None else None

    def _open_senses(self, w: int, h: int, keyboard: Keyboard | None, telemetry_port: int | None) -> None:
        """What the env sees and plays through: the frame grabber at `w`×`h`, the key senders (the
        key map's and the reset recipe's) and the telemetry listener when a port is given."""
        from playtester.capture.window.grab import FrameGrabber
        from playtester.capture.window.keys import KeySender
        from playtester.capture.window.telemetry import TelemetryListener

        self.grabber = FrameGrabber(size=(w, h))
        self.sender = KeySender(keyboard or open_keyboard(), self.keymap.keys)
        self.recipe_sender = KeySender(self.sender.keyboard, self.recipe.keys) if self.recipe else None
        self.telemetry = TelemetryListener(telemetry_port) if telemetry_port is not None else None

    @staticmethod
    def _harness(reset_recipe, out_of_play, still_steps):
        """The reset recipe and the out-of-play watch, checked (a `UserError` names a bad one)."""
        from playtester.capture.window.play_state import STILL_STEPS, OutOfPlay
        from playtester.capture.window.reset import ResetRecipe

        recipe = ResetRecipe(reset_recipe["steps"], reset_recipe.get("from", "reset recipe")) if reset_recipe else None
        watch = None
        if recipe is not None or out_of_play:  # without a recipe or screenshots a still picture stays the stuck oracle's
            watch = OutOfPlay(out_of_play or (), still_steps=still_steps or STILL_STEPS)
        return recipe, watch

    # -- the window ----------------------------------------------------------------------------------
    def _find(self) -> WindowInfo:
        spec = f"window:/{self.title}/" if self.regex else f"window:{self.title}"
        return find_window(self.desktop, self.title, regex=self.regex, given_as=f"game {spec!r}",  # type: ignore[arg-type]
                           advice="Start the game first, then give its title after window:")

    @property
    def telemetry_port(self) -> int | None:
        return self.telemetry.port if self.telemetry is not None else None

    def _region(self) -> tuple[int, int, int, int] | None:
        """Where to grab now; None when the window is gone."""
        if self.window is None:
            return self.region
        fresh = self.desktop.window(self.window.handle)
        if fresh is None:
            return None
        self.window = fresh
        if self.region is not None:  # a region inside the window's client area
            x, y, w, h = self.region
            return fresh.left + x, fresh.top + y, w, h
        return fresh.region

    def _gone(self) -> bool:
        """The crash signal: the window vanished, or the process that owns it has ended."""
        if self.window is None:
            return False
        if self.window.pid is not None and not process_alive(self.window.pid):
            return True
        return self.desktop.window(self.window.handle) is None

    def _focus(self) -> bool:
        """Bring the window to the front with the keyboard focus; True when keys will reach it."""
        if self.window is None:
            return True  # a bare region: keys go wherever the focus is
        return self.desktop.has_focus(self.window.handle) or self.desktop.activate(self.window.handle)

    def _observe(self) -> bool:
        """Grab a frame; False when the window has gone."""
        region = self._region()
        if region is None:
            return False
        self._frame = self.grabber.grab(region)  # type: ignore[union-attr]
        return True

    # -- gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._check_open()
        self.sender.release_all()  # type: ignore[union-attr]
        t0 = time.perf_counter()
        launched = False
        if self.title is not None and (self._crashed or self._relaunch or self._gone()):
            if self.launcher is not None:
                self.window = self.launcher.start(self.desktop)  # ends the old game first; a UserError if it will not start
                launched = True
            else:
                self.window = self._find()  # the game was started again; a UserError says if not
        self._crashed = self._relaunch = False
        failed = self._play_recipe() if self.recipe is not None else None
        if failed is not None and self.launcher is not None:  # one finding, then a fresh start
            self.window = self.launcher.start(self.desktop)
            launched = True
            again = self._play_recipe()
            if again is not None:
                raise ResetMissedPlay(failed, again)
        self._steps = 0
        self._started = True
        if self.out_of_play is not None:
            self.out_of_play.reset()
        focused = self._focus()
        if not self._observe():
            self._crashed = True
        else:
            self.keys_watch.remember(self._frame)
        if self.telemetry is not None:
            self.telemetry.drop_events()
            self.telemetry.wait_for_first(self.telemetry_wait)
        self.ticker.restart()
        info = self._info(focused)
        if self.recipe is not None or launched:
            info.update(reset_seconds=round(time.perf_counter() - t0, 3), launched=launched)
        if failed is not None:
            info["reset_failed"] = failed
        return self._frame.copy(), info

    def _play_recipe(self) -> str | None:
        """Play the reset recipe at the control rate; why it did not reach play, or None."""
        assert self.recipe is not None and self.recipe_sender is not None
        sender = self.recipe_sender

        def hold(keys) -> None:
            sender.hold(keys if self._focus() else ())

        def tick() -> np.ndarray:
            self.ticker.wait()
            if self._gone() or not self._observe():
                raise _GameGone
            return self._frame

        self.ticker.restart()
        try:
            failed = self.recipe.play(hold, tick)
        except _GameGone:
            failed = f"{self.recipe.given_as}: the game's window closed during the reset"
        finally:
            sender.release_all()
        if failed is None and self.out_of_play is not None and self.out_of_play.references and self._observe():
            found = self.out_of_play.matching(self._frame)
            if found is not None:
                failed = (f"{self.recipe.given_as}: after its last step the screen still matches {found[0]} "
                          f"(SSIM {found[1]:.2f}), not play")
        return failed

    def step(self, action):
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        if self._crashed:
            raise RuntimeError("the game crashed in this episode; call reset() before step()")
        t0 = time.perf_counter()
        try:
            focused = False
            keys: tuple = ()
            if not self._gone():
                focused = self._focus()
                # Keys only reach the game when it has the focus; otherwise nothing is held.
                keys = tuple(self.keymap.keys_for(int(action))) if focused else ()
                self.sender.hold(keys)  # type: ignore[union-attr]
            self.late_ticks += self.ticker.wait() > 0
            crashed = self._gone() or not self._observe()
        except BaseException:
            self.sender.release_all()  # type: ignore[union-attr]
            raise
        self._steps += 1
        if crashed:
            self._crashed = True
            self.sender.release_all()  # type: ignore[union-attr]
        truncated = bool(self.max_steps is not None and self._steps >= self.max_steps and not crashed)
        info = self._info(focused)
        info["step_time_ms"] = (time.perf_counter() - t0) * 1000.0
        if crashed:
            info["crash_reason"] = self._crash_reason()
        terminated = crashed
        left = self.out_of_play.observe(self._frame) if self.out_of_play is not None and not crashed else None
        if left is not None:  # game over, a menu: the episode ends here, the next reset plays the recipe
            self.sender.release_all()  # type: ignore[union-attr]
            terminated, truncated = True, False
            info["out_of_play"] = left
            info["out_of_play_steps"] = 1 if self.out_of_play.references else self.out_of_play.still_steps
            if not self.out_of_play.references and not self.out_of_play.moved and self.recipe is not None:
                info["reset_failed"] = f"{self.recipe.given_as} did not bring the game to play: {left}"
                self._relaunch = self.launcher is not None
        elif not crashed and self.keys_watch.still_ignored(self._frame, bool(keys)):
            info["keys_ignored"] = self.keys_watch.keyed_steps
        return self._frame.copy(), 0.0, terminated, truncated, info

    def release_keys(self) -> None:
        """Let go of the held keys between steps (a replay of a recording with idle moments)."""
        self.sender.release_all()  # type: ignore[union-attr]

    def _crash_reason(self) -> str:
        """Why the game counts as crashed, in words."""
        if self.window is not None and self.window.pid is not None and not process_alive(self.window.pid):
            return f"the game's process {self.window.pid} ended"
        return "the game's window closed"

    def _info(self, focused: bool) -> dict[str, Any]:
        info: dict[str, Any] = {"step": self._steps, "crashed": self._crashed, "focused": bool(focused)}
        if self.window is not None:
            info["window"] = {"title": self.window.title, "pid": self.window.pid, "region": list(self.window.region)}
        if self.telemetry is not None:
            info.update(self.telemetry.poll())
        return info

    def render(self):
        return self._frame.copy() if self.render_mode == "rgb_array" else None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this WindowGame is closed")

    def close(self) -> None:
        """Release every held key, then let go of the display, the grabber and the telemetry port."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.recipe_sender is not None:
                self.recipe_sender.release_all()
            if self.sender is not None:
                self.sender.close()
        finally:
            if self.launcher is not None:
                self.launcher.stop()
            for part in (self.telemetry, self.grabber, self.desktop):
                if part is not None:
                    part.close()


class ResetMissedPlay(UserError):
    """The reset recipe missed play, and again right after the game was launched anew."""

    def __init__(self, first: str, again: str) -> None:
        super().__init__(f"the reset recipe did not bring the game to play, nor after launching it again: {again}")
        self.first = first
        """Why it missed the first time: a finding of its own."""


class _GameGone(Exception):
    """The game's window or process went away during a reset recipe."""
