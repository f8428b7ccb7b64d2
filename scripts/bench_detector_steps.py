"""Where `train detector`'s recipe spends a step: its own Lightning loop for a few hundred steps,
with a clock on the loop's hooks (forward, backward, the update, and the gap between steps, which
is reading and augmenting the next batch), and the median step per hundred. OpenMP's wait is set
when the process starts, so compare waits by running it once per setting, one after another:

    OMP_WAIT_POLICY=PASSIVE python scripts/bench_detector_steps.py --coco p3-2000/labels.json --steps 200
    python scripts/bench_detector_steps.py --coco p3-2000/labels.json --steps 200

(The command line sets PASSIVE itself unless `train detector` finds its cores quiet: playtester/cores.py.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--coco", type=Path, required=True, help="a shots folder's labels.json")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()

    import lightning as L

    from playtester.perception import recipes

    marks: list[tuple[str, float]] = []

    class Clock(L.Callback):
        def on_train_batch_start(self, *a): marks.append(("start", time.perf_counter()))
        def on_before_backward(self, *a): marks.append(("forward", time.perf_counter()))
        def on_after_backward(self, *a): marks.append(("backward", time.perf_counter()))
        def on_train_batch_end(self, *a): marks.append(("update", time.perf_counter()))

    make_trainer = recipes.make_trainer
    recipes.make_trainer = lambda **kw: make_trainer(**{**kw, "callbacks": [*(kw.get("callbacks") or []), Clock()]})
    with tempfile.TemporaryDirectory() as scratch:
        recipe = recipes.DetectorRecipe(
            coco=args.coco, out=Path(scratch) / "d.ckpt", images=None, val_coco=None, backbone="resnet50", pretrained="auto",
            image_size=128, steps=args.steps, epochs=None, max_minutes=None, batch_size=8, lr=None, schedule="cosine",
            trainable_layers=None, base_coco=None, base_images=None, base_shots=10, augment=True, seed=0, threads=args.threads,
            logdir=Path(scratch) / "logs", workers=0, accelerator="cpu", negatives=())
        recipes.train_detector(recipe, say=lambda line: None)
    parts: dict[str, list[float]] = {}
    for (_, a), (name, b) in zip(marks, marks[1:]):
        parts.setdefault("next batch" if name == "start" else name, []).append(1000 * (b - a))
    for name, ms in parts.items():
        print(f"{name:10s} median {statistics.median(ms):6.1f} ms")
    starts = [t for name, t in marks if name == "start"]
    steps = [1000 * (b - a) for a, b in zip(starts, starts[1:])]
    for i in range(0, len(steps), 100):
        print(f"steps {i}-{i + 99}: median {statistics.median(steps[i:i + 100]):.0f} ms a step")


if __name__ == "__main__":
    main()
