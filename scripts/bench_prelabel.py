"""Labelling with the model's help (`shots --demos … --prelabel`): how many boxes must a person
draw or fix to reach 80 % AP50 on every class, with pre-labels against without?

The park stands in for a studio's game and its ground truth for the person: a pool of frames to
label (`shots --demos` on park demos: every box the engine knows, tiny ones marked crowd), and a
test set of frames from another park. Labelling goes in rounds of `--batch` frames; after each
round a detector is trained on every frame labelled so far (`train detector`'s own recipe:
compact backbone from random init, its 70/10/20 split, `--steps` gradient steps whatever the set's
size) and scored on the test set. An arm stops when every class reaches `--bar` AP50.

The arms, each from the same first batch, labelled by hand: the first `--batch` frames in a random
order, or with `--first-per-class K` the frames a person picks so that every class has K boxes
(going through the random order, each frame that shows a class still short of K; looking is free,
every box of a picked frame is drawn), the random order going on after them:

- **by hand**: the frames in a random order, every box drawn (cost: one action a box);
- **pre-labels, random order**: the same frames, each round's new frames pre-labelled by the
  detector of the round before; the person corrects them (cost: `perception/prelabel.py`'s model:
  an accepted box is free, a box fixed, drawn or deleted is one action). The labels that result
  are the true ones (a box is accepted only within IoU 0.8 of its true box), so this arm trains the
  very detectors of the first and only its cost differs;
- **pre-labels, most uncertain first** (what `shots --prelabel` writes): each round the detector of
  the round before pre-labels every frame not yet labelled and the person takes the `--batch` most
  uncertain, corrected as above;
- **pre-labels, most uncertain spread over episodes** (`--arms spread`): as the one before, but a
  round takes at most `SPREAD_PER_EPISODE` frames of one demo episode, none within `SPREAD_STEPS`
  steps of another (the most uncertain frames crowd into a few episodes: 14 of 36 held seed 0's
  first 50, 9 of them from one).

Costs are counted under two models. Strict (`perception/prelabel.py`'s, the one the bar is read
on): a pre-label is accepted free only within IoU 0.8 of its true box, a looser one is a fix; the
labels the arm then trains on are the true boxes, as the person left them. Lenient (the model the
issue proposes): any pre-label of the right class at IoU 0.5 is accepted free; it is optimistic
here, since the detectors still train on the true boxes where a person would have kept the loose
ones.

No arm ever sees a detector trained on more than its own labels (not the demo's detector): the
pre-labels come from the detector the person's own labels made, round after round, as in a
studio. The first batch is labelled by hand in every arm, so it costs the same everywhere. Costs
are also given at other pre-label thresholds (`--thresholds`), from the same detections.

Data (the figures in docs/benchmarks/own-game.md): `--make-data DIR` makes it with the project's
own commands (skipping what DIR has): the demo's demos on the park (`playtester demo`'s default
profile: 24 inspect and 12 path episodes) as the pool, one frame in 5, and 16 + 6 episodes of
park 7 as the test set; then `--pool DIR/pool/labels.json --test DIR/test/labels.json`:

    python scripts/bench_prelabel.py --make-data data --workdir bench --warm-steps 264 --seeds 0

Each round's detector and scores are kept in --workdir, so a stopped run goes on where it was.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np


DATA = (  # (folder made, playtester command line)
    ("pool-demos/inspect", ["demos", "--game", "doom:park", "--behavior", "inspect", "--episodes", "24", "--seed", "0"]),
    ("pool-demos/path", ["demos", "--game", "doom:park", "--behavior", "path", "--episodes", "12", "--steps", "300",
                         "--seed", "1000"]),
    ("pool", ["shots", "--demos", "{dir}/pool-demos", "--every", "5"]),
    ("test-demos/inspect", ["demos", "--game", "doom:park:7", "--behavior", "inspect", "--episodes", "16"]),
    ("test-demos/path", ["demos", "--game", "doom:park:7", "--behavior", "path", "--episodes", "6"]),
    ("test", ["shots", "--demos", "{dir}/test-demos", "--every", "5"]),
)


def make_data(folder: Path) -> None:
    """The pool and the test set (`DATA`), each command run unless its folder is there."""
    import subprocess
    import sys

    for name, args in DATA:
        out = folder / name
        if out.exists():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "playtester", *[a.format(dir=folder) for a in args], "--out", str(out)]
        print("$", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def subset_file(pool: dict[str, Any], ids: list[int], path: Path) -> Path:
    """A COCO file of the pool's images `ids` (their true boxes: the corrected labels)."""
    keep = set(ids)
    doc = {**pool, "images": [im for im in pool["images"] if im["id"] in keep],
           "annotations": [a for a in pool["annotations"] if a["image_id"] in keep]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def train_round(args, pool_doc: dict, ids: list[int], work: Path, seed: int, previous: Path | None):
    """The detector of one round (trained once; a later run reads it back), or None when the labels
    so far are too few to train on (a class with under 5 training boxes). With `--warm-steps`, a
    round after the first goes on from the arm's `previous` detector (`train detector --pretrained
    PREVIOUS.ckpt`, as a studio would) for that many steps instead of `--steps` from `--pretrained`
    (random init, or a body trained on the game's unlabelled play)."""
    from playtester.errors import UserError
    from playtester.perception import recipes
    from playtester.perception.detector import load_detector

    ckpt = work / "detector.ckpt"
    if (work / "too_few.txt").exists():
        return None
    if not ckpt.exists():
        labels = subset_file(pool_doc, ids, work / "labels.json")
        warm = args.warm_steps and previous is not None and previous.exists()
        steps = args.warm_steps if warm else args.steps
        epochs = max(1, math.ceil(steps / math.ceil(0.7 * len(ids) / 8)))
        recipe = recipes.DetectorRecipe(coco=labels, out=ckpt, images=args.pool.parent, backbone="compact",
                                        pretrained=str(previous) if warm else args.pretrained, image_size=args.image_size, epochs=epochs,
                                        seed=seed, threads=args.threads, logdir=work / "logs")
        try:
            recipes.train_detector(recipe)
        except UserError as e:
            (work / "too_few.txt").write_text(str(e))
            return None
    return load_detector(ckpt, args.device)


def score(detector, test, work: Path) -> dict[str, float]:
    from playtester.perception.detector_eval import evaluate_detector

    path = work / "test_ap50.json"
    if not path.exists():
        table = evaluate_detector(detector, test)
        path.write_text(json.dumps(dict(zip(table.classes, table.ap50))))
    return json.loads(path.read_text())


def raw_detections(detector, pool, ids: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every candidate detection (score ≥ the uncertainty floor) on the pool's images `ids`."""
    from playtester.perception.detector_eval import predict_set
    from playtester.perception.prelabel import CANDIDATE_SCORE

    images = pool.subset(ids)
    out = {}
    for im, p in zip(images.images, predict_set(detector, images)):
        keep = p["scores"].numpy() >= CANDIDATE_SCORE
        out[im.id] = (p["boxes"].numpy()[keep], p["labels"].numpy()[keep], p["scores"].numpy()[keep])
    return out


def cost_keys(thresholds: list[float]) -> list[str]:
    """The keys `costs` answers with: each threshold, strict and lenient."""
    return [f"{t:g}{suffix}" for t in thresholds for suffix in ("", "/lenient")]


def costs(pool_by_id, detections, ids: list[int], thresholds: list[float]) -> dict[str, dict[str, int]]:
    """The person's corrections of frames `ids` at each pre-label threshold (keys `0.5`), and under
    the lenient model, where a match at IoU 0.5 of the right class is accepted (keys `0.5/lenient`)."""
    from playtester.perception.prelabel import MATCH_IOU, Corrections, corrections, prelabels_of

    out = {}
    for th in thresholds:
        for accept, suffix in ((None, ""), (MATCH_IOU, "/lenient")):
            total = Corrections()
            for i in ids:
                im = pool_by_id[i]
                pred = prelabels_of(*detections[i], th) if detections is not None else None
                kw = {} if accept is None else {"accept_iou": accept}
                total = total + corrections(pred, im.boxes, im.labels, im.crowd_boxes, **kw)
            out[f"{th:g}{suffix}"] = {"accepts": total.accepts, "fixes": total.fixes, "draws": total.draws,
                                      "deletes": total.deletes, "actions": total.actions}
    return out


def hand_cost(pool_by_id, ids: list[int]) -> int:
    return int(sum(len(pool_by_id[i].boxes) for i in ids))


def picked_first(order: list[int], by_id, per_class: int) -> list[int]:
    """The first batch as a person picks it: going through the frames in `order`, every frame that
    shows a class with fewer than `per_class` boxes labelled so far (all its boxes drawn), until
    every class has that many or the frames run out. Looking at a frame is free; drawing is not."""
    have: dict[int, int] = {}
    classes = {int(c) for im in by_id.values() for c in im.labels}
    picked = []
    for i in order:
        if all(have.get(c, 0) >= per_class for c in classes):
            break
        labels = [int(c) for c in by_id[i].labels]
        if any(have.get(c, 0) < per_class for c in labels):
            picked.append(i)
            for c in labels:
                have[c] = have.get(c, 0) + 1
    return picked


def round_ends(n: int, first: int, batch: int) -> list[int]:
    """How many frames are labelled after each round: `first`, then `batch` more a round, up to `n`."""
    return list(range(first, n, batch)) + [n]


def same_rounds(args, seed: int, first_batch: list[int]) -> None:
    """The rounds a workdir keeps are read back only by a run of the same settings: the first one
    writes them down, a later one with others is refused in one line."""
    settings = {"first_batch": first_batch, "batch": args.batch, "steps": args.steps, "warm_steps": args.warm_steps,
                "image_size": args.image_size, "pretrained": str(args.pretrained)}
    path = args.workdir / f"s{seed}" / "settings.json"
    if path.exists():
        kept = json.loads(path.read_text())
        changed = sorted(k for k in settings if kept.get(k) != settings[k])
        if changed:
            raise SystemExit(f"{path.parent}: its rounds were made with other {', '.join(changed)} "
                             "(--first-per-class, --batch, --steps, --warm-steps, --image-size, --pretrained); use another --workdir")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))


