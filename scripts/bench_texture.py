"""The texture oracle's precision and recall per bug kind, on the detector's boxes (issue 17).

The scripted inspector walks up to an OOI of a park the detector never trained on and circles it,
as a test does; the detector looks at every `--every`-th frame, its box of that OOI (named by
telemetry, as in a live run on the park) is cropped, and `TextureOracle` judges the OOI from
those crops. The park's ground truth knows each OOI's bug (none, stretched, lowres), so each
inspection is one judged OOI view:

    TP  the view's OOI has the bug, and the oracle says so
    FP  the oracle says the bug, and the OOI does not have it (healthy, or the other bug)
    FN  the OOI has the bug, and the oracle says another, none, or cannot judge (too few crops)

The same views are judged again on the engine's own boxes, so the table shows what the
detector's boxes cost against the oracle's own limit.

    playtester shots --game doom:park:1 --n 2000 --seed 0 --out shots-park1
    playtester train detector --coco shots-park1/labels.json --out det-park1.ckpt --backbone compact --pretrained none \\
        --epochs 6 --threads 1 --seed 0
    python scripts/bench_texture.py --detector det-park1.ckpt --reference shots-park1/labels.json \\
        --game doom:park:9 --views 200 --out /tmp/bench-texture

`--reference` is the COCO file of the detector's own shots (healthy boxes give each kind's
reference shape and texel size). The inspect episodes are recorded into `--out/demos` once and
reused by later runs with the same `--game`, `--views` and `--seed`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BUGS = ("stretched", "lowres")


def record_views(game: str, views: int, seed: int, folder: Path) -> None:
    """Inspect episodes, one judged OOI view each (skipped when `folder` already holds them)."""
    from playtester.cli import main

    marker = folder / "recorded.json"
    wanted = {"game": game, "views": views, "seed": seed}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return
    if folder.exists():
        shutil.rmtree(folder)
    code = main(["demos", "--game", game, "--behavior", "inspect", "--episodes", str(views), "--seed", str(seed),
                 "--out", str(folder)])
    if code != 0:
        raise SystemExit(f"recording the inspect episodes failed (exit {code})")
    marker.write_text(json.dumps(wanted))


def view_crops(ep, detect, every: int) -> tuple[int, str, list, list]:
    """The inspected OOI's id, its kind, and its crops `(frame, box)` by the detector and by the engine."""
    target = next(s["target_ooi"] for s in ep.steps if s.get("target_ooi") is not None)
    kind = None
    by_detector, by_engine = [], []
    for t in range(0, len(ep), every):
        step, frame = ep.steps[t], np.asarray(ep.frames[t])
        engine = next((o for o in step.get("objects", ()) if o.get("ooi") == target), None)
        if engine is not None:
            kind = engine["class"]
            by_engine.append((frame, engine["box"]))
        info = {"position": step["position"], "angle": step["angle"]}
        mine = [d for d in detect(frame, info) if d["ooi"] == target]
        if mine:
            by_detector.append((frame, max(mine, key=lambda d: d["score"])["box"]))
    return target, kind, by_detector, by_engine


def score(judged: list[dict[str, Any]], key: str) -> dict[str, dict[str, float]]:
    """TP, FP, FN, precision and recall per bug kind over the views' verdicts under `key`."""
    out = {}
    for bug in BUGS:
        tp = sum(v["bug"] == bug and v[key] == bug for v in judged)
        fp = sum(v["bug"] != bug and v[key] == bug for v in judged)
        fn = sum(v["bug"] == bug and v[key] != bug for v in judged)
        out[bug] = {"tp": tp, "fp": fp, "fn": fn, "views": sum(v["bug"] == bug for v in judged),
                    "precision": tp / (tp + fp) if tp + fp else float("nan"),
                    "recall": tp / (tp + fn) if tp + fn else float("nan")}
    return out


def table(results: dict[str, Any]) -> str:
    lines = ["| boxes | bug | views with it | TP | FP | FN | precision | recall | no verdict (all views) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for boxes in ("detector", "engine"):
        for bug, s in results[boxes].items():
            lines.append(f"| {boxes} | {bug} | {s['views']} | {s['tp']} | {s['fp']} | {s['fn']} | {s['precision']:.2f} | "
                         f"{s['recall']:.2f} | {results['no_verdict'][boxes]} |")
    return "\n".join(lines)


def by_kind(judged: list[dict[str, Any]]) -> str:
    """Per OOI kind: its views, and how many each box source left without a verdict or judged wrong."""
    lines = ["| kind | views | bugged | detector: no verdict | detector: wrong | engine: no verdict | engine: wrong |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind in sorted({v["kind"] for v in judged if v["kind"]}):
        views = [v for v in judged if v["kind"] == kind]
        counts = [sum(v[b] == "no verdict" for v in views) for b in ("detector", "engine")]
        wrong = [sum(v[b] not in ("no verdict", v["bug"]) for v in views) for b in ("detector", "engine")]
        lines.append(f"| {kind} | {len(views)} | {sum(v['bug'] != 'none' for v in views)} | {counts[0]} | {wrong[0]} | "
                     f"{counts[1]} | {wrong[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detector", type=Path, required=True, help="detector checkpoint")
    parser.add_argument("--reference", type=Path, required=True, help="COCO labels of the detector's shots (texture references)")
    parser.add_argument("--game", default="doom:park:9", help="a park the detector never trained on")
    parser.add_argument("--views", type=int, default=200, help="OOI inspections to judge")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inspections' targets and starts")
    parser.add_argument("--every", type=int, default=3, help="run the detector on every this many frames")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-texture"))
    args = parser.parse_args(argv)
    for path in (args.detector, args.reference):
        if not path.exists():
            print(f"error: {path} is missing", file=sys.stderr)
            return 2
    import torch

    from playtester.capture.games import park_config_from_spec
    from playtester.capture.park.build import build_park
    from playtester.datasets.episodes import load_episodes
    from playtester.tester.object_source import describe_detector
    from playtester.bugs.oracles import TextureOracle
    from playtester.perception.detector import load_detector
    from playtester.tester.loop import ModelDetector

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    record_views(args.game, args.views, args.seed, args.out / "demos")
    layout = build_park(park_config_from_spec(args.game)).layout()
    bug_of = {o.id: o.bug or "none" for o in layout.oois}
    oracle = TextureOracle.from_coco(args.reference)
    detect = ModelDetector(load_detector(args.detector), layout.oois)
    judged = []
    started = time.time()
    for ep in load_episodes(args.out / "demos")[: args.views]:
        target, kind, by_detector, by_engine = view_crops(ep, detect, args.every)
        verdicts = {}
        for boxes, crops in (("detector", by_detector), ("engine", by_engine)):
            v = oracle.judge(kind, crops) if kind else None
            verdicts[boxes] = "no verdict" if v is None else (v.bug or "none")
        judged.append({"episode": ep.name, "ooi": target, "kind": kind, "bug": bug_of[target],
                       "crops_detector": len(by_detector), "crops_engine": len(by_engine), **verdicts})
    results = {"game": args.game, "objects_found_by": describe_detector(args.detector), "views": len(judged),
               "detector": score(judged, "detector"), "engine": score(judged, "engine"),
               "no_verdict": {b: sum(v[b] == "no verdict" for v in judged) for b in ("detector", "engine")},
               "seconds": time.time() - started, "judged": judged}
    print(f"{args.game}: {len(judged)} OOI views; {results['objects_found_by']}; "
          f"{results['seconds'] / 60:.1f} min of detection and judging")
    print(table(results))
    print(by_kind(judged))
    (args.out / "texture.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out / 'texture.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
