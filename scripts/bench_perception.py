"""Perception benchmarks: inference speed of the detector and the encoder, and detector AP per class.

    python scripts/bench_perception.py speed --threads 1           # ms per frame / per 4-frame stack
    python scripts/bench_perception.py ap --n 2000 --out bench/    # 500 shots per class of the park
    python scripts/bench_perception.py scratch --train-shots S1 --test-shots S2 --backbone compact \
        --pretrained none --lr 2e-3 --threads 1 --shots-per-class 500 --epochs 4 --name NAME

`speed` times the detectors (`--backbones`, at 128 and 256 px, and any trained `--ckpt`; one
320×240 park frame per call) and the encoder (a stack of 4 frames at 128 px, and 64 px as RND
uses it), median of `--repeat` calls after warm-up, wall clock and CPU time (on one thread the CPU
time is what a quiet core would take). Random weights cost as much as trained ones: proposals
per image are fixed by the config.

`ap` makes auto-labelled shots of the park (`playtester shots`), trains a detector with
`playtester train detector` and prints its per-class test AP (`playtester eval detector`), as
the paper's Table I. Everything it runs is printed first, so the figures can be reproduced.

`scratch` trains a detector from random init on `--shots-per-class` images per class (by each
image's main class) of one park seed's shots for a fixed number of epochs and scores it on the
shots of another seed, never trained on: per-class AP50 and AP@[.5:.95] over all boxes and the
healthy and bugged ones apart, AP50 after every `--eval-every` epochs against training minutes,
and training time wall and CPU. Each run appends one JSON line to OUT/scratch.jsonl. Shots:
`playtester shots --game doom:park:1 --n 2000 --out S1`, `... doom:park:2 --n 1000 --out S2`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


COMPACT = dict(anchor_sizes=[[3.0, 3.8, 5.0], [7.6, 11.7, 22.9]], aspect_ratios=[1.3, 1.9, 4.1])
"""Anchors of the park's shots at 128 px (for speed runs: cost does not depend on their values)."""


def _override(text: str) -> tuple[str, object]:
    """`key=value` of a `DetectorConfig` field; the value read as JSON where it parses (numbers, lists)."""
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


class _EpochAP:
    """A Lightning callback: held-out AP50 after every epoch, against training seconds (wall and
    CPU) not counting the evaluations themselves."""

    def __init__(self, test, every: int) -> None:
        import lightning as L

        self.test, self.every, self.points = test, every, []
        self.wall = self.cpu = 0.0
        outer = self

        class Callback(L.Callback):
            def on_train_epoch_start(self, trainer, module) -> None:
                outer._t = (time.perf_counter(), time.process_time())

            def on_train_epoch_end(self, trainer, module) -> None:
                outer.wall += time.perf_counter() - outer._t[0]
                outer.cpu += time.process_time() - outer._t[1]
                epoch = trainer.current_epoch + 1
                point = {"epoch": epoch, "steps": trainer.global_step, "train_wall_s": round(outer.wall, 1),
                         "train_cpu_s": round(outer.cpu, 1)}
                if outer.every and epoch % outer.every == 0 and epoch < trainer.max_epochs:
                    from playtester.perception.detector_eval import evaluate_detector

                    table = evaluate_detector(module.model, outer.test)
                    module.model.train()
                    point.update(map50=round(table.map50, 4), ap50=dict(zip(table.classes, (round(v, 4) for v in table.ap50))))
                outer.points.append(point)
                print(f"  epoch {epoch}: {point}", flush=True)

        self.callback = Callback()


