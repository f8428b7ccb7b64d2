"""The capture app behind `playtester record`: a human plays, the recorder writes demo episodes.

It samples frames at a fixed rate and labels each with the action of the keys held at that
moment, by the key map's rule (`KeyMap.action_for_keys`: every key of an action held; the action
with most keys wins; on a tie, the most recently pressed). Keys outside the key map are ignored.
A moment when no action's keys are held is labelled with the key map's no-op action (one with no
keys) when it has one; otherwise nothing is written for it and the status line counts it as idle.

Hotkeys (defaults F8 start/stop an episode, F9 discard it, F10 quit) are heard whichever window
has the focus. Each episode is written to `NAME.partial/` and renamed when it stops, so a crash
loses only the episode being recorded. Quitting, or Ctrl-C, while recording keeps the episode.

Two sources of frames:
- a window (`--window TITLE`): screen grabs of its client area; keys count only while the
  window has the focus; the episode ends if the window's process dies. With `--launch COMMAND`
  the recorder starts the game itself, ends it when it quits, and after a crash keeps the
  episode, starts the game again and waits for the next episode's hotkey.
- the engine's own window (`--game doom:…`): the engine's frames; the engine applies exactly the
  labelled action each step (or, with `--spectator`, reads the keyboard itself in ViZDoom's
  spectator mode), and waits while no action's keys are held, so that every step it takes has
  its label and `playtester replay` reproduces the frames (see `DoomSource`).
"""

from __future__ import annotations

import logging
import queue
import sys
import time
from pathlib import Path
from typing import Any, Callable


from playtester.errors import UserError
from playtester.capture.window.record_config import RecorderConfig
from playtester.capture.window.sources import DoomSource, Sample, SourceGone, WindowSource, noop_action

log = logging.getLogger(__name__)

LABEL_RULE = (
    "an action matches when all its keys are held; most keys wins; ties go to the most recent press; "
    "no match: the no-op action if the key map has one, else the moment is not recorded"
)


