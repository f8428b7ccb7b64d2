"""How many labelled shots `train detector` needs with its defaults: AP50 per class on shots it
never saw, against shots per class, with the training's time (issue 44).

    python scripts/bench_few_shots.py --out /tmp/few --shots 10,25,50,100,250,500
    python scripts/bench_few_shots.py --out /tmp/few-map01 --game doom:freedoom2:MAP01 \\
        --classes Zombieman,ExplosiveBarrel,TorchTree,ArmorBonus --test-game doom:freedoom2:MAP01 --test-seed 1
    python scripts/bench_few_shots.py --out /tmp/few --shots 25,50 --seed 1    # another seed's shots and training
    python scripts/bench_few_shots.py --out /tmp/few --shots 25 --name steps600 -- --steps 600

For each number N of shots a class it makes `playtester shots --game GAME --n N·classes` (once; the
shots are balanced over the classes), trains `playtester train detector` on them with its defaults
(plus whatever follows `--`; `--seed S` seeds both the shots and the training), and scores the detector with `playtester eval detector --split all`
on `--test-n` shots of `--test-game` (the park of another seed by default: a park it never saw).
Each training runs as its own process with `OMP_NUM_THREADS=--threads`; its wall time, its CPU
time (user + sys) and the load average before it are recorded, since a shared machine's wall
clock says little. One JSON line a run goes to OUT/few_shots.jsonl, and a Markdown table is
printed at the end (of every run in the file).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

PARK_CLASSES = ["pillar", "barrel", "tire", "chair"]


def playtester(args: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> str:
    """Run `playtester ARGS`; its output (also written to `log`); exit on failure."""
    print("$ playtester " + " ".join(args), flush=True)
    done = subprocess.run([sys.executable, "-m", "playtester", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {}), "COLUMNS": "200"})
    out = done.stdout + done.stderr
    if log is not None:
        log.write_text(out)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): playtester {' '.join(args)}\n{out[-2000:]}")
    return out


def make_shots(game: str, n: int, seed: int, classes: list[str] | None, out: Path) -> Path:
    if not (out / "labels.json").is_file():
        playtester(["shots", "--game", game, "--n", str(n), "--seed", str(seed), "--out", str(out)]
                   + (["--classes", ",".join(classes)] if classes else []))
    return out / "labels.json"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_one(args, n_per_class: int, classes: list[str], test_labels: Path, extra: list[str]) -> dict:
    out = Path(args.out)
    seeded = f"-s{args.seed}" if args.seed else ""
    labels = make_shots(args.game, n_per_class * len(classes), args.seed, args.classes and classes,
                        out / f"shots-{n_per_class}{seeded}")
    ckpt = out / f"{args.name}-{n_per_class}{seeded}.ckpt"
    train = ["train", "detector", "--coco", str(labels), "--out", str(ckpt), "--logdir", str(out / "logs"),
             *(["--seed", str(args.seed)] if args.seed else []), *extra]
    log, timing = out / f"{args.name}-{n_per_class}{seeded}.log", out / f"{args.name}-{n_per_class}{seeded}.train.json"
    if ckpt.is_file() and timing.is_file():  # trained before this run was stopped: score it only
        trained = json.loads(timing.read_text())
    else:
        load = os.getloadavg()
        wall, cpu = time.perf_counter(), children_cpu()
        playtester(train, env={"OMP_NUM_THREADS": str(args.threads)}, log=log)
        wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
        trained = {"train_wall_s": round(wall, 1), "train_cpu_s": round(cpu, 1), "load_before": [round(v, 2) for v in load],
                   "load_after": [round(v, 2) for v in os.getloadavg()]}
        timing.write_text(json.dumps(trained))
    text = log.read_text()
    steps = int(re.search(r"steps (\d+)\)", " ".join(text.split())).group(1))
    table = out / f"{args.name}-{n_per_class}{seeded}-ap.json"
    playtester(["eval", "detector", "--ckpt", str(ckpt), "--coco", str(test_labels), "--split", "all", "--json", str(table)])
    ap = json.loads(table.read_text())
    import torch

    info = torch.load(ckpt, map_location="cpu", weights_only=False)["playtester"]
    held_out = info.get("held_out")
    return {
        "name": args.name, "seed": args.seed, "shots_per_class": n_per_class, "images": n_per_class * len(classes), "steps": steps,
        **trained, "threads": args.threads,
        "ap50": {c: v["ap50"] for c, v in ap["classes"].items()}, "map50": ap["all"]["ap50"], "map": ap["all"]["ap"],
        "test_boxes": {c: v["boxes"] for c, v in ap["classes"].items()},
        "held_out": None if held_out is None else {c: [v["ap50"], v.get("ap50_interval")] for c, v in held_out["classes"].items()},
        "warnings": [w for w in re.findall(r"(few training boxes[^:]*|too few for a detector|still rising|stopped at step \d+)",
                                           " ".join(text.split()))],
        "command": "playtester " + " ".join(train), "test": str(test_labels), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "val_history": info.get("val_history"),
    }


def markdown(rows: list[dict]) -> str:
    classes = list(rows[0]["ap50"])

    def pct(v):
        return "–" if v is None else f"{100 * v:.1f}"

    head = ("| run | shots a class (images) | steps | train wall / CPU s | load | "
            + " | ".join(f"{c} AP50" for c in classes) + " | all AP50 / AP | said |")
    lines = [head, "|" + " --- |" * (7 + len(classes))]
    for r in rows:
        cpu = "–" if r["train_cpu_s"] is None else f"{r['train_cpu_s']:.0f}"
        lines.append(f"| {r['name']} s{r.get('seed', 0)} | {r['shots_per_class']} ({r['images']}) | {r['steps']} | {r['train_wall_s']:.0f} / "
                     f"{cpu} | {r['load_before'][0]:.1f} | " + " | ".join(pct(r["ap50"][c]) for c in classes)
                     + f" | {pct(r['map50'])} / {pct(r['map'])} | {'; '.join(r['warnings']) or '–'} |")
    return "\n".join(lines)


def over_seeds(rows: list[dict]) -> str:
    """Per setting and shots a class: each class's AP50 as mean (lowest–highest) over the seeds run."""
    classes = list(rows[0]["ap50"])
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["name"], r["shots_per_class"]), []).append(r)
    lines = ["| run | shots a class | seeds | " + " | ".join(f"{c} AP50" for c in classes) + " | train CPU s (mean) |",
             "|" + " --- |" * (4 + len(classes))]
    for (name, n), group in sorted(groups.items()):
        def cell(c):
            v = [100 * r["ap50"][c] for r in group]
            return f"{sum(v) / len(v):.1f}" + (f" ({min(v):.1f}–{max(v):.1f})" if len(v) > 1 else "")
        cpus = [r["train_cpu_s"] for r in group if r["train_cpu_s"] is not None]
        cpu = f"{sum(cpus) / len(cpus):.0f}" if cpus else "–"
        lines.append(f"| {name} | {n} | {len(group)} | " + " | ".join(cell(c) for c in classes) + f" | {cpu} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for shots, checkpoints, logs and few_shots.jsonl")
    p.add_argument("--game", default="doom:park:3", help="game the training shots come from")
    p.add_argument("--classes", default="", help="comma-separated classes (a stock level's things); default: the park's")
    p.add_argument("--shots", default="10,25,50,100,250,500", help="shots per class, comma-separated")
    p.add_argument("--seed", type=int, default=0, help="seed of the training shots and of the training")
    p.add_argument("--test-game", default="doom:park:9", help="game of the test shots (never trained on)")
    p.add_argument("--test-n", type=int, default=300, help="test shots")
    p.add_argument("--test-seed", type=int, default=0, help="seed of the test shots")
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of each training")
    p.add_argument("--name", default="default", help="the runs' name (a setting under test)")
    p.add_argument("--table-only", action="store_true", help="print the table of OUT/few_shots.jsonl and stop")
    args, extra = p.parse_known_args()
    extra = [a for a in extra if a != "--"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "few_shots.jsonl"
    if not args.table_only:
        classes = args.classes.split(",") if args.classes else PARK_CLASSES
        test = make_shots(args.test_game, args.test_n, args.test_seed, args.classes and classes, out / "test")
        for n in (int(v) for v in args.shots.split(",")):
            row = run_one(args, n, classes, test, extra)
            print(json.dumps(row), flush=True)
            with open(results, "a") as f:
                f.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    print(markdown(rows))
    print()
    print(over_seeds(rows))


if __name__ == "__main__":
    main()
