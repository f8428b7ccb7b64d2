"""What `playtester record` is asked to do (`RecorderConfig`) and the hotkeys it listens for,
apart from the recorder so that the frame sources can read them without importing it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap, normalise_key


@dataclass(frozen=True)
class Hotkeys:
    """The recorder's hotkeys, as canonical key names."""

    start_stop: str = "f8"
    """Start an episode, or stop and keep the one being recorded."""
    discard: str = "f9"
    """Stop and throw away the episode being recorded."""
    quit: str = "f10"
    """Quit (an episode being recorded is kept)."""

    @classmethod
    def parse(cls, start_stop: str, discard: str, quit: str, keymap: KeyMap) -> "Hotkeys":
        names = {}
        for option, value in (("--start-key", start_stop), ("--discard-key", discard), ("--quit-key", quit)):
            names[option] = normalise_key(value, where=f"hotkey {option}")
        if len(set(names.values())) < 3:
            raise UserError(f"hotkeys {', '.join(f'{k} {v}' for k, v in names.items())}: use three different keys")
        for option, key in names.items():
            if key in keymap.keys:
                raise UserError(f"hotkey {option} {key}: the key map {keymap.name!r} uses it for playing; choose another key")
        return cls(*names.values())


@dataclass
class RecorderConfig:
    """What `playtester record` was asked to do."""

    out: Path
    """Folder the episodes go to (created when missing; its parent must exist)."""
    behavior: str
    """The behaviour tag the demos show (`inspect`, `path`, …), saved in each episode."""
    keymap: KeyMap
    window: str | None = None
    """Title (substring, or a regular expression with `regex`) of the game's window."""
    game: str | None = None
    """A `doom:` spec to play in the engine's own window instead of a foreign window."""
    regex: bool = False
    region: tuple[int, int, int, int] | None = None
    """Screen region to grab when the window cannot be found by title (or inside it, with a title)."""
    fps: float = 10.0
    """Frames per second sampled (for `doom:` games, 35 / the nearest whole number of tics)."""
    size: tuple[int, int] | None = None
    """Frame size `(width, height)`; default the window's size when recording starts."""
    resolution: str = "320x240"
    """Engine resolution for `doom:` games."""
    hotkeys: Hotkeys = field(default_factory=Hotkeys)
    seed: int = 0
    """Seed of the first `doom:` episode; each next episode adds one."""
    max_steps: int | None = None
    """Stop (and keep) an episode after this many frames."""
    telemetry_port: int | None = None
    """Merge telemetry the game sends to this UDP port into the steps."""
    spectator: bool = False
    """For `doom:` games: let the engine read the keyboard itself (ViZDoom's spectator mode)."""
    launch: str | None = None
    """The command that starts the game: started here, ended with the recording, started again after a crash."""

    def __post_init__(self) -> None:
        if self.window is not None and self.game is not None:
            raise UserError("record: give --window TITLE (a game's window) or --game doom:… (the engine's window), not both")
        if self.window is None and self.game is None and self.region is None:
            raise UserError("record: give --window TITLE (a game's window), --region X,Y,W,H or --game doom:…")
        if self.launch is not None and self.window is None:
            raise UserError("record --launch: give --window TITLE too, the title of the window the game opens")
        if self.game is not None and not self.game.startswith("doom:"):
            raise UserError(f"--game {self.game!r}: the recorder plays doom: games in the engine's window; use --window for others")
        if not self.fps > 0:
            raise UserError(f"--fps {self.fps}: use a positive number of frames per second")
        if not self.behavior.strip():
            raise UserError("--behavior: give a tag for what the demos show, e.g. inspect or path")
