"""Commands for playing real windows: `record` (human demos) and `replay` (an episode again)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from playtester.errors import UserError
from playtester.commands.options import (
    MANY, Count, FrameSize, InFolder, NameOrFile, Number, OutFolder, Seed, Text, about, argument, frame_size, inputs_checked, option,
)

console = Console()


def record(
    out: Path = option(OutFolder(), ..., "--out", help="Folder for the episodes (created; its parent must exist)."),
    behavior: str = option(Text(), ..., "--behavior", help="What the demos show, e.g. inspect or path."),
    window: Optional[str] = option(Text(), None, "--window", help="The game's window: a part of its title."),
    game: Optional[str] = option(Text(), None, "--game", help="Or a doom: game, played in the engine's own window."),
    regex: bool = typer.Option(False, "--regex", help="--window is a regular expression."),
    region: Optional[str] = option(Text(), None, "--region", help="X,Y,W,H: grab this screen region (inside the window with --window)."),
    fps: float = option(Number(0.0, 1000.0, above=True), 10.0, "--fps", help="Frames sampled per second."),
    size: Optional[str] = option(FrameSize(), None, "--size", help="Frame size WxH (default: the window's)."),
    keymap: str = option(NameOrFile(("default",), "key map YAML"), "default", "--keymap", help="Key map YAML (default: W A S D, arrows, Space)."),
    start_key: str = option(Text(), "f8", "--start-key", help="Hotkey: start / stop an episode."),
    discard_key: str = option(Text(), "f9", "--discard-key", help="Hotkey: discard the episode being recorded."),
    quit_key: str = option(Text(), "f10", "--quit-key", help="Hotkey: quit."),
    max_steps: Optional[int] = option(Count(1, MANY), None, "--max-steps", help="Stop an episode after this many frames."),
    seed: int = option(Seed(), 0, "--seed", help="With --game: seed of the first episode."),
    resolution: str = option(FrameSize(), "320x240", "--resolution", help="With --game: engine resolution."),
    spectator: bool = typer.Option(False, "--spectator", help="With --game: the engine reads the keyboard itself (ViZDoom spectator mode; replays only roughly)."),
    telemetry_port: Optional[int] = option(Count(1, 65535), None, "--telemetry-port", help="Merge JSON telemetry sent to this UDP port."),
    launch: Optional[str] = option(Text(), None, "--launch", help="The command that starts the game (with --window, its window's title): started here, ended when you quit (also if playtester is killed), started again after a crash, which keeps the episode being recorded."),
) -> None:
    """Record human demos: play the game; F8 starts and stops an episode, F9 discards it, F10 quits.

    Each frame is labelled with the action of the keys held (all of an action's keys held; the
    action with most keys wins; ties go to the latest press). A status line shows the state,
    episodes, frames, the achieved fps and dropped frames.
    """
    from playtester.capture.keymap import load_keymap
    from playtester.capture.window.platform import parse_region
    from playtester.capture.window.recorder import Hotkeys, Recorder, RecorderConfig
    from playtester.datasets.episodes import open_episode

    with about("--keymap"):
        km = load_keymap(keymap)
    if launch is not None:
        from playtester.capture.window.launch import launch_argv

        launch_argv(launch)  # a command that names no program is refused before anything starts
    cfg = RecorderConfig(
        out=out, behavior=behavior, keymap=km, window=window, game=game, regex=regex,
        region=parse_region(region) if region else None, fps=fps, size=frame_size(size) if size else None,
        resolution=resolution, hotkeys=Hotkeys.parse(start_key, discard_key, quit_key, km), seed=seed,
        max_steps=max_steps, telemetry_port=telemetry_port, spectator=spectator, launch=launch,
    )
    recorder = Recorder(cfg, open_episode)
    inputs_checked()
    kept = recorder.run()
    console.print(f"{len(kept)} episode(s) kept in {out}")


def replay(
    episode: Path = argument(InFolder("episode folder"), "episode", help="An episode folder (frames.npy, steps.jsonl, meta.json), or a run's finding folder."),
    game: Optional[str] = option(Text(), None, "--game", help="Game spec to replay on (default: the episode's own)."),
    speed: float = option(Number(0.0, 1000.0), 1.0, "--speed", help="Timing factor: 1 the recorded timing, 2 twice as fast, 0 no waiting."),
    strict: bool = typer.Option(False, "--strict", help="Exit with status 1 unless every frame matches the recording."),
) -> None:
    """Send a recorded episode's actions again, at its recorded timing, and compare the frames.

    On a deterministic backend (doom:, gym:) a faithful episode is reproduced bit for bit.
    """
    from playtester.capture.games import make_game
    from playtester.capture.replay import check_actions, replay_episode, replay_options
    from playtester.datasets.episodes import Episode

    if (episode / "finding.json").exists():  # a finding of a run: replay the trace that led to it
        from playtester.bugs.findings import replay_finding

        found = replay_finding(episode, game)
        if strict and found.compared == 0:
            raise UserError(f"--strict: finding {episode} holds no frames to compare with (its frames.npy is missing); "
                            "replay it without --strict, or from a run that kept its frames")
        console.print(f"replayed {found.steps} steps of finding {episode}: "
                      f"{found.identical} of {found.compared} frames identical"
                      + (f" (first difference after action {found.first_mismatch})" if found.first_mismatch is not None else ""))
        if strict and found.identical != found.compared:
            raise typer.Exit(1)
        return
    ep = Episode.open(episode)
    spec = game or str(ep.meta.get("game", ""))
    if not spec:
        raise UserError(f"episode {episode}: its meta.json names no game; give --game SPEC")
    env = make_game(spec, keymap=ep.keymap, **replay_options(ep.meta, spec))
    try:
        check_actions([step.get("action") for step in ep.steps], env, f"episode {episode}")
        inputs_checked()
        result = replay_episode(ep, env, speed=speed, sync=10.0 if spec.startswith("window:") else 0.0)
    finally:
        env.close()
    for note in result.notes:
        console.print(f"note: {note}")
    line = f"replayed {result.steps} steps of {ep.name} on {spec}"
    if result.compared:
        line += f": {result.identical} of {result.compared} frames identical, {result.alike} alike"
        if result.first_mismatch is not None:
            line += f" (first difference at frame {result.first_mismatch})"
    console.print(line)
    if strict and not result.exact:
        raise typer.Exit(1)
