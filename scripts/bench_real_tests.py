"""Are the tester's tests of real objects? Free-play walks scored by the engine's labels.

    python scripts/bench_real_tests.py collect --game doom:park:1:24x24 --detector DET --seeds 1 2 3 --steps 1000 --out walks.jsonl
    python scripts/bench_real_tests.py recall  --walks walks.jsonl [--detector DET2]
    python scripts/bench_real_tests.py confirm --walks walks.jsonl --kn 1/1 3/3 4/4 --thresholds 0.6 0.7
    python scripts/bench_real_tests.py runs --tester INSPECT --seeds 1 2 3 4 5 --out runs/ \
        --arm before DET 1/1 0.6 --arm together DET2 4/4 ckpt

`collect` plays uniform random actions (the random explorer's walk, no tests) on a Doom game from
fixed seeds, runs the detector on every frame and writes one JSON line a step: the action, the
detections at score ≥ 0.2, the picture's shift since the last step (`view_shift`) and, for
scoring only, the engine's labelled objects in view.

`recall` scores a walk file: of the OOIs in view at a box height the tester would test (the
engine's label box at least `min_box_height`, 28 px), the share a detection of that class boxes
(IoU ≥ 0.5) at the run's threshold, on the frames the tester loop looks at (every 4th step); and
the detections at that height that box no labelled object (false detections a frame). With
`--detector` the walk is played again (the same seeds and actions: the engine is deterministic)
with another detector.

`confirm` replays a walk's detections through `ConfirmTracker` (`playtester.perception.candidates`)
as the tester loop does (a pass every 4th step, and every step while a candidate close enough to
test waits; the candidates' boxes moved by the view's shift since the last pass, summed over the
steps between, unless `--shift no`; a candidate whose boxes all scored `--sure` or above needing
one hit fewer, as in a run whose detector was calibrated among background images), for each k/n and threshold: the candidates that would become test targets (once
each), what share of them box a real object (IoU ≥ 0.5 with a label, as a run scores a test), how many distinct real OOIs
they are, and the detector passes it took. The walk goes on where a run would test, so it
measures what confirmation keeps and drops, not the steps a run saves by not testing phantoms,
nor what the test policy's look at a waiting candidate (`TesterEnv._look_closer`) adds (`runs` measures both).

`follow` takes the real objects a detection boxes in one frame of a walk and again in the next
(the frames a waiting candidate's passes look at) and counts how often `ConfirmTracker` would
match the second box to the first, with the view's shift taken off and without, by action.

`vet` copies the candidate negatives of runs (`negatives/images`) whose frame the game's labels
found empty of the detector's kinds (rejected candidates scored `phantom`, nothing `in_view`) into
one folder for `train detector --negatives`, the labels standing in for the person who looks at
each frame first.

`runs` plays real tester runs (`playtester run explore`, the random explorer unless `--explorer`)
for each arm and seed, an arm being a name, a detector, k/n and a score threshold (a number, or
`ckpt`: the per-class thresholds the checkpoint keeps), and tabulates their summary.json: tests,
phantom tests, test precision, real OOIs tested per 10 000 steps, the test policy's success on
real objects and why it failed, mean over seeds with each seed's figure beside. A run folder that
has its summary.json is read, not played again.

The engine's labels only score here; nothing they say reaches the detector or the tracker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

LOW_SCORE = 0.2
"""Detections kept in a walk file: this and above (the sweeps pick higher thresholds from them)."""
EVERY = 4
"""The tester loop's `detect_every`: the frames it looks at."""


def walk_actions(seed: int, steps: int, n_actions: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(a) for a in rng.integers(n_actions, size=steps)]


def play(game: str, seed: int, steps: int, detector, every: int = 1):
    """One random walk: yields (t, action, frame, info, detections) for every `every`-th step's frame."""
    from playtester.capture.games import make_game

    from playtester.perception.candidates import view_shift

    env = make_game(game)
    try:
        obs, info = env.reset(seed=seed)
        for t, action in enumerate(walk_actions(seed, steps, env.action_space.n)):
            before = obs
            obs, _, terminated, truncated, info = env.step(action)
            info = {**info, "view_shift": view_shift(before, obs)}
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
                shift = [round(v, 2) for v in info["view_shift"] or (0.0, 0.0)]
                f.write(json.dumps({"game": args.game, "seed": seed, "t": t, "action": action, "angle": round(info.get("angle", 0.0), 2),
                                    "shift": shift,
                                    "detections": dets, "labels": in_view(info, detector.classes)}) + "\n")
            print(f"seed {seed}: done", flush=True)
    return 0


