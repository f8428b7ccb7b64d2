"""The trained detector's pass with its body and FPN in NCHW against NHWC (channels_last) memory.

    python scripts/bench_layout.py --detector M/detector.ckpt --threads 1 --frames 80 --rounds 3

One park episode's frames (random actions, seed 3), `Detector.predict` on each, alternating the
two layouts round by round (the machine's noise falls on both); median ms a frame per layout,
their ratio, and the largest difference between the boxes the two give.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--detector", required=True)
    p.add_argument("--game", default="doom:park:1")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--frames", type=int, default=80)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)

    from playtester.capture.games import make_game
    from playtester.perception.detector import load_detector

    torch.set_num_threads(args.threads)
    env = make_game(args.game)
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    frames = [env.step(int(rng.integers(env.action_space.n)))[0] for _ in range(args.frames)]
    env.close()
    detector = load_detector(args.detector)
    layouts = {"NCHW": torch.contiguous_format, "NHWC": torch.channels_last}
    times: dict[str, list[float]] = {name: [] for name in layouts}
    boxes: dict[str, list[np.ndarray]] = {}
    for r in range(args.rounds):
        for name in (list(layouts) if r % 2 == 0 else list(layouts)[::-1]):
            detector.model.backbone.to(memory_format=layouts[name])
            for f in frames[:10]:
                detector.predict([f])
            out = []
            for f in frames:
                t0 = time.perf_counter()
                out.append(detector.predict([f])[0][0])
                times[name].append((time.perf_counter() - t0) * 1000)
            boxes[name] = out
    same_count = all(len(a) == len(b) for a, b in zip(boxes["NCHW"], boxes["NHWC"]))
    diff = max((float(np.abs(a - b).max()) for a, b in zip(boxes["NCHW"], boxes["NHWC"]) if len(a) and len(a) == len(b)), default=0.0)
    for name in layouts:
        print(f"{name}: {statistics.median(times[name]):.2f} ms a frame (median of {len(times[name])}, {args.threads} thread(s))")
    print(f"NHWC / NCHW: ×{statistics.median(times['NHWC']) / statistics.median(times['NCHW']):.2f}; "
          f"same number of boxes on every frame: {'yes' if same_count else 'no'}; largest box difference {diff:.2g} px")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
