"""Screen capture speed: raw mss grabs against the full capture path, on a 640×480 game window.

The full path is what `WindowGame` does every step: grab the window's client area, crop it to the
screen, convert BGRA to RGB, resize to 128×128 (INTER_AREA). Both run in one process on the same
window, alternating in rounds, and the script reports frames per second and their ratio.

The window is a real game: ViZDoom at 640×480 in its own window (the sample game), on a private
Xvfb screen that the script starts (or on $DISPLAY with --use-display).

    python scripts/bench_capture.py                # prints a table and a JSON line
    python scripts/bench_capture.py --seconds 2 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def fps_of(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="length of one timed run")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each contender")
    parser.add_argument("--use-display", action="store_true", help="use $DISPLAY instead of a private Xvfb")
    args = parser.parse_args()

    xvfb = None
    if not args.use_display:
        from playtester.capture.window.virtual_display import VirtualDisplay

        xvfb = VirtualDisplay("1280x1024x24")
        os.environ["DISPLAY"] = xvfb.name
    workdir = tempfile.mkdtemp(prefix="bench-capture-")
    game = subprocess.Popen(
        [sys.executable, "-m", "playtester.capture.window.doom_spectator", "--game", "doom:freedoom2:MAP01",
         "--resolution", "640x480"],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        if game.stdout.readline().strip() != "ready":
            sys.exit("the sample game did not start: " + game.stdout.read())
        from playtester.capture.window.grab import FrameGrabber
        from playtester.capture.window.desktops import open_desktop
        from playtester.capture.window.platform import find_window

        desktop = open_desktop()
        deadline = time.time() + 30
        while True:
            try:
                window = find_window(desktop, "vizdoom")
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        region = window.region
        assert region[2:] == (640, 480), f"the window is {region[2]}x{region[3]}, expected 640x480"
        grabber = FrameGrabber(size=(128, 128))
        frame = grabber.grab(region)
        assert frame.shape == (128, 128, 3) and frame.std() > 5, "the grab is flat: not the game's picture"

        import cv2
        import numpy as np

        copy_buffer = np.empty(region[2] * region[3] * 4, dtype=np.uint8)

        def grab_and_copy():  # the least a capture path can do: one more pass over the pixels
            shot = grabber.grab_raw(region)
            np.copyto(copy_buffer, np.frombuffer(shot.raw, dtype=np.uint8))
            return copy_buffer

        def grab_inter_area():  # the same path with OpenCV's one-pass INTER_AREA
            shot = grabber.grab_raw(region)
            bgra = np.frombuffer(shot.raw, dtype=np.uint8).reshape(shot.height, shot.width, 4)
            return cv2.cvtColor(cv2.resize(bgra, (128, 128), interpolation=cv2.INTER_AREA), cv2.COLOR_BGRA2RGB)

        raw, full, copy, area = [], [], [], []
        for _ in range(args.rounds):
            raw.append(fps_of(lambda: grabber.grab_raw(region), args.seconds))
            full.append(fps_of(lambda: grabber.grab(region), args.seconds))
            copy.append(fps_of(grab_and_copy, args.seconds))
            area.append(fps_of(grab_inter_area, args.seconds))
        grabber.close()
        desktop.close()
    finally:
        os.killpg(game.pid, 9)
        game.wait()
        if xvfb is not None:
            xvfb.close()

    raw_fps, full_fps = statistics.median(raw), statistics.median(full)
    copy_fps, area_fps = statistics.median(copy), statistics.median(area)
    ratio = full_fps / raw_fps
    print(f"capture of a 640x480 window ({args.rounds} rounds of {args.seconds:g} s each, median)")
    print("| path | fps | share of raw |")
    print("|---|---:|---:|")
    print(f"| raw mss grab | {raw_fps:.0f} | 1.00 |")
    print(f"| capture path: grab + crop + resize 128×128 + BGRA→RGB (`FrameGrabber.grab`) | {full_fps:.0f} | {ratio:.2f} |")
    print(f"| for reference: grab + one copy of the pixels into a kept buffer | {copy_fps:.0f} | {copy_fps / raw_fps:.2f} |")
    print(f"| for reference: grab + cv2 INTER_AREA 128×128 + BGRA→RGB | {area_fps:.0f} | {area_fps / raw_fps:.2f} |")
    print(json.dumps({
        "raw_fps": round(raw_fps, 1), "capture_fps": round(full_fps, 1), "ratio": round(ratio, 3),
        "copy_fps": round(copy_fps, 1), "inter_area_fps": round(area_fps, 1),
        "raw_rounds": [round(v, 1) for v in raw], "capture_rounds": [round(v, 1) for v in full],
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
    }))
    ok = ratio >= 0.8 and full_fps >= 200
    print("meets the bar (capture ≥ 80 % of raw and ≥ 200 fps)" if ok else "BELOW the bar (capture ≥ 80 % of raw and ≥ 200 fps)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
