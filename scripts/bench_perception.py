"""Perception benchmarks: inference speed of the detector and the encoder, and detector AP per class.

    python scripts/bench_perception.py speed                      # ms per frame / per 4-frame stack
    python scripts/bench_perception.py ap --n 2000 --out bench/   # 500 shots per class of the park

`speed` times the detector (both backbones, at 128 and 256 px, one 320×240 park frame per call)
and the encoder (a stack of 4 frames at 128 px, and 64 px as RND uses it), median of `--repeat`
calls after warm-up. Weights are random: inference cost does not depend on them (proposals per
image are fixed by the config).

`ap` makes auto-labelled shots of the park (`playtester shots`), trains a detector with
`playtester train detector` and prints its per-class test AP (`playtester eval detector`), as
the paper's Table I. Everything it runs is printed first, so the figures can be reproduced.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def _time(fn, repeat: int, warmup: int = 3, sync=None) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if sync:
            sync()
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def park_frames(game: str, n: int) -> "list":
    """`n` real park frames (320×240) looking at objects, from the engine."""
    from playtester.capture.games import make_game

    env = make_game(game, resolution="320x240")
    frames = []
    try:
        frame, _ = env.reset(seed=0)
        for i in range(n * 5):
            frame, *_ = env.step(i % 3 if i % 7 else 4)
            if i % 5 == 0:
                frames.append(frame.copy())
    finally:
        env.close()
    return frames[:n]


def bench_speed(args) -> dict:
    import numpy as np
    import torch

    from playtester.perception.detector import Detector, DetectorConfig
    from playtester.perception.encoder import FeatureEncoder

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    frames = park_frames(args.game, 8)
    results = {"device": _device_name(device), "detector_ms_per_frame": {}, "encoder_ms_per_stack": {}}
    for backbone in ("resnet50", "mobilenet"):
        for size in (128, 256):
            det = Detector(DetectorConfig(classes=["pillar", "barrel", "tire", "chair"], backbone=backbone,
                                          pretrained="none", image_size=size)).to(device).eval()
            i = iter(range(10**9))
            ms = _time(lambda: det.predict([frames[next(i) % len(frames)]], 0.5), args.repeat, sync=sync)
            results["detector_ms_per_frame"][f"{backbone}@{size}"] = round(ms, 1)
            print(f"detector {backbone:9s} {size:4d} px: {ms:7.1f} ms/frame", flush=True)
    for size in (128, 64):
        enc = FeatureEncoder().to(device).eval()
        stack = torch.from_numpy(np.stack(frames[:4])).permute(0, 3, 1, 2).float().div(255).to(device)
        stack = torch.nn.functional.interpolate(stack, size=(size, size), mode="area")
        with torch.no_grad():
            ms = _time(lambda: enc(stack), args.repeat, sync=sync)
        results["encoder_ms_per_stack"][f"{size}"] = round(ms, 2)
        print(f"encoder 4-frame stack {size:4d} px: {ms:7.2f} ms", flush=True)
    return results


def _run(argv: list[str]) -> None:
    from playtester.cli import main

    print("$ playtester " + " ".join(argv), flush=True)
    code = main(argv)
    if code != 0:
        sys.exit(f"failed with status {code}: playtester {' '.join(argv)}")


def bench_ap(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shots = out / "shots"
    if not (shots / "labels.json").exists():
        _run(["shots", "--game", args.game, "--n", str(args.n), "--out", str(shots), "--resolution", args.resolution])
    ckpt = out / f"detector-{args.backbone}.ckpt"
    train = ["train", "detector", "--coco", str(shots / "labels.json"), "--out", str(ckpt), "--backbone", args.backbone,
             "--pretrained", args.pretrained, "--image-size", str(args.image_size), "--epochs", str(args.epochs),
             "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--device", args.device]
    if args.max_minutes:
        train += ["--max-minutes", str(args.max_minutes)]
    t = time.time()
    _run(train)
    minutes = (time.time() - t) / 60
    table_path = out / f"ap-{args.backbone}.json"
    _run(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(shots / "labels.json"), "--json", str(table_path), "--device", args.device])
    table = json.loads(table_path.read_text())
    table.update(train_minutes=round(minutes, 1), command="playtester " + " ".join(train))
    from playtester.perception.detector_eval import APTable

    print(APTable(**{k: table[k] for k in ("classes", "ap50", "ap", "map50", "map", "images", "boxes")}).markdown())
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["speed", "ap"])
    p.add_argument("--game", default="doom:park")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads for speed (0: torch's default)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--out", default="bench/perception")
    p.add_argument("--n", type=int, default=2000, help="shots (balanced over the 4 kinds: 2000 = 500 per class)")
    p.add_argument("--resolution", default="320x240")
    p.add_argument("--backbone", default="resnet50")
    p.add_argument("--pretrained", default="coco")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--max-minutes", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--json", default=None, help="write the results here too")
    args = p.parse_args()
    res = bench_speed(args) if args.what == "speed" else bench_ap(args)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