def run_seed(args, seed: int, pool_doc, pool, test) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    order = [int(i) for i in rng.permutation([im.id for im in pool.images])]
    by_id = {im.id: im for im in pool.images}
    first = args.batch
    if args.first_per_class:
        picked = picked_first(order, by_id, args.first_per_class)
        taken = set(picked)
        order, first = picked + [i for i in order if i not in taken], len(picked)
    ends = round_ends(len(order), first, args.batch)
    same_rounds(args, seed, order[:first])
    th = [float(t) for t in args.thresholds]
    main_th = f"{args.threshold:g}"
    out: dict[str, Any] = {"seed": seed, "first_batch": first, "random": []}

    # -- random order: by hand, and pre-labelled by the round before ------------------------------
    hand, pre = 0, dict.fromkeys(cost_keys(th), 0)
    for r, end in enumerate(ends):
        batch = order[ends[r - 1] if r else 0:end]
        previous = None if r == 0 else out["random"][-1].get("_detector")
        dets = raw_detections(previous, pool, batch) if previous is not None else None
        spent = costs(by_id, dets, batch, th)
        hand += hand_cost(by_id, batch)
        for t in pre:
            pre[t] += spent[t]["actions"]
        labelled = order[:end]
        t0 = time.time()
        detector = train_round(args, pool_doc, labelled, args.workdir / f"s{seed}" / f"random-{r:02d}", seed,
                               args.workdir / f"s{seed}" / f"random-{r - 1:02d}" / "detector.ckpt" if r else None)
        ap = score(detector, test, args.workdir / f"s{seed}" / f"random-{r:02d}") if detector is not None else {}
        row = {"round": r, "images": len(labelled), "hand_boxes": hand, "prelabel_actions": dict(pre),
               "round_corrections": spent[main_th], "ap50": ap, "seconds": round(time.time() - t0, 1), "_detector": detector}
        out["random"].append(row)
        print(f"seed {seed} random    round {r}: {len(labelled)} images, by hand {hand} boxes, pre-labelled "
              f"{pre[main_th]} actions; AP50 {fmt(ap)}", flush=True)
        if worst(ap) >= args.bar:
            break
    for row in out["random"]:
        row.pop("_detector", None)

    for arm in args.arms:
        out[arm] = active_arm(args, seed, arm, order, first, pool_doc, pool, test, by_id, th, main_th)
    return out


