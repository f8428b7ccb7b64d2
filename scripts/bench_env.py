"""Steps per second of a raw ViZDoom loop and of `DoomGame.step` resized to 128×128, side by side.

Both play the same park with the same engine settings (resolution, labels buffer, buttons,
game variables, 4 tics a step) and the same random actions. Rounds alternate between the two so
that the machine's noise falls on both alike; the median of the rounds is reported.

    python scripts/bench_env.py [--game doom:park] [--steps 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import vizdoom as vzd

from playtester.capture.frames import FrameSpec
from playtester.capture.games import make_game
from playtester.capture.wrappers import ResizeFrame


def raw_engine(env) -> vzd.DoomGame:
    """A bare engine configured exactly as the backend configures its own."""
    src = env.unwrapped.game
    game = vzd.DoomGame()
    scen = env.unwrapped.scenario
    game.set_doom_game_path(str(scen.iwad))
    if scen.pwad:
        game.set_doom_scenario_path(str(scen.pwad))
    game.set_doom_map(scen.map)
    game.set_screen_resolution(vzd.ScreenResolution.RES_320X240)
    game.set_screen_format(vzd.ScreenFormat.RGB24)
    game.set_labels_buffer_enabled(src.is_labels_buffer_enabled())
    for setter in ("set_render_hud", "set_render_weapon", "set_render_crosshair", "set_render_messages",
                   "set_render_particles", "set_render_effects_sprites", "set_sound_enabled"):
        getattr(game, setter)(False)
    game.set_window_visible(False)
    game.set_available_buttons(src.get_available_buttons())
    game.set_available_game_variables(src.get_available_game_variables())
    game.add_game_args("+sv_cheats 1 +freelook 1")
    game.init()
    return game


def run_raw(game: vzd.DoomGame, vectors, actions) -> float:
    game.new_episode()
    t0 = time.perf_counter()
    for a in actions:
        game.make_action(vectors[a], 4)
        state = game.get_state()
        _ = state.screen_buffer, state.game_variables, state.labels
    return len(actions) / (time.perf_counter() - t0)


def run_backend(env, actions) -> float:
    env.reset(seed=0)
    t0 = time.perf_counter()
    for a in actions:
        env.step(int(a))
    return len(actions) / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--game", default="doom:park")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    env = ResizeFrame(make_game(args.game, random_start=False), FrameSpec.square(128))
    game = raw_engine(env)
    vectors = env.unwrapped._vectors
    actions = np.random.default_rng(0).integers(0, env.action_space.n, size=args.steps)
    raw, backend = [], []
    for _ in range(args.rounds):
        raw.append(run_raw(game, vectors, actions))
        backend.append(run_backend(env, actions))
    game.close()
    env.close()
    r, b = statistics.median(raw), statistics.median(backend)
    print(f"game {args.game}, 320x240, 4 tics/step, {args.steps} steps x {args.rounds} rounds (median)")
    print(f"{'raw ViZDoom loop':<34}{r:>9.1f} steps/s")
    print(f"{'DoomGame.step + resize 128x128':<34}{b:>9.1f} steps/s")
    print(f"{'ratio backend / raw':<34}{b / r:>9.2f}")


if __name__ == "__main__":
    main()