class StatusLine:
    """One line on stderr: rewritten in place on a terminal, printed once a second otherwise."""

    def __init__(self, stream=None, every: float = 1.0) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every
        self._last = 0.0
        self._text = ""

    def show(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            if text != self._text:
                self.stream.write("\r" + text.ljust(len(self._text)))
                self.stream.flush()
        elif force or now - self._last >= self.every:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last = now
        self._text = text

    def done(self) -> None:
        if self.tty and self._text:
            self.stream.write("\n")
            self.stream.flush()


class Recorder:
    """Runs the capture loop until the quit hotkey (or Ctrl-C); returns the episodes kept."""

    def __init__(self, cfg: RecorderConfig, open_episode: Callable[..., Any], *, status: StatusLine | None = None) -> None:
        """`open_episode(out, game=, behavior=, keymap=, fps=, extra=)` starts an episode's writer
        in `out` (the episode format lives above capture: `datasets.episodes.open_episode`)."""
        self.cfg = cfg
        self.open_episode = open_episode
        self.status = status or StatusLine()
        self.commands: "queue.Queue[str]" = queue.Queue()
        self.kept: list[Path] = []
        self.discarded = 0
        self.writer = None
        self._noop = noop_action(cfg.keymap)
        self._seed = cfg.seed

    # -- hotkeys arrive on the listener's thread; the loop acts on them ----------------------------
    def _hotkey_handlers(self) -> dict[str, Any]:
        hk = self.cfg.hotkeys
        return {
            hk.start_stop: lambda: self.commands.put("toggle"),
            hk.discard: lambda: self.commands.put("discard"),
            hk.quit: lambda: self.commands.put("quit"),
        }

    def run(self) -> list[Path]:
        from playtester.capture.window.keys import KeyListener

        cfg = self.cfg
        if not cfg.out.parent.exists():
            raise UserError(f"--out {cfg.out}: its parent folder {cfg.out.parent} does not exist; create it first")
        source = DoomSource(cfg) if cfg.game else WindowSource(cfg)
        listener = KeyListener(self._hotkey_handlers())
        self.source = source
        try:
            listener.start()
            hk = cfg.hotkeys
            log.info(
                "recording %s into %s at %.1f fps: %s starts/stops an episode, %s discards it, %s quits",
                source.game, cfg.out, source.fps, hk.start_stop.upper(), hk.discard.upper(), hk.quit.upper(),
            )
            while True:
                try:
                    self._loop(source, listener)
                    break
                except SourceGone as e:
                    if self.writer is not None:
                        self.writer.meta["crashed"] = True
                        self._stop(keep=True)  # what was played before the crash is kept
                    if not source.relaunch():
                        log.warning("%s; stopping", e)
                        break
                    log.warning("%s; the game was started again (%s starts an episode)", e, cfg.hotkeys.start_stop.upper())
        finally:
            try:
                if self.writer is not None:
                    self._stop(keep=True)  # quitting or Ctrl-C while recording keeps the episode
            finally:
                listener.stop()
                source.close()
                self.status.done()
        return self.kept

    def _loop(self, source, listener) -> None:
        while True:
            while not self.commands.empty():
                command = self.commands.get()
                if command == "quit":
                    return
                if command == "toggle":
                    if self.writer is not None:
                        self._stop(keep=True)
                    else:
                        self._start(source)
                elif command == "discard" and self.writer is not None:
                    self._stop(keep=False)
            sample = source.tick(self.writer is not None, listener.held())
            if self.writer is not None:
                self._record(sample)
                if self.cfg.max_steps is not None and self.writer is not None and self.writer.n >= self.cfg.max_steps:
                    self._stop(keep=True)
            self.status.show(self._status_text(source))

    def _start(self, source) -> None:
        self.cfg.out.mkdir(exist_ok=True)
        seed = self._seed
        self._seed += 1
        source.start_episode(seed)
        source.dropped = 0
        # started_at (Unix time) + a step's `time` is when its frame was taken: to line steps up
        # with the game's own logs.
        started_at, self._t0 = time.time(), time.perf_counter()
        extra = {**source.episode_meta(seed), "label_rule": LABEL_RULE, "started_at": started_at}
        self.writer = self.open_episode(
            self.cfg.out, game=source.game, behavior=self.cfg.behavior, keymap=self.cfg.keymap, fps=source.fps, extra=extra,
        )
        self._ticks = 0
        self._idle = 0
        self.status.show(self._status_text(source), force=True)

    def _record(self, sample: Sample | None) -> None:
        self._ticks += 1
        action = None
        if sample is not None:
            action = self.cfg.keymap.action_for_keys(sample.keys)
            if action is None:
                action = self._noop
        if action is None:
            self._idle += 1
            return
        self.writer.add(  # type: ignore[union-attr]
            sample.frame, action, keys=sample.keys, time=round(time.perf_counter() - self._t0, 4), **sample.telemetry,
        )

    def _stop(self, *, keep: bool) -> None:
        writer, self.writer = self.writer, None
        if writer is None:
            return
        source = self.source
        elapsed = time.perf_counter() - self._t0
        writer.meta.update(
            dropped=int(source.dropped), idle=int(self._idle),
            achieved_fps=round(self._ticks / elapsed, 2) if elapsed > 0 else 0.0,
        )
        if hasattr(source, "inexact"):
            writer.meta["inexact_steps"] = int(source.inexact)
        if not keep:
            writer.discard()
            self.discarded += 1
            log.info("discarded %s", writer.final.name)
            return
        if writer.n == 0:
            writer.discard()
            log.info("%s had no labelled frames; nothing kept", writer.final.name)
            return
        path = writer.close()
        self.kept.append(path)
        log.info("kept %s: %d frames", path, writer.n)

    def _status_text(self, source) -> str:
        hk = self.cfg.hotkeys
        keys = f"{hk.start_stop.upper()} start/stop · {hk.discard.upper()} discard · {hk.quit.upper()} quit"
        if self.writer is None:
            return f"○ ready | episodes {len(self.kept)} | {keys}"
        elapsed = max(time.perf_counter() - self._t0, 1e-6)
        return (
            f"● REC {self.writer.final.name} | episodes {len(self.kept)} | frames {self.writer.n} | "
            f"{self._ticks / elapsed:.1f} fps | dropped {source.dropped} | idle {self._idle} | {keys}"
        )

