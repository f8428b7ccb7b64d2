"""Where the recorder's frames come from: a game's window, or a `doom:` game in the engine's window.

A source's `tick(recording, held)` waits for the next sample and returns a `Sample`: the frame
seen, the key-map keys held on it, telemetry; or None when there is nothing to label (the engine
waits while no action key is held, so that each of its steps has a label).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from playtester.capture.keymap import KeyMap
from playtester.capture.window.ticker import Ticker

if TYPE_CHECKING:
    from playtester.capture.window.record_config import RecorderConfig


@dataclass
class Sample:
    """One sampled moment: the frame seen, the key-map keys held on it (press order), telemetry."""

    frame: np.ndarray
    keys: list[str]
    telemetry: dict[str, Any]


class SourceGone(Exception):
    """The game's window or process went away; the recording stops, keeping what it has."""


class WindowSource:
    """Frames grabbed from a game's window; held keys count only while it has the focus."""

    kind = "window"

    def __init__(self, cfg: RecorderConfig) -> None:
        from playtester.capture.window.grab import FrameGrabber
        from playtester.capture.window.desktops import open_desktop
        from playtester.capture.window.platform import find_window
        from playtester.capture.window.telemetry import TelemetryListener

        self.cfg = cfg
        self.desktop = open_desktop()
        self.grabber = self.telemetry = self.launcher = None
        try:
            if cfg.launch is not None:
                from playtester.capture.window.launch import LaunchedGame

                self.launcher = LaunchedGame(cfg.launch, title=cfg.window, regex=cfg.regex)  # type: ignore[arg-type]
                self.window = self.launcher.start(self.desktop)
            else:
                self.window = find_window(self.desktop, cfg.window, regex=cfg.regex) if cfg.window else None
            region = self._region()
            size = cfg.size or (region[2], region[3])
            self.grabber = FrameGrabber(size=size)
            self.telemetry = TelemetryListener(cfg.telemetry_port) if cfg.telemetry_port is not None else None
        except BaseException:
            self.close()
            raise
        self.game = f"window:{cfg.window}" if cfg.window else "window:"
        self.fps = cfg.fps
        self.ticker = Ticker(cfg.fps)
        self.dropped = 0

    def _region(self) -> tuple[int, int, int, int]:
        if self.window is None:
            return self.cfg.region  # type: ignore[return-value]
        fresh = self.desktop.window(self.window.handle)
        if fresh is None:
            raise SourceGone(f"the window {self.window.title!r} has closed")
        self.window = fresh
        if self.cfg.region is not None:
            x, y, w, h = self.cfg.region
            return fresh.left + x, fresh.top + y, w, h
        return fresh.region

    def episode_meta(self, seed: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"source": self.kind}
        if self.window is not None:
            meta["window"] = {"title": self.window.title, "pid": self.window.pid}
        if self.cfg.region is not None:
            meta["region"] = list(self.cfg.region)
        if self.cfg.launch is not None:  # replay starts the game the same way
            meta["game_options"] = {"launch": self.cfg.launch}
        return meta

    def start_episode(self, seed: int) -> None:
        self.ticker.restart()

    def tick(self, recording: bool, held: list[str]) -> Sample | None:
        from playtester.capture.window.platform import process_alive

        missed = self.ticker.wait()
        self.dropped += missed if recording else 0
        if self.window is not None and self.window.pid is not None and not process_alive(self.window.pid):
            raise SourceGone(f"the process of {self.window.title!r} (pid {self.window.pid}) has ended")
        frame = self.grabber.grab(self._region())  # type: ignore[union-attr]
        focused = self.window is None or self.desktop.has_focus(self.window.handle)
        keys = [k for k in held if k in self.cfg.keymap.keys] if focused else []
        telemetry = self.telemetry.poll() if self.telemetry is not None else {}
        return Sample(frame, keys, telemetry)

    def relaunch(self) -> bool:
        """Start a launched game again after a crash; False when the recorder did not launch it."""
        if self.launcher is None:
            return False
        self.window = self.launcher.start(self.desktop)
        return True

    def close(self) -> None:
        if self.launcher is not None:
            self.launcher.stop()
        for part in (self.telemetry, self.grabber, self.desktop):
            if part is not None:
                part.close()


