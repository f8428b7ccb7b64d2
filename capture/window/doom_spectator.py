"""ViZDoom in its own window, played by a human (spectator mode), and a sample windowed game.

`open_spectator()` starts a `doom:` game in the engine's window with the engine's key bindings
set to the ones `DoomGame` uses (`KEY_BUTTONS`: W A S D move, arrows turn and look, Space jumps),
so a human's keys mean what the key map says. The recorder uses it for `--game doom:…`.

Run as a program it is a stand-in for any windowed game with a dev build: a ViZDoom window a
human (or xdotool) plays, which sends its position, angle and frame rate as UDP telemetry:

    python -m playtester.capture.window.doom_spectator --game doom:freedoom2:MAP01 --telemetry-port 7777
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time

from playtester.capture.keymap import KeyMap

_BUTTON_COMMANDS = {
    "MOVE_FORWARD": "+forward", "MOVE_BACKWARD": "+back", "MOVE_LEFT": "+moveleft",
    "MOVE_RIGHT": "+moveright", "TURN_LEFT": "+left", "TURN_RIGHT": "+right",
    "LOOK_UP": "+lookup", "LOOK_DOWN": "+lookdown", "JUMP": "+jump", "ATTACK": "+attack",
    "USE": "+use", "CROUCH": "+crouch", "SPEED": "+speed",
    **{f"SELECT_WEAPON{d}": f"slot {d}" for d in range(1, 10)},
}
_ENGINE_KEY_NAMES = {"left": "leftarrow", "right": "rightarrow", "up": "uparrow", "down": "downarrow"}


def bind_keys(game) -> None:
    """Make the engine's own key bindings those of `KEY_BUTTONS`, and turn the mouse off."""
    from playtester.capture.doom import KEY_BUTTONS

    game.send_game_command("unbindall")
    for key, button in KEY_BUTTONS.items():
        command = _BUTTON_COMMANDS[button.name]
        game.send_game_command(f'bind {_ENGINE_KEY_NAMES.get(key, key)} "{command}"')
    game.send_game_command("use_mouse 0")  # mouse look would move the view with no key to label it


def open_spectator(spec: str, *, keymap: KeyMap | None = None, resolution: str = "320x240", frame_skip: int = 4):
    """A `DoomGame` in spectator mode, its window open, starting at the map's own start.

    It starts at the map's start (not a random start point): turning to a start angle needs the
    engine to obey the program, which spectator mode does not.
    """
    from playtester.capture.games import make_game

    env = make_game(
        spec, keymap=keymap, spectator=True, resolution=resolution, frame_skip=frame_skip, random_start=False,
    )
    bind_keys(env.game)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A ViZDoom window played by a human, sending UDP telemetry.")
    parser.add_argument("--game", default="doom:freedoom2:MAP01", help="a doom: game spec")
    parser.add_argument("--resolution", default="320x240")
    parser.add_argument("--telemetry-port", type=int, default=None, help="send JSON lines to 127.0.0.1:PORT")
    parser.add_argument("--seconds", type=float, default=None, help="quit after this long")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    env = open_spectator(args.game, resolution=args.resolution, frame_skip=1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if args.telemetry_port else None
    env.reset(seed=0)
    print("ready", flush=True)
    start = last = time.perf_counter()
    tic = 0
    try:
        while args.seconds is None or time.perf_counter() - start < args.seconds:
            env.game.advance_action(1)
            if env.game.is_episode_finished():
                env.game.new_episode()
            tic += 1
            now = time.perf_counter()
            if sock is not None:
                x, y, z = env.position
                record = {"pos": [x, y, z], "angle": env.angle, "fps": 1.0 / max(now - last, 1e-6), "tic": tic}
                sock.sendto((json.dumps(record) + "\n").encode(), ("127.0.0.1", args.telemetry_port))
            last = now
    except Exception as e:  # the window was closed
        print(f"engine stopped: {e}", file=sys.stderr)
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