ARMS = {"uncertain": "most uncertain first", "spread": "most uncertain, spread over episodes"}
"""The arms that pick each round's frames with the detector of the round before (`active_arm`)."""
SPREAD_PER_EPISODE = 2
"""`spread`: at most this many frames of one demo episode in a round's batch."""
SPREAD_STEPS = 10
"""`spread`: no two frames of a round's batch within this many steps of one episode."""


def spread(ranked: list[int], where: dict[int, tuple[str, int]], n: int) -> list[int]:
    """The first `n` of `ranked` (most uncertain first) taken so that no episode gives more than
    `SPREAD_PER_EPISODE` of them and no two are within `SPREAD_STEPS` steps of one episode; the
    rest of `ranked` fills up if that leaves fewer than `n`."""
    picked: list[int] = []
    per: dict[str, list[int]] = {}
    for i in ranked:
        episode, t = where[i]
        near = per.get(episode, [])
        if len(near) >= SPREAD_PER_EPISODE or any(abs(t - u) <= SPREAD_STEPS for u in near):
            continue
        picked.append(i)
        per.setdefault(episode, []).append(t)
        if len(picked) == n:
            return picked
    taken = set(picked)
    return picked + [i for i in ranked if i not in taken][:n - len(picked)]


def active_arm(args, seed: int, arm: str, order: list[int], first: int, pool_doc, pool, test, by_id, th, main_th) -> list[dict]:
    """An arm that picks each round's frames with the detector of the round before: `uncertain`,
    the most uncertain frames (what `shots --prelabel` orders by); `spread`, the most uncertain
    spread over the demo's episodes (`spread`). The first batch is the random order's, by hand."""
    from playtester.perception.prelabel import frame_uncertainty

    where = {im["id"]: (str(im.get("episode", "")), int(im.get("t", 0))) for im in pool_doc["images"]}
    folder = args.workdir / f"s{seed}"
    rows: list[dict] = []
    labelled = order[:first]
    spent_total = dict.fromkeys(cost_keys(th), hand_cost(by_id, labelled))  # the first batch: by hand
    detector = train_round(args, pool_doc, labelled, folder / "random-00", seed, None)  # the random order's round 0
    for r in range(len(round_ends(len(order), first, args.batch))):  # as many rounds as the random order's
        ap = score(detector, test, folder / ("random-00" if r == 0 else f"{arm}-{r:02d}")) if detector is not None else {}
        rows.append({"round": r, "images": len(labelled), "prelabel_actions": dict(spent_total), "ap50": ap})
        print(f"seed {seed} {arm:9} round {r}: {len(labelled)} images, pre-labelled {spent_total[main_th]} actions; "
              f"AP50 {fmt(ap)}", flush=True)
        if worst(ap) >= args.bar or len(labelled) == len(order):
            break
        rest = [i for i in order if i not in set(labelled)]
        if detector is None:  # too few labels to train on yet: the next frames by hand, in the random order
            batch, dets = rest[:args.batch], None
        else:
            dets = raw_detections(detector, pool, rest)
            ranked = sorted(rest, key=lambda i: -frame_uncertainty(dets[i][2]))
            batch = spread(ranked, where, args.batch) if arm == "spread" else ranked[:args.batch]
        spent = costs(by_id, dets, batch, th)
        for t in spent_total:
            spent_total[t] += spent[t]["actions"]
        rows[-1]["next_corrections"] = spent[main_th]
        labelled = labelled + batch
        before = folder / ("random-00" if r == 0 else f"{arm}-{r:02d}") / "detector.ckpt"
        detector = train_round(args, pool_doc, labelled, folder / f"{arm}-{r + 1:02d}", seed, before)
    return rows


