"""Are the tester's tests of real objects? Free-play walks scored by the engine's labels.

    python scripts/bench_real_tests.py collect --game doom:park:1:24x24 --detector DET --seeds 1 2 3 --steps 1000 --out walks.jsonl
    python scripts/bench_real_tests.py recall  --walks walks.jsonl [--detector DET2]
    python scripts/bench_real_tests.py confirm --walks walks.jsonl --kn 1/1 3/3 4/4 --thresholds 0.6 0.7

`collect` plays uniform random actions (the random explorer's walk, no tests) on a Doom game from
fixed seeds, runs the detector on every frame and writes one JSON line a step: the action, the
detections at score ≥ 0.3 and, for scoring only, the engine's labelled objects in view.

`recall` scores a walk file: of the OOIs in view at a box height the tester would test (the
engine's label box at least `min_box_height`, 28 px), the share a detection of that class boxes
(IoU ≥ 0.5) at the run's threshold, on the frames the tester loop looks at (every 4th step); and
the detections at that height that box no labelled object (false detections a frame). With
`--detector` the walk is played again (the same seeds and actions: the engine is deterministic)
with another detector.

`confirm` replays a walk's detections through `ConfirmTracker` (`playtester.perception.candidates`)
as the tester loop does (a pass every 4th step, and every step while a candidate close enough to
test waits), for each k/n and threshold: the candidates that would become test targets (once
each), what share of them box a real object (IoU ≥ 0.3 with a label), how many distinct real OOIs
they are, and the detector passes it took. The walk goes on where a run would test, so it
measures what confirmation keeps and drops, not the steps a run saves by not testing phantoms
(`scripts/bench_agents.py` measures that).

The engine's labels only score here; nothing they say reaches the detector or the tracker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

LOW_SCORE = 0.3
"""Detections kept in a walk file: this and above (the sweeps pick higher thresholds from them)."""
EVERY = 4
"""The tester loop's `detect_every`: the frames it looks at."""


def walk_actions(seed: int, steps: int, n_actions: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(a) for a in rng.integers(n_actions, size=steps)]


def play(game: str, seed: int, steps: int, detector, every: int = 1):
    """One random walk: yields (t, action, frame, info, detections) for every `every`-th step's frame."""
    from playtester.capture.games import make_game

    env = make_game(game)
    try:
        obs, info = env.reset(seed=seed)
        for t, action in enumerate(walk_actions(seed, steps, env.action_space.n)):
            obs, _, terminated, truncated, info = env.step(action)
            if t % every == 0:
                boxes, labels, scores = detector.predict([obs], score_threshold=LOW_SCORE)[0]
                dets = [{"box": [round(float(v), 1) for v in b], "class": detector.classes[int(c) - 1], "score": round(float(s), 3)}
                        for b, c, s in zip(boxes, labels, scores)]
                yield t, action, obs, info, dets
            if terminated or truncated:
                break
    finally:
        env.close()


def in_view(info: dict[str, Any], classes: list[str]) -> list[dict[str, Any]]:
    """The engine's labelled objects of the detector's classes (scoring only)."""
    return [{"class": o["class"], "box": [float(v) for v in o["box"]], "ooi": o.get("ooi", o.get("id"))}
            for o in info.get("objects", []) if o["class"] in classes]


def collect(args) -> int:
    import torch

    from playtester.perception.detector import load_detector

    torch.set_num_threads(args.threads)
    detector = load_detector(args.detector)
    with open(args.out, "w") as f:
        for seed in args.seeds:
            for t, action, _, info, dets in play(args.game, seed, args.steps, detector):
                f.write(json.dumps({"game": args.game, "seed": seed, "t": t, "action": action, "angle": round(info.get("angle", 0.0), 2),
                                    "detections": dets, "labels": in_view(info, detector.classes)}) + "\n")
            print(f"seed {seed}: done", flush=True)
    return 0


def read_walks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cut(threshold: float | dict[str, float], kind: str) -> float:
    """The score a detection of `kind` needs: one threshold, or a checkpoint's per-class ones (0.6 where it has none)."""
    return threshold.get(kind, 0.6) if isinstance(threshold, dict) else threshold


def thresholds(args) -> list[float | dict[str, float]]:
    """`--thresholds`, and the per-class thresholds of `--thresholds-from` checkpoints."""
    from playtester.perception.calibration import read_thresholds

    return list(args.thresholds) + [read_thresholds(p) for p in args.thresholds_from]


def name(threshold: float | dict[str, float]) -> str:
    if isinstance(threshold, dict):
        return "per class: " + ", ".join(f"{k} {v:.2f}" for k, v in threshold.items())
    return f"{threshold:.2f}"


def recall_table(rows: list[dict[str, Any]], thresholds: list[float], min_height: float) -> list[dict[str, Any]]:
    """Per threshold (one, or per class): recall of testable OOIs in view, false testable detections a frame, their precision."""
    from playtester.tester.identity import iou

    out = []
    for thr in thresholds:
        seen = found = false = dets = frames = 0
        for r in rows:
            if r["t"] % EVERY:
                continue
            frames += 1
            boxes = [d for d in r["detections"] if d["score"] >= cut(thr, d["class"])]
            for label in r["labels"]:
                if label["box"][3] - label["box"][1] < min_height:
                    continue
                seen += 1
                found += any(d["class"] == label["class"] and iou(d["box"], label["box"]) >= 0.5 for d in boxes)
            for d in boxes:
                if d["box"][3] - d["box"][1] < min_height:
                    continue
                dets += 1
                false += not any(iou(d["box"], label["box"]) >= 0.5 for label in r["labels"])
        out.append({"threshold": thr, "frames": frames, "in_view": seen, "recall": found / seen if seen else None,
                    "detections": dets, "false": false, "false_per_100_frames": 100 * false / max(1, frames),
                    "precision": 1 - false / dets if dets else None})
    return out