def bench_scratch(args) -> dict:
    """Train a detector from random init on `--shots-per-class` shots of one park seed for a fixed
    number of epochs, then score it on shots of another seed: per-class AP50 and AP@[.5:.95],
    over all boxes and the healthy and bugged ones apart."""
    from dataclasses import asdict

    import lightning as L
    import torch
    from torch.utils.data import DataLoader

    from playtester.datasets.detection import DetectionDataset, _shots_per_class, collate_detection, load_coco
    from playtester.perception.compact_backbone import anchors_for_coco
    from playtester.perception.detector import DetectorConfig, DetectorModule
    from playtester.perception.detector_eval import ap_table, predict_set
    from playtester.perception.training import make_trainer

    torch.set_num_threads(args.threads or torch.get_num_threads())
    source = load_coco(Path(args.train_shots) / "labels.json")
    train = type(source)(source.source, source.classes, _shots_per_class(source, args.shots_per_class, args.seed))
    test = load_coco(Path(args.test_shots) / "labels.json", classes=source.classes)
    test = test.subset([im.id for im in test.images[: args.test_images]])
    options = dict(backbone=args.backbone, pretrained=args.pretrained, image_size=args.image_size, lr=args.lr,
                   batch_size=args.batch_size, schedule="cosine")
    if args.backbone == "compact":
        options["anchor_sizes"], options["aspect_ratios"] = anchors_for_coco(train, args.image_size)
    options.update(_override(o) for o in args.set)
    cfg = DetectorConfig(classes=source.classes, **options)
    L.seed_everything(args.seed, verbose=False)
    module = DetectorModule(**asdict(cfg))
    started_from = module.model.load_pretrained()
    loader = DataLoader(DetectionDataset(train, augment=True, seed=args.seed), batch_size=args.batch_size, shuffle=True,
                        collate_fn=collate_detection)
    curve = _EpochAP(test, args.eval_every)
    trainer = make_trainer(name="bench", logdir=Path(args.out) / "logs", epochs=args.epochs, progress=False,
                           accelerator="cpu", callbacks=[curve.callback], limit_val_batches=0)
    print(f"{args.name}: {len(train.images)} training images ({train.counts()}), {len(test.images)} held-out; "
          f"{cfg.backbone} from {started_from}; {torch.get_num_threads()} threads", flush=True)
    trainer.fit(module, train_dataloaders=loader)
    if module.diverged:
        return {"name": args.name, "diverged": True}
    t = time.perf_counter()
    preds = predict_set(module.model, test)
    infer_ms = (time.perf_counter() - t) * 1000 / len(test.images)
    tables = {v: ap_table(preds, test, v).to_json() for v in ("all", "healthy", "bugged")}
    for side in args.min_side:  # the objects are 6–80 px at the input; the shots also hold 2-px ones
        tables[f"side>={side:g}px"] = ap_table(preds, test, min_side=side, image_size=cfg.image_size).to_json()
    result = {
        "name": args.name, "shots_per_class": args.shots_per_class, "train_images": len(train.images),
        "train_boxes": train.counts(), "epochs": args.epochs, "steps": trainer.global_step, "threads": torch.get_num_threads(),
        "train_wall_min": round(curve.wall / 60, 2), "train_cpu_min": round(curve.cpu / 60, 2),
        "eval_ms_per_frame_batch8": round(infer_ms, 1), "curve": curve.points, "config": {k: v for k, v in asdict(cfg).items() if k != "classes"},
        "started_from": started_from, "ap": tables, "command": "python " + " ".join(sys.argv),
        "load_average": __import__("os").getloadavg(),
    }
    if args.save:
        trainer.save_checkpoint(Path(args.out) / f"{args.name}.ckpt", weights_only=True)
    _print_scratch(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "scratch.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    return result


def _print_scratch(r: dict) -> None:
    def pct(v):
        return "–" if v is None else f"{100 * v:.1f}"

    print(f"{r['name']}: {r['epochs']} epochs, {r['steps']} steps, train {r['train_wall_min']} min wall / "
          f"{r['train_cpu_min']} min CPU on {r['threads']} thread(s) (load {r['load_average'][0]:.1f})")
    print("| variant | " + " | ".join(f"{c} AP50 / AP" for c in r["ap"]["all"]["classes"]) + " | all AP50 / AP |")
    for variant, doc in r["ap"].items():
        cells = [f"{pct(v['ap50'])} / {pct(v['ap'])}" for v in doc["classes"].values()]
        print(f"| {variant} | " + " | ".join(cells) + f" | {pct(doc['all']['ap50'])} / {pct(doc['all']['ap'])} |")


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    return f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"


def _time(fn, repeat: int, warmup: int = 3, sync=None) -> tuple[float, float]:
    """Median milliseconds of `fn` per call: wall clock, and this process's CPU time (on one
    thread, what a quiet core would take; on a busy machine the wall clock also counts waiting)."""
    for _ in range(warmup):
        fn()
    walls, cpus = [], []
    for _ in range(repeat):
        if sync:
            sync()
        t, c = time.perf_counter(), time.process_time()
        fn()
        if sync:
            sync()
        walls.append((time.perf_counter() - t) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def _training_batch(labels: Path, n: int):
    """`(images, targets, classes)` of the first `n` shots of a COCO file (None if it is absent),
    to time a training step (forward and backward) on real boxes."""
    if not labels.is_file():
        return None
    from playtester.datasets.detection import DetectionDataset, collate_detection, load_coco

    coco = load_coco(labels)
    coco = coco.subset([im.id for im in coco.images if len(im.labels)][:n])
    images, targets = collate_detection([DetectionDataset(coco)[i] for i in range(len(coco.images))])
    return images, targets, coco.classes


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
    detectors = {f"{b}@{size}": (lambda b=b, size=size: Detector(DetectorConfig(
        classes=["pillar", "barrel", "tire", "chair"], backbone=b, pretrained="none", image_size=size,
        **(COMPACT if b == "compact" else {})))) for b in args.backbones.split(",") for size in args.sizes}
    for ckpt in args.ckpt:
        from playtester.perception.detector import load_detector

        detectors[ckpt] = lambda ckpt=ckpt: load_detector(ckpt)
    batch = _training_batch(Path(args.train_shots) / "labels.json", args.batch_size)
    for name, build in detectors.items():
        det = build().to(device).eval()
        i = iter(range(10**9))
        wall, cpu = _time(lambda: det.predict([frames[next(i) % len(frames)]]), args.repeat, sync=sync)
        results["detector_ms_per_frame"][name] = {"wall": round(wall, 1), "cpu": round(cpu, 1)}
        line = f"detector {name}: {wall:7.1f} ms/frame wall, {cpu:7.1f} ms CPU"
        if batch is not None and det.classes == batch[2]:
            det.train()
            step_wall, step_cpu = _time(lambda: sum(det(batch[0], batch[1]).values()).backward(), max(3, args.repeat // 4), warmup=1)
            results.setdefault("detector_train_step_ms", {})[name] = {"wall": round(step_wall), "cpu": round(step_cpu)}
            line += f"; a training step of {len(batch[0])} shots {step_wall:7.0f} ms wall, {step_cpu:7.0f} ms CPU"
        print(line, flush=True)
    for size in (128, 64):
        enc = FeatureEncoder().to(device).eval()
        stack = torch.from_numpy(np.stack(frames[:4])).permute(0, 3, 1, 2).float().div(255).to(device)
        stack = torch.nn.functional.interpolate(stack, size=(size, size), mode="area")
        with torch.no_grad():
            ms, _ = _time(lambda: enc(stack), args.repeat, sync=sync)
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

    print(APTable.from_json(table).markdown())
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["speed", "ap", "scratch"])
    p.add_argument("--game", default="doom:park")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads for speed (0: torch's default)")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--backbones", default="compact,resnet50,mobilenet", help="speed: random-weight detectors to time")
    p.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[128, 256], help="speed: input sizes (px)")
    p.add_argument("--ckpt", action="append", default=[], help="speed: also time this trained detector (repeatable)")
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
    p.add_argument("--train-shots", default="bench/perception/shots-seed1", help="scratch: shots folder to train on")
    p.add_argument("--test-shots", default="bench/perception/shots-seed2", help="scratch: shots of another park seed")
    p.add_argument("--shots-per-class", type=int, default=500, help="scratch: training images per class (by main class)")
    p.add_argument("--test-images", type=int, default=1000, help="scratch: held-out images scored")
    p.add_argument("--eval-every", type=int, default=0, help="scratch: also score the held-out shots every this many epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="compact", help="scratch: the run's name in scratch.jsonl")
    p.add_argument("--set", action="append", default=[], help="scratch: a DetectorConfig field, key=value (repeatable)")
    p.add_argument("--min-side", type=float, action="append", default=[], help="scratch: also score only boxes of at least this "
                   "many pixels (sqrt(w·h)) at the detector's input (repeatable)")
    p.add_argument("--save", action="store_true", help="scratch: keep the trained weights (OUT/NAME.ckpt)")
    args = p.parse_args()
    res = {"speed": bench_speed, "ap": bench_ap, "scratch": bench_scratch}[args.what](args)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