def worst(ap: dict[str, float]) -> float:
    """The lowest AP50 over the classes (a class the detector never found counts 0)."""
    return min((v if v == v else 0.0) for v in ap.values()) if ap else 0.0


def fmt(ap: dict[str, float]) -> str:
    return ", ".join(f"{c} {100 * v:.0f} %" for c, v in ap.items()) if ap else "not trained (too few boxes)"


def reached(rows: list[dict], bar: float, key: str, th: str | None = None) -> int | None:
    """The cost at the first round whose every class reached the bar; None if none did."""
    for row in rows:
        if worst(row["ap50"]) >= bar:
            value = row[key]
            return int(value[th] if th is not None else value)
    return None


def main() -> None:
    from playtester.perception.prelabel import PRELABEL_SCORE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", type=Path, help="COCO labels.json of the frames to label (true boxes).")
    ap.add_argument("--test", type=Path, help="COCO labels.json of the test frames (another park).")
    ap.add_argument("--make-data", type=Path, metavar="DIR", help="Make the pool and the test set in DIR first and use them.")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--batch", type=int, default=100, help="Frames labelled a round.")
    ap.add_argument("--first-per-class", type=int, default=0, metavar="K",
                    help="The first batch a person picks: frames until every class has K boxes (0: the first --batch "
                         "frames of the random order).")
    ap.add_argument("--steps", type=int, default=528, help="Gradient steps of each round's training (the demo's).")
    ap.add_argument("--bar", type=float, default=0.8, help="AP50 every class must reach.")
    ap.add_argument("--threshold", type=float, default=PRELABEL_SCORE,
                    help="The pre-label score threshold the tables are read at (shots --prelabel's).")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.3, 0.5, 0.6, 0.7, 0.8, 0.9],
                    help="Thresholds also costed.")
    ap.add_argument("--warm-steps", type=int, default=0,
                    help="Rounds after the first go on from the arm's last detector for this many steps (0: every round "
                         "trains --steps from random init).")
    ap.add_argument("--pretrained", default="none",
                    help="What a round with no detector before it starts from: none (random init, `train detector`'s "
                         "default here) or an encoder checkpoint whose compact trunk becomes the body (`train encoder "
                         "--trunk compact` on the game's unlabelled play).")
    ap.add_argument("--image-size", type=int, default=128,
                    help="The detectors' input size (train detector --image-size): frames are scaled to fit it.")
    ap.add_argument("--arms", nargs="*", default=["uncertain"], choices=sorted(ARMS),
                    help="Arms that pick their frames with the detector, beside by hand and random order: uncertain "
                         "(what shots --prelabel writes first), spread (the most uncertain spread over the episodes); `--arms` "
                         "with none: by hand and random order alone.")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default).")
    ap.add_argument("--device", default="cpu", help="Where the detectors predict and are scored (cpu or cuda); "
                                                    "training takes the GPU where there is one.")
    args = ap.parse_args()
    if args.make_data is not None:
        make_data(args.make_data)
        args.pool, args.test = args.make_data / "pool" / "labels.json", args.make_data / "test" / "labels.json"
    if args.pool is None or args.test is None:
        ap.error("give --pool and --test, or --make-data DIR")
    if args.threshold not in args.thresholds:
        args.thresholds.append(args.threshold)

    from playtester.datasets.detection import load_coco

    pool_doc = json.loads(args.pool.read_text())
    pool = load_coco(args.pool)
    test = load_coco(args.test, classes=pool.classes)
    print(f"pool: {len(pool.images)} frames, boxes {pool.counts()}; test: {len(test.images)} frames, boxes {test.counts()}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    results = [run_seed(args, seed, pool_doc, pool, test) for seed in args.seeds]
    summary = []
    for model, suffix in (("strict: accepted only within IoU 0.8", ""), ("lenient: accepted at IoU 0.5", "/lenient")):
        th = f"{args.threshold:g}{suffix}"
        print(f"\nboxes a person draws, fixes or deletes until every class reaches {100 * args.bar:.0f} % AP50 "
              f"(pre-label threshold {args.threshold:g}; {model}):")
        columns = ["seed", "by hand", "pre-labels, random order", *(f"pre-labels, {ARMS[a]}" for a in args.arms),
                   *(f"ratio ({a} / hand)" for a in ["random", *args.arms])]
        print("| " + " | ".join(columns) + " |")
        print("|---:" * len(columns) + "|")
        for res in results:
            hand = reached(res["random"], args.bar, "hand_boxes")
            costs_of = {"random": reached(res["random"], args.bar, "prelabel_actions", th),
                        **{a: reached(res[a], args.bar, "prelabel_actions", th) for a in args.arms}}
            ratios = {a: c / hand if hand and c is not None else None for a, c in costs_of.items()}
            summary.append({"seed": res["seed"], "model": model, "hand": hand,
                            **{f"prelabel_{a}": c for a, c in costs_of.items()}, "ratios": ratios})
            shown = [str(c) if c is not None else "not reached" for c in costs_of.values()]
            print(f"| {res['seed']} | {hand if hand is not None else 'not reached'} | " + " | ".join(shown) + " | "
                  + " | ".join(f"{v:.2f}" if v else "–" for v in ratios.values()) + " |")
    (args.workdir / "report.json").write_text(json.dumps({"summary": summary, "seeds": results, "args": {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}, indent=1))
    print(f"\nevery round of every arm: {args.workdir / 'report.json'}")


if __name__ == "__main__":
    main()