class DoomSource:
    """A `doom:` game in the engine's own window.

    By default the engine obeys the recorder: each step it applies the action that the held keys
    stand for (the human's keys reach the engine only through the label), so the episode is
    exactly what the engine did and `playtester replay` reproduces it bit for bit. With
    `spectator=True` the engine reads the keyboard itself (ViZDoom's spectator mode) and the label
    comes from the buttons it applied; its input timing differs from the programmatic mode (no
    spawn delay after a new episode, a tic of latency), so such episodes replay only roughly.
    While recording, the engine waits whenever no action's keys are held, so that every step it
    takes has a label.
    """

    def __init__(self, cfg: RecorderConfig) -> None:
        from playtester.capture.doom import KEY_BUTTONS, TICRATE
        from playtester.capture.games import make_game
        from playtester.capture.window.doom_spectator import open_spectator

        self.cfg = cfg
        self.spectator = cfg.spectator
        self.kind = "doom-spectator" if cfg.spectator else "doom-window"
        self.frame_skip = max(1, round(TICRATE / cfg.fps))
        self.fps = TICRATE / self.frame_skip
        self.ticker = Ticker(self.fps)
        self.game = cfg.game
        if cfg.spectator:
            self.env = open_spectator(cfg.game, keymap=cfg.keymap, resolution=cfg.resolution, frame_skip=self.frame_skip)  # type: ignore[arg-type]
        else:
            self.env = make_game(
                cfg.game, keymap=cfg.keymap, render_mode="human", resolution=cfg.resolution, frame_skip=self.frame_skip,  # type: ignore[arg-type]
            )
        self._button_keys = [[k for k in cfg.keymap.keys if KEY_BUTTONS[k] == b] for b in self.env.buttons]
        self._noop = noop_action(cfg.keymap)
        self.dropped = 0
        self.inexact = 0
        self.desktop, self.window = self._engine_window()
        self.frame, self.info = self.env.reset(seed=cfg.seed)

    def _engine_window(self):
        """The engine's window (its process is a child of this one), to count keys only while it
        has the focus; `(None, None)` where the desktop cannot say."""
        from playtester.capture.window.desktops import open_desktop
        from playtester.capture.window.platform import child_of_this_process

        desktop = open_desktop()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            mine = [w for w in desktop.windows() if w.pid is not None and child_of_this_process(w.pid)]
            if mine:
                return desktop, mine[-1]
            time.sleep(0.1)
        desktop.close()
        return None, None

    def _focused(self) -> bool:
        return self.window is None or self.desktop.has_focus(self.window.handle)

    def episode_meta(self, seed: int) -> dict[str, Any]:
        options: dict[str, Any] = {"resolution": self.cfg.resolution, "frame_skip": self.frame_skip}
        if self.spectator:
            options["random_start"] = False
        return {"source": self.kind, "reset": {"seed": int(seed), "options": {}}, "game_options": options}

    def start_episode(self, seed: int) -> None:
        self.frame, self.info = self.env.reset(seed=seed)
        self.inexact = 0
        self.ticker.restart()

    def tick(self, recording: bool, held: list[str]) -> Sample | None:
        import vizdoom as vzd

        keymap = self.cfg.keymap
        # Keys typed into another window are not the player's (the engine would not hear them).
        held = [k for k in held if k in keymap.keys] if self._focused() else []
        action = keymap.action_for_keys(held)
        if action is None:
            action = self._noop
        if action is None and (recording or not self.spectator):
            # Nothing to label: the engine waits while no action key is held.
            if self.spectator:
                time.sleep(self.ticker.period)
            else:
                self.ticker.wait()
            return None
        before, before_info = self.frame, self.info
        try:
            if self.spectator:
                keys = self._spectator_step(held, recording)
            else:
                missed = self.ticker.wait()
                self.dropped += missed if recording else 0
                self.frame, _, terminated, _, self.info = self.env.step(action)
                if terminated:
                    raise SourceGone("the level ended")
                keys = held
        except vzd.ViZDoomIsNotRunningException:
            raise SourceGone("the engine's window was closed") from None
        telemetry = {k: v for k, v in before_info.items() if k not in ("step", "frame_time_ms")}
        return Sample(before, keys, telemetry)

    def _spectator_step(self, held: list[str], recording: bool) -> list[str]:
        """Let the engine run a step on the human's input; the keys are the buttons it applied."""
        game = self.env.game
        game.advance_action(self.frame_skip)  # paced by the engine in real time
        if game.is_episode_finished():
            raise SourceGone("the level ended")
        applied = {k for value, keys in zip(game.get_last_action(), self._button_keys) if value for k in keys}
        keys = [k for k in held if k in applied] + sorted(applied - set(held))
        state = game.get_state()
        self.frame, self.info = self.env._observe(state).copy(), self.env._info(state, 0.0)
        label = self.cfg.keymap.action_for_keys(keys)
        if recording and (label is None or set(self.cfg.keymap.keys_for(label)) != applied):
            self.inexact += 1  # a combination the key map has no action for: replay differs from here
        return keys

    def relaunch(self) -> bool:
        return False  # the engine's window is the recorder's own: a closed one ends the recording

    def close(self) -> None:
        self.env.close()
        if self.desktop is not None:
            self.desktop.close()


def noop_action(keymap: KeyMap) -> int | None:
    """The key map's no-op action (one that holds no key), if it has one."""
    return next((i for i, a in enumerate(keymap.actions) if not a.keys), None)