def read_walks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cut(threshold: float | dict[str, float], kind: str) -> float:
    """The score a detection of `kind` needs: one threshold, or a checkpoint's per-class ones (0.6 where it has none)."""
    return threshold.get(kind, 0.6) if isinstance(threshold, dict) else threshold


def thresholds(args) -> list[float | dict[str, float]]:
    """`--thresholds`, and the per-class thresholds of `--thresholds-from` checkpoints as kept (also
    those a run would not use: picked without background images), then as a run takes them where
    that differs (none under `RUN_FLOOR`)."""
    from playtester.perception.calibration import read_thresholds

    out: list[float | dict[str, float]] = list(args.thresholds)
    for p in args.thresholds_from:
        kept, run = read_thresholds(p, even_unusable=True), read_thresholds(p)
        out += [kept] + ([run] if run and run != kept else [])
    return out


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


def confirm_table(rows: list[dict[str, Any]], hits: int, window: int, threshold: float, min_height: float,
                  shifts: bool = True, sure: float | None = None) -> dict[str, Any]:
    """One k/n and threshold replayed over the walks: targets, real ones, distinct real OOIs, passes;
    the candidates' boxes moved by the view's shift between passes as a run moves them (`shifts`;
    a walk file written before the shift was recorded has none); a candidate whose boxes all
    scored `sure` or above needing one hit fewer (None: never)."""
    from playtester.perception.candidates import ConfirmConfig, ConfirmTracker
    from playtester.tester.identity import iou
    from playtester.tester.scoring import MATCH_IOU

    tracker = ConfirmTracker(ConfirmConfig(hits, window, sure=sure))
    targets: list[tuple[Any, int, Any]] = []
    walk, passes, confirming, taken = None, 0, False, set()
    moved = np.zeros(2)  # the view's shift since the last pass, summed over the steps between
    for r in rows:
        if (r["game"], r["seed"]) != walk:
            tracker.reset()
            walk, confirming, taken = (r["game"], r["seed"]), False, set()
            moved[:] = 0
        moved += r.get("shift", (0.0, 0.0)) if shifts else 0.0
        if r["t"] % EVERY and not confirming:
            continue
        passes += 1
        tracker.update([d for d in r["detections"] if d["score"] >= cut(threshold, d["class"])], shift=(float(moved[0]), float(moved[1])))
        moved[:] = 0
        for c in tracker.candidates:
            if c.detection is not None and c.confirmed and c.height >= min_height and c.id not in taken:
                taken.add(c.id)
                best = max(r["labels"], key=lambda label: iou(c.box, label["box"]), default=None)
                real = best is not None and iou(c.box, best["box"]) >= MATCH_IOU
                targets.append((walk, r["t"], best["ooi"] if real else None))
        confirming = any(not c.confirmed and c.height >= min_height for c in tracker.candidates)
    real = [t for t in targets if t[2] is not None]
    walks = sorted({(r["game"], r["seed"]) for r in rows})
    per_walk = [f"{sum(t[0] == w and t[2] is not None for t in targets)}/{sum(t[0] == w for t in targets)}" for w in walks]
    return {"k": hits, "n": window, "threshold": threshold, "targets": len(targets), "real": len(real),
            "precision": len(real) / len(targets) if targets else None, "oois": len({(t[0], t[2]) for t in real}),
            "passes": passes, "per_walk": per_walk}


def sure_score(text: str) -> float | None:
    """`--sure`: a score in (0, 1], or none."""
    if text == "none":
        return None
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: a score in (0, 1], or none")
    return value


