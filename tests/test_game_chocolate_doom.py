"""A real first-person 3D game nobody here wrote: Chocolate Doom (Debian's `chocolate-doom`)
playing Freedoom: Phase 2 (Debian's `freedoom`), on a virtual screen (Xvfb, started here).

Why this game: a real Doom source port, small (4 MB, and 16 MB of game data), drawn by SDL2's
software renderer in a 320×240 window with no sound device, and the first-person case the
tester was built for. Its key bindings are a config file; the test writes one that binds the
default key map (W A S D to move and strafe, the arrows to turn, Space to use), which is all a
studio's build needs too (docs/your-own-game.md).

`record --launch` (keys typed by xdotool as a stand-in for a person), `replay` (the game launched
again as the episode says; frames compared), `run window` with the random and PPGTA explorers
ending at a report, and Ctrl-C or SIGKILL during a run: no key held, no game left running.
Skipped, with the reason, where Xvfb, xdotool or the game is missing.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_window_display import desktop_keys_down, display, start_recorder, type_schedule, wait_for_window, xdotool  # noqa: F401

from playtester.cli import main
from playtester.tester.runlog import read_jsonl

pytestmark = [pytest.mark.display, pytest.mark.slow]

GAME = "/usr/games/chocolate-doom"
IWAD = "/usr/share/games/doom/freedoom2.wad"
TITLE = "Chocolate Doom"  # the window is titled "Freedoom: Phase 2 - Chocolate Doom 3.0.0"
KEYS = {"key_up": 17, "key_down": 31, "key_strafeleft": 30, "key_straferight": 32, "key_left": 75, "key_right": 77,
        "key_use": 57, "key_fire": 29, "use_mouse": 0}
"""Chocolate Doom's bindings (keyboard scan codes) for the default key map: W S A D, ← →, Space."""
SCREEN = {"fullscreen": 0, "window_width": 320, "window_height": 240, "grabmouse": 0, "show_endoom": 0}
MOVES = {"w", "a", "s", "d", "left", "right", "up", "down", "space"}


@pytest.fixture(scope="module")
def doom(display, tmp_path_factory):  # noqa: F811
    """The command that starts Chocolate Doom on MAP01 in a 320×240 window, with its config."""
    if not (Path(GAME).exists() and Path(IWAD).exists()):
        pytest.skip("Chocolate Doom or Freedoom is not installed (Debian: apt-get install --no-install-recommends "
                    "chocolate-doom freedoom; .ci/run does)")
    home = tmp_path_factory.mktemp("doom")
    (home / "default.cfg").write_text("".join(f"{k} {v}\n" for k, v in KEYS.items()))
    (home / "chocolate-doom.cfg").write_text("".join(f"{k} {v}\n" for k, v in SCREEN.items()))
    return (f"env SDL_AUDIODRIVER=dummy SDL_RENDER_DRIVER=software HOME={home} {GAME} -iwad {IWAD} "
            f"-config {home / 'default.cfg'} -extraconfig {home / 'chocolate-doom.cfg'} -window -nosound -nomusic "
            "-warp 1 -skill 2")


def doom_windows() -> list:
    from playtester.capture.window.x11 import X11Desktop

    desktop = X11Desktop()
    try:
        return [w for w in desktop.windows() if TITLE in w.title]
    finally:
        desktop.close()


def test_record_with_launch_then_replay(doom, tmp_path):
    from playtester.datasets.episodes import load_episodes

    out = tmp_path / "demos"
    # Doom uses F1-F12 itself (F8 toggles its messages, F10 asks to quit): hotkeys it leaves alone
    hotkeys = ["--start-key", "insert", "--discard-key", "delete", "--quit-key", "end"]
    proc = start_recorder(["--launch", doom, "--window", TITLE, "--behavior", "path", "--out", str(out), "--fps", "10",
                           *hotkeys], tmp_path)
    try:
        xdotool("windowfocus", wait_for_window(TITLE))
        time.sleep(1.0)  # the level's opening screen wipe
        xdotool("key", "Insert")
        type_schedule([(["w"], 1.2, "forward"), (["left"], 0.8, "turn_left"), (["d"], 0.8, "strafe_right")])
        xdotool("key", "End")
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert not doom_windows(), "the recorder ended the game it launched"
    (episode,) = load_episodes(out, strict=True)
    names = {episode.keymap.names[a] for a in episode.actions}
    assert {"forward", "turn_left", "strafe_right"} <= names and len(episode) >= 25
    assert episode.meta["game_options"] == {"launch": doom}

    replay = subprocess.run([sys.executable, "-m", "playtester", "replay", str(episode.path)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    said = " ".join(replay.stdout.split())
    compared, alike = map(int, re.search(r"of (\d+) frames identical, (\d+) alike", said).groups())
    assert compared == len(episode) and alike >= 0.4 * compared, said  # a live game: docs/your-own-game.md
    assert not doom_windows(), "replay ended the game it launched"


@pytest.mark.parametrize("explorer", ["random", "ppgta"])
def test_run_window_ends_at_a_report(doom, tiny_parts, tmp_path, explorer, capsys):
    out = tmp_path / "run"
    args = ["run", "window", "--game", f"window:{TITLE}", "--launch", doom, "--explorer", explorer, "--episodes", "2",
            "--steps", "12", "--out", str(out)]
    if explorer == "ppgta":  # a tiny path policy from the park: PPO starts from it and learns as it plays
        config = tmp_path / "knobs.yaml"
        config.write_text("rollout: 8\n")
        args += ["--preference", str(tiny_parts("path")[2]), "--config", str(config)]
    assert main(args) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["steps"] == 24
    assert summary["coverage"]["frame_cells"] > 2, "the view changed as the explorer played"
    assert (out / "report.html").exists()
    if explorer == "ppgta":
        assert (out / "explorer" / "checkpoints" / "last.ckpt").exists()
    assert not doom_windows() and desktop_keys_down().isdisjoint(MOVES)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_ctrl_c_or_kill_mid_run_leaves_no_key_held_and_no_game(doom, tmp_path, sig):
    from playtester.capture.window.launch import group_alive

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "playtester", "run", "window", "--game", f"window:{TITLE}",
                             "--launch", doom, "--explorer", "random", "--episodes", "3", "--steps", "200", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list(read_jsonl(out / "trajectory.jsonl"))) < 15:
            time.sleep(0.2)
        (window,) = doom_windows()
        group = os.getpgid(window.pid)
        assert desktop_keys_down() & MOVES, "the explorer holds its keys"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    deadline = time.time() + 10  # after SIGKILL the engine watchdog ends the game
    while (group_alive(group) or doom_windows()) and time.time() < deadline:  # the X server drops a dead client's window a moment later
        time.sleep(0.1)
    assert not group_alive(group) and not doom_windows(), "the game outlived the run"
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in err, err
    while desktop_keys_down() & MOVES and time.time() < deadline:  # after SIGKILL the watchdog lets go of them
        time.sleep(0.1)
    assert desktop_keys_down().isdisjoint(MOVES)