def recall(args) -> int:
    rows = read_walks(args.walks)
    if args.detector is not None:  # the same walks, another detector
        import torch

        from playtester.perception.detector import load_detector

        torch.set_num_threads(args.threads)
        detector = load_detector(args.detector)
        replayed = []
        for game, seed in sorted({(r["game"], r["seed"]) for r in rows}):
            n = 1 + max(r["t"] for r in rows if r["seed"] == seed and r["game"] == game)
            for t, action, _, info, dets in play(game, seed, n, detector, every=EVERY):
                replayed.append({"game": game, "seed": seed, "t": t, "action": action, "detections": dets,
                                 "labels": in_view(info, detector.classes)})
        rows = replayed
    print("| threshold | frames | testable OOIs in view | recall | testable detections | of no object | a 100 frames | precision |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in recall_table(rows, thresholds(args), args.min_height):
        print(f"| {name(r['threshold'])} | {r['frames']} | {r['in_view']} | {fmt(r['recall'])} | {r['detections']} | {r['false']} | "
              f"{r['false_per_100_frames']:.1f} | {fmt(r['precision'])} |")
    return 0


def fmt(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"


def confirm_table(rows: list[dict[str, Any]], hits: int, window: int, threshold: float, min_height: float) -> dict[str, Any]:
    """One k/n and threshold replayed over the walks: targets, real ones, distinct real OOIs, passes."""
    from playtester.perception.candidates import ConfirmConfig, ConfirmTracker
    from playtester.tester.identity import iou

    tracker = ConfirmTracker(ConfirmConfig(hits, window))
    targets: list[tuple[Any, int, Any]] = []
    walk, passes, confirming, taken = None, 0, False, set()
    for r in rows:
        if (r["game"], r["seed"]) != walk:
            tracker.reset()
            walk, confirming, taken = (r["game"], r["seed"]), False, set()
        if r["t"] % EVERY and not confirming:
            continue
        passes += 1
        tracker.update([d for d in r["detections"] if d["score"] >= cut(threshold, d["class"])])
        for c in tracker.candidates:
            if c.detection is not None and c.confirmed and c.height >= min_height and c.id not in taken:
                taken.add(c.id)
                best = max(r["labels"], key=lambda label: iou(c.box, label["box"]), default=None)
                real = best is not None and iou(c.box, best["box"]) >= 0.3
                targets.append((walk, r["t"], best["ooi"] if real else None))
        confirming = any(not c.confirmed and c.height >= min_height for c in tracker.candidates)
    real = [t for t in targets if t[2] is not None]
    return {"k": hits, "n": window, "threshold": threshold, "targets": len(targets), "real": len(real),
            "precision": len(real) / len(targets) if targets else None, "oois": len({(t[0], t[2]) for t in real}),
            "passes": passes}


def confirm(args) -> int:
    rows = read_walks(args.walks)
    print("| k of n | threshold | targets | of real objects | precision | distinct real OOIs | detector passes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kn in args.kn:
        k, n = (int(v) for v in kn.split("/"))
        for thr in thresholds(args):
            r = confirm_table(rows, k, n, thr, args.min_height)
            print(f"| {k}/{n} | {name(thr)} | {r['targets']} | {r['real']} | {fmt(r['precision'])} | {r['oois']} | {r['passes']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    c = sub.add_parser("collect", help="random walks with the detector on every frame, scored by the engine's labels")
    c.add_argument("--game", default="doom:park:1:24x24")
    c.add_argument("--detector", type=Path, required=True)
    c.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    c.add_argument("--steps", type=int, default=1000)
    c.add_argument("--threads", type=int, default=1)
    c.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("recall", help="recall of testable OOIs in view and false detections, by threshold")
    r.add_argument("--walks", type=Path, required=True)
    r.add_argument("--detector", type=Path, default=None, help="play the walks again with this detector")
    r.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    r.add_argument("--thresholds-from", type=Path, nargs="*", default=[], help="also each checkpoint's per-class thresholds")
    r.add_argument("--min-height", type=float, default=28)
    r.add_argument("--threads", type=int, default=1)
    k = sub.add_parser("confirm", help="confirmation replayed over the walks for each k/n and threshold")
    k.add_argument("--walks", type=Path, required=True)
    k.add_argument("--kn", nargs="+", default=["1/1", "2/2", "2/3", "3/3", "3/4", "4/4", "4/5", "5/5", "5/6", "6/6"])
    k.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.6, 0.7])
    k.add_argument("--thresholds-from", type=Path, nargs="*", default=[], help="also each checkpoint's per-class thresholds")
    k.add_argument("--min-height", type=float, default=28)
    args = parser.parse_args(argv)
    return {"collect": collect, "recall": recall, "confirm": confirm}[args.part](args)


if __name__ == "__main__":
    sys.exit(main())