def confirm(args) -> int:
    from playtester.perception.candidates import CONFIRM_SURE

    rows = read_walks(args.walks)
    print("| k of n | sure score | threshold | view shift taken off | targets | of real objects | precision | distinct real OOIs | detector passes | real/targets a walk |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for kn in args.kn:
        k, n = (int(v) for v in kn.split("/"))
        for sure in args.sure or [CONFIRM_SURE]:
            for thr in thresholds(args):
                for shifts in {"yes": (True,), "no": (False,), "both": (True, False)}[args.shift]:
                    r = confirm_table(rows, k, n, thr, args.min_height, shifts, sure)
                    print(f"| {k}/{n} | {'none' if sure is None else sure} | {name(thr)} | {'yes' if shifts else 'no'} | {r['targets']} | "
                          f"{r['real']} | {fmt(r['precision'])} | {r['oois']} | {r['passes']} | {' '.join(r['per_walk'])} |")
    return 0


def follow(args) -> int:
    """Of the real objects a detection boxes in one frame and again in the next (the frames a
    waiting candidate's passes look at), how often the next box is matched to the candidate, with
    the view's shift taken off and without, by the step's action."""
    from playtester.perception.candidates import Candidate, ConfirmConfig, ConfirmTracker
    from playtester.tester.identity import iou
    from playtester.tester.scoring import MATCH_IOU

    rows = read_walks(args.walks)
    tracker = ConfirmTracker(ConfirmConfig())
    counts: dict[Any, list[int]] = {}

    def found(r: dict[str, Any], label: dict[str, Any]) -> dict[str, Any] | None:
        return next((d for d in r["detections"] if d["class"] == label["class"] and d["score"] >= args.threshold
                     and iou(d["box"], label["box"]) >= MATCH_IOU), None)

    for a, b in zip(rows, rows[1:]):
        if (a["game"], a["seed"]) != (b["game"], b["seed"]):
            continue
        dx, dy = b.get("shift", (0.0, 0.0))
        for label in a["labels"]:
            before = found(a, label) if label["box"][3] - label["box"][1] >= args.min_height else None
            again = next((l for l in b["labels"] if l["ooi"] == label["ooi"]), None)
            after = found(b, again) if before is not None and again is not None else None
            if after is None:
                continue
            x0, y0, x1, y1 = before["box"]
            kept = [tracker.match_cost(Candidate(0, label["class"], box, 1.0, 0), after["box"]) is not None
                    for box in ([x0, y0, x1, y1], [x0 + dx, y0 + dy, x1 + dx, y1 + dy])]
            row = counts.setdefault(b["action"], [0, 0, 0])
            row[0] += 1
            row[1] += kept[0]
            row[2] += kept[1]
    print("| action | boxed in both frames | matched to its candidate | with the view's shift taken off |")
    print("| --- | ---: | ---: | ---: |")
    for action in sorted(counts):
        n, plain, shifted = counts[action]
        print(f"| {action} | {n} | {plain} | {shifted} |")
    n, plain, shifted = (sum(v[i] for v in counts.values()) for i in range(3))
    print(f"| all | {n} | {plain} ({fmt(plain / n if n else None)}) | {shifted} ({fmt(shifted / n if n else None)}) |")
    return 0


def vet(args) -> int:
    """Copy the candidate negatives of runs whose frame the game's labels say shows none of the
    detector's kinds (rejected candidates scored `phantom` with nothing of its kinds `in_view`)
    into one folder of images for `train detector --negatives`, which trains on each as a
    background: the labels stand in for the person who looks at each frame first. Frames with a
    real object anywhere in them are left out."""
    import shutil

    from playtester.tester.runlog import read_jsonl

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    kept = left = 0
    for run in args.runs:
        records = [r for r in (read_jsonl(run / "rejected.jsonl") if (run / "rejected.jsonl").exists() else []) if r.get("negative")]
        for r in records:
            if r.get("target") == "phantom" and r.get("in_view", 1) == 0:
                shutil.copy(run / "negatives" / "images" / r["negative"], out / f"{run.name}-{r['negative']}")
                kept += 1
            else:
                left += 1
    print(f"{kept} frames the labels found empty copied to {out}; {left} left out (a real object in the box or in view, or not scored)")
    return 0


def play_run(arm: list[str], seed: int, args) -> dict[str, Any]:
    """One arm's run on one seed (played unless its folder has its summary); its summary."""
    import subprocess

    name, detector, kn, score = arm
    folder = args.out / f"{name}-seed{seed}"
    if not (folder / "summary.json").exists():
        k, n = (int(v) for v in kn.split("/"))
        config = args.out / f"{name}.yaml"
        config.write_text(f"confirm_hits: {k}\nconfirm_window: {n}\n" + ("" if score == "ckpt" else f"min_score: {float(score)}\n")
                          + "".join(f"{line}\n" for line in args.set))
        command = ["playtester", "run", "explore", "--game", args.game, "--explorer", args.explorer, "--tester", str(args.tester),
                   "--detector", detector, "--episodes", str(args.episodes), "--steps", str(args.steps), "--seed", str(seed),
                   "--config", str(config), "--out", str(folder), "--overwrite"]
        if args.preference is not None:
            command += ["--preference", str(args.preference)]
        print(" ".join(command), flush=True)
        with open(args.out / f"{name}-seed{seed}.log", "w") as log:
            subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
    return json.loads((folder / "summary.json").read_text())


def run_figures(s: dict[str, Any]) -> dict[str, float | None]:
    """The figures of one run's summary."""
    tests, phantom = s.get("tests", 0), s.get("tests_unmatched", 0)
    failures = s.get("test_failures_on_real") or {}
    return {"tests": tests, "phantom": phantom, "phantom share": phantom / tests if tests else None,
            "of which another kind": sum((s.get("tests_unmatched_showing") or {}).values()),
            "real OOIs / 10k steps": 1e4 * s.get("oois_tested", 0) / max(1, s.get("steps", 0)),
            "real tests": s.get("tests_matched", 0), "success on real": s.get("test_success_on_real"),
            **{f"failed: {why}": failures.get(why, 0) for why in ("blocked", "turned away", "object lost", "other")}}


def runs(args) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    table = {}
    for arm in args.arm:
        per_seed = [run_figures(play_run(arm, seed, args)) for seed in args.seeds]
        table[arm[0]] = per_seed
        pooled_tests = sum(r["tests"] for r in per_seed)
        pooled = {"tests": pooled_tests, "phantom": sum(r["phantom"] for r in per_seed),
                  "real tests": sum(r["real tests"] for r in per_seed)}
        print(f"{arm[0]}: {json.dumps(pooled)}", flush=True)
    (args.out / "runs.json").write_text(json.dumps({"arms": args.arm, "seeds": args.seeds, "steps": args.steps,
                                                     "episodes": args.episodes, "game": args.game, "runs": table}, indent=1))
    keys = ["tests", "phantom", "phantom share", "of which another kind", "real OOIs / 10k steps", "success on real",
            "failed: blocked", "failed: turned away", "failed: object lost", "failed: other"]
    print("| arm | " + " | ".join(keys) + " |")
    print("| --- |" + " ---: |" * len(keys))
    for name, per_seed in table.items():
        cells = []
        for key in keys:
            values = [r[key] for r in per_seed]
            if key == "phantom share":  # pooled over seeds: phantom tests of all tests
                t = sum(r["tests"] for r in per_seed)
                mean = f"{100 * sum(r['phantom'] for r in per_seed) / t:.0f} %" if t else "–"
            elif key == "success on real":
                real = sum(r["real tests"] for r in per_seed)
                mean = f"{100 * sum((r[key] or 0) * r['real tests'] for r in per_seed) / real:.0f} %" if real else "–"
            else:
                mean = f"{np.mean(values):.1f}"
            each = "/".join("–" if v is None else (f"{100 * v:.0f}" if "share" in key or "success" in key else f"{v:g}")
                            for v in values)
            cells.append(f"{mean} ({each})")
        print(f"| {name} | " + " | ".join(cells) + " |")
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
    k.add_argument("--shift", choices=("yes", "no", "both"), default="yes",
                   help="move the candidates' boxes by the view's shift between passes (as a run does), or not, or both")
    k.add_argument("--sure", type=sure_score, nargs="+", default=None, metavar="SCORE|none",
                   help="a candidate whose boxes all scored this or above needs one hit fewer (none: never; default: 0.9, as a run with a calibrated detector)")
    f = sub.add_parser("follow", help="consecutive frames' boxes of a real object: matched to its candidate with the view's shift and without")
    f.add_argument("--walks", type=Path, required=True)
    f.add_argument("--threshold", type=float, default=0.6)
    f.add_argument("--min-height", type=float, default=28)
    v = sub.add_parser("vet", help="the runs' candidate negatives the labels found empty, into one folder for train detector --negatives")
    v.add_argument("--runs", type=Path, nargs="+", required=True)
    v.add_argument("--out", type=Path, required=True)
    u = sub.add_parser("runs", help="tester runs for each arm and seed: phantom tests, real OOIs tested, success on real")
    u.add_argument("--arm", nargs=4, action="append", required=True, metavar=("NAME", "DETECTOR", "K/N", "SCORE"),
                   help="a name, a detector checkpoint, k/n, and a score threshold (a number, or ckpt: the checkpoint's per-class ones)")
    u.add_argument("--game", default="doom:park:1:24x24")
    u.add_argument("--explorer", default="random", choices=("random", "inspector", "ppgta"))
    u.add_argument("--tester", type=Path, required=True, help="the test policy (inspect.ckpt)")
    u.add_argument("--preference", type=Path, default=None, help="the path policy (with --explorer ppgta)")
    u.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    u.add_argument("--episodes", type=int, default=1)
    u.add_argument("--steps", type=int, default=1000)
    u.add_argument("--out", type=Path, required=True)
    u.add_argument("--set", nargs="*", default=[], metavar="KEY: VALUE",
                   help="more lines of every arm's run config (e.g. 'track_every: 1')")
    args = parser.parse_args(argv)
    return {"collect": collect, "recall": recall, "confirm": confirm, "follow": follow, "vet": vet, "runs": runs}[args.part](args)


if __name__ == "__main__":
    sys.exit(main())
