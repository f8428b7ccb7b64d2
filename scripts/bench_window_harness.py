"""The window harness on a real game: how long launches and resets take, how many steps of random
play a game lasts, and whether the out-of-play watch ends episodes at game over and nowhere else.

LBreakout2 (Debian's `lbreakout2`) on a private Xvfb screen, launched by the harness, brought to
a level start by the reset recipe of docs/your-own-game.md, played by uniform random actions of
the default key map at the default control rate, the out-of-play watch the default one (a picture
no key changes for 20 steps: no screenshot given). The first episode's last frame is kept as the
game-over reference; every episode's last frame and first frame are compared with it by SSIM
(`capture/window/play_state.py`): an episode ended out of play should end on the dialog (SSIM at
least 0.6), and every episode should start off it. A screenshot watch (`--out-of-play` with that
reference) runs beside the still watch on the same frames after the first episode, to show how
many steps earlier a screenshot ends an episode.

    nice -n 10 python scripts/bench_window_harness.py [--episodes 6] [--steps 400] [--out bench-harness]

Prints one line an episode and a summary, and writes `harness.json` in `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

RESET = "5 y 2 down enter 2 down down enter 8"
"""The reset recipe of docs/your-own-game.md as plain keys."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--steps", type=int, default=400, help="most steps an episode (a game over ends it first)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench-harness"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from playtester.capture.games import make_game
    from playtester.capture.window.play_state import MATCH, OutOfPlay, look, similarity
    from playtester.capture.window.reset import parse_reset_keys
    from playtester.capture.window.virtual_display import VirtualDisplay

    home = Path(tempfile.mkdtemp(prefix="lbreakout2-home-"))
    screen = VirtualDisplay("800x600x24")
    os.environ["DISPLAY"] = screen.name
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    env = make_game("window:LBreakout2", launch=f"env SDL_AUDIODRIVER=dummy HOME={home} /usr/games/lbreakout2",
                    reset_recipe={"from": "--reset", "steps": parse_reset_keys(RESET)}, max_steps=args.steps)
    launch_s = time.perf_counter() - t0
    reference, by_shot, episodes = None, None, []
    try:
        for e in range(args.episodes):
            first, info = env.reset()
            row = {"episode": e, "reset_s": info["reset_seconds"], "steps": 0, "ended": None}
            shot_at = None
            if by_shot is not None:
                by_shot.reset()
            for t in range(args.steps):
                frame, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
                row["steps"] = t + 1
                if by_shot is not None and shot_at is None and by_shot.observe(frame) is not None:
                    shot_at = t + 1
                if terminated or truncated:
                    row["ended"] = "out of play" if info.get("out_of_play") else "crash" if info.get("crashed") else "budget"
                    break
            if reference is None and row["ended"] == "out of play":
                reference = look(frame)
                cv2.imwrite(str(args.out / "game-over.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
                by_shot = OutOfPlay([args.out / "game-over.png"])
            if reference is not None:
                row["end_ssim"] = round(similarity(look(frame), reference), 3)
                row["start_ssim"] = round(similarity(look(first), reference), 3)
            if shot_at is not None:
                row["screenshot_ends_at"] = shot_at
            episodes.append(row)
            print(json.dumps(row), flush=True)
    finally:
        env.close()
        screen.close()
    ended = [r for r in episodes if r["ended"] == "out of play"]
    summary = {
        "launch_s": round(launch_s, 2),
        "reset_s_mean": round(statistics.mean(r["reset_s"] for r in episodes), 2),
        "episodes": len(episodes),
        "ended_out_of_play": len(ended),
        "steps_to_out_of_play": [r["steps"] for r in ended],
        "ends_on_the_dialog": sum(r.get("end_ssim", 1.0) >= MATCH for r in ended),
        "starts_off_the_dialog": sum(r.get("start_ssim", 0.0) < MATCH for r in episodes),
        "screenshot_earlier_by": [r["steps"] - r["screenshot_ends_at"] for r in ended if "screenshot_ends_at" in r],
        "load": os.getloadavg()[0],
    }
    (args.out / "harness.json").write_text(json.dumps({"summary": summary, "episodes": episodes}, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
