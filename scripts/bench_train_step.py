"""One training step of the detector (forward, backward, AdamW update) with its body and FPN in
NCHW against NHWC (channels_last) memory, alternating in one process so that the machine's noise
falls on both alike; the median of each and their ratio.

    python scripts/bench_train_step.py --ckpt d2000.ckpt --shots p3-2000 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch


def step_times(module, batches, layout, steps: int) -> float:
    torch.manual_seed(0)
    model = module()
    if layout == "NHWC":
        model.model.model.backbone.to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for k in range(steps):
        images, targets = batches[k % len(batches)]
        t = time.perf_counter()
        loss = sum(model.model(images, targets).values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t)
    return statistics.median(times[4:])


def main(argv: list[str] | None = None) -> int:
    from playtester.datasets.detection import DetectionDataset, collate_detection, load_coco
    from playtester.perception.detector import DetectorModule
    from playtester.perception.training import read_checkpoint_with_notes

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", type=Path, required=True, help="a detector checkpoint (its config and weights)")
    parser.add_argument("--shots", type=Path, required=True, help="a shots folder (labels.json and images/)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=24, help="steps a layout a round (the first 4 not counted)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config, state, _ = read_checkpoint_with_notes(args.ckpt, "detector", "cpu")
    data = DetectionDataset(load_coco(args.shots / "labels.json", args.shots), augment=True)
    batches = [collate_detection([data[i * 8 + j] for j in range(8)]) for i in range(6)]

    def module():
        m = DetectorModule(**config)
        m.model.load_state_dict(state, strict=False)
        return m.train()

    for r in range(args.rounds):
        a, b = (step_times(module, batches, layout, args.steps) for layout in ("NCHW", "NHWC"))
        print(f"round {r}: NCHW {1000 * a:.0f} ms a step, NHWC {1000 * b:.0f} ms, ratio ×{b / a:.2f} ({args.threads} threads)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
