"""A training stage alone and beside another torch job: wall time, and CPU time in user and kernel.

The demo's stages (detector, encoder, policy), each as its command line on a fixed slice of a
demo folder's data, run with the working tree and with `--ref` (an older commit's files, by default none),
alternating, each once alone and once beside a busy torch job: a process that multiplies
matrices for ever with torch's defaults (every core, OpenMP's threads spinning while they wait),
as another user's training would. Torch's defaults in both processes oversubscribe the cores, and
OpenMP's spinning threads then burn them in the kernel (`sched_yield`) instead of working.

    python scripts/bench_threads.py --demo playtester-demo [--stages detector encoder policy] [--ref a2a6760] [--rounds 2]

Per tree and stage: the medians over rounds of the wall time alone and beside, their ratio (the
issue's bar: at most 1.5), and the stage's user and kernel CPU seconds (`os.wait4`, its own and its
waited-for children's). `--threads N` gives both trees' stages N cores (the working tree's
`--threads`; the reference's torch threads through `OMP_NUM_THREADS`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import ISOLATE, MAIN, ROOT, python_path, site_folder  # noqa: E402

BUSY = ISOLATE + """
import torch
a = torch.randn(768, 768)
while True:
    a = torch.tanh(a @ a)
"""
"""Another torch job: torch's defaults (every core), a matrix product after another."""


def stage_args(stage: str, demo: Path, data: Path, out: Path, images: int, episodes: int) -> list[str]:
    """The stage's command line on a fixed slice of the demo's data (one epoch)."""
    if stage == "detector":
        return ["train", "detector", "--coco", str(data / "labels.json"), "--images", str(demo / "shots" / "images"),
                "--epochs", "1", "--image-size", "128", "--seed", "0", "--out", str(out / "detector.ckpt")]
    if stage == "encoder":
        return ["train", "encoder", "--demos", str(data / "demos"), "--epochs", "1", "--seed", "0",
                "--out", str(out / "encoder.ckpt")]
    return ["train", "policy", "--demos", str(data / "demos" / "path"), "--encoder", str(demo / "models" / "encoder.ckpt"),
            "--epochs", "1", "--seed", "0", "--out", str(out / "path.ckpt")]


def slice_data(demo: Path, data: Path, images: int, episodes: int) -> None:
    """The first `images` shots of the demo (their COCO labels) and its first `episodes` demos of each behaviour."""
    coco = json.loads((demo / "shots" / "labels.json").read_text())
    kept = coco["images"][:images]
    ids = {image["id"] for image in kept}
    coco.update(images=kept, annotations=[a for a in coco["annotations"] if a["image_id"] in ids])
    data.mkdir(parents=True, exist_ok=True)
    (data / "labels.json").write_text(json.dumps(coco))
    for behaviour in ("inspect", "path"):
        folder = data / "demos" / behaviour
        folder.mkdir(parents=True, exist_ok=True)
        for episode in sorted((demo / "demos" / behaviour).iterdir())[:episodes]:
            (folder / episode.name).symlink_to(episode.resolve())


def run_stage(site: Path, args: list[str], busy: bool, threads: int) -> dict[str, float]:
    """One stage; its wall, user and kernel seconds, beside a busy torch job if `busy`."""
    env = {**os.environ, "PYTHONPATH": python_path(site)}
    env.pop("OMP_WAIT_POLICY", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    background = None
    if busy:
        busy_env = {k: v for k, v in env.items() if k not in ("OMP_NUM_THREADS", "PLAYTESTER_THREADS")}
        background = subprocess.Popen([sys.executable, "-c", BUSY], env=busy_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.0)  # under way
    try:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", MAIN, *args], env=env, cwd=site, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        log = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
    finally:
        if background is not None:
            background.kill()
            background.wait()
    if proc.returncode != 0:
        sys.exit(f"bench_threads: the stage failed ({' '.join(args)}):\n{log[-3000:]}")
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--demo", type=Path, required=True, help="a `playtester demo` folder (shots, demos, models)")
    p.add_argument("--stages", nargs="+", default=["detector", "encoder", "policy"], choices=("detector", "encoder", "policy"))
    p.add_argument("--ref", default=None, help="an older commit to run side by side (its files by git archive), or a folder of them")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--images", type=int, default=200, help="shots the detector trains on (70 %% of them: its split)")
    p.add_argument("--episodes", type=int, default=3, help="demos of each behaviour the encoder and the policy train on")
    p.add_argument("--threads", type=int, default=0, help="cores given to both trees' stages (0: the machine's)")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_threads-"))
    trees = {"new": ROOT}
    try:
        if args.ref and Path(args.ref).is_dir():
            trees["ref"] = Path(args.ref)
        elif args.ref:  # its files only (git archive): nothing is added to the repository
            folder = scratch / "ref"
            folder.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.ref], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
            trees["ref"] = folder
        sites = {name: site_folder(tree, scratch / f"site-{name}") for name, tree in trees.items()}
        slice_data(args.demo, scratch / "data", args.images, args.episodes)
        print(f"load {os.getloadavg()[0]:.1f} at the start; {os.cpu_count()} cores", flush=True)
        results: dict[tuple[str, str, bool], list[dict]] = {}
        for r in range(args.rounds):
            for stage in args.stages:
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    for busy in (False, True):
                        out = scratch / "out"
                        shutil.rmtree(out, ignore_errors=True)
                        out.mkdir()
                        res = run_stage(sites[name], stage_args(stage, args.demo, scratch / "data", out, args.images, args.episodes),
                                        busy, args.threads)
                        results.setdefault((stage, name, busy), []).append(res)
                        print(f"round {r + 1} {stage:8s} {name:3s} {'beside a torch job' if busy else 'alone':18s} "
                              f"wall {res['wall']:7.1f} s  user {res['user']:7.1f} s  kernel {res['sys']:6.1f} s "
                              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        print("\n| stage | tree | alone wall s | beside wall s | beside / alone | user s alone / beside | kernel s alone / beside |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for stage in args.stages:
            for name in trees:
                alone, beside = results[stage, name, False], results[stage, name, True]

                def med(rows: list[dict], key: str) -> float:
                    return statistics.median(row[key] for row in rows)

                print(f"| {stage} | {name} | {med(alone, 'wall'):.1f} | {med(beside, 'wall'):.1f} | "
                      f"×{med(beside, 'wall') / med(alone, 'wall'):.2f} | {med(alone, 'user'):.1f} / {med(beside, 'user'):.1f} | "
                      f"{med(alone, 'sys'):.1f} / {med(beside, 'sys'):.1f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
