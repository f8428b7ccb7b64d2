"""Soak test: a long `playtester run` (PPO explorer, two game instances, tester on), sampling the
resident memory (RSS) and the open files of every process in its tree.

    python scripts/soak.py                      # 30 minutes
    python scripts/soak.py --minutes 3          # the short check

The models come from `playtester demo --profile smoke` (made once under --work, or given with
--models: a folder with inspect.ckpt, path.ckpt and detector.ckpt). The run gets more episodes
than it can play in the time; after --minutes it is interrupted (SIGINT, as Ctrl-C) and the
samples are written to --work:

    soak.csv   t_s, pid, kind, rss_mb, open_files: one row per process per sample
    soak.png   RSS and open files of every process over time, coloured by kind
    soak.json  per kind: RSS slope in MB/hour (a line fitted after the first fifth of the run,
               the warm-up), RSS and open files at the start and the end

Kinds: `main` (the run), `worker` (a game instance's process), `engine` (ViZDoom), `watchdog`
(the engine watchdog, capture/engine_guard.py), `other`. Flat is the aim.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from playtester.capture.engine_guard import process_tree


def kind_of(pid: int, root: int, argv: list[bytes]) -> str:
    if pid == root:
        return "main"
    if b"+viz_instance_id" in argv:
        return "engine"
    if argv[1:3] == [b"-S", b"-c"]:
        return "watchdog"
    if b"playtester" in b" ".join(argv):  # forked from the run: the same command line
        return "worker"
    return "other"


def sample(root: int, t: float) -> list[dict]:
    rows = []
    for pid in process_tree(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
            open_files = len(list(Path(f"/proc/{pid}/fd").iterdir()))
        except OSError:
            continue  # gone between the listing and the look
        rss_kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        rows.append({"t_s": round(t, 1), "pid": pid, "kind": kind_of(pid, root, argv),
                     "rss_mb": round(rss_kb / 1024, 2), "open_files": open_files})
    return rows


def make_models(work: Path) -> Path:
    """The smoke demo's models (made once)."""
    models = work / "demo" / "models"
    if not all((models / f"{name}.ckpt").exists() for name in ("inspect", "path", "detector")):
        print("making the models: playtester demo --profile smoke", flush=True)
        subprocess.run(["playtester", "demo", "--profile", "smoke", "--out", str(work / "demo"), "--overwrite"], check=True)
    return models


def run_command(models: Path, out: Path, game: str, episodes: int) -> list[str]:
    tester_finds = ["--detector", str(models / "detector.ckpt")]
    return ["playtester", "run", "explore", "--game", game, "--explorer", "ppgta", "--preference", str(models / "path.ckpt"),
            "--tester", str(models / "inspect.ckpt"), *tester_finds, "--envs", "2", "--episodes", str(episodes),
            "--steps", "500", "--out", str(out), "--overwrite"]


def summarise(rows: list[dict], minutes: float) -> dict:
    """Per kind: the RSS slope (MB/hour) after the warm-up, RSS and open files at start and end."""
    out = {}
    times = sorted({r["t_s"] for r in rows})
    warm = times[0] + (times[-1] - times[0]) / 5
    for kind in sorted({r["kind"] for r in rows}):
        total = {t: 0.0 for t in times}
        files = {t: 0 for t in times}
        count = {t: 0 for t in times}
        for r in rows:
            if r["kind"] == kind:
                total[r["t_s"]] += r["rss_mb"]
                files[r["t_s"]] += r["open_files"]
                count[r["t_s"]] += 1
        seen = [t for t in times if count[t]]
        fit = [t for t in seen if t >= warm]
        slope = float(np.polyfit(np.array(fit) / 3600, [total[t] for t in fit], 1)[0]) if len(fit) >= 2 else None
        out[kind] = {"processes_at_end": count[seen[-1]], "rss_mb_start": round(total[seen[0]], 1),
                     "rss_mb_end": round(total[seen[-1]], 1),
                     "rss_slope_mb_per_hour": None if slope is None else round(slope, 1),
                     "open_files_start": files[seen[0]], "open_files_end": files[seen[-1]]}
    return {"minutes": minutes, "samples": len(times), "kinds": out}


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"main": "tab:blue", "worker": "tab:orange", "engine": "tab:red", "watchdog": "tab:green", "other": "tab:grey"}
    fig, (ax_rss, ax_files) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for pid in sorted({r["pid"] for r in rows}):
        mine = [r for r in rows if r["pid"] == pid]
        t = [r["t_s"] / 60 for r in mine]
        c = colours.get(mine[0]["kind"], "black")
        ax_rss.plot(t, [r["rss_mb"] for r in mine], color=c, lw=1)
        ax_files.plot(t, [r["open_files"] for r in mine], color=c, lw=1)
    for kind, c in colours.items():
        if any(r["kind"] == kind for r in rows):
            ax_rss.plot([], [], color=c, label=kind)
    ax_rss.set_ylabel("RSS (MB)")
    ax_rss.legend(loc="upper left", fontsize=8)
    ax_rss.set_title(title, fontsize=10)
    ax_files.set_ylabel("open files")
    ax_files.set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="How long the run goes on.")
    parser.add_argument("--every", type=float, default=10.0, help="Seconds between samples.")
    parser.add_argument("--work", type=Path, default=Path("soak"), help="Folder for the models, the run and the results.")
    parser.add_argument("--models", type=Path, default=None, help="Folder with inspect.ckpt, path.ckpt, detector.ckpt.")
    parser.add_argument("--game", default="doom:park:1")
    args = parser.parse_args()
    if not args.minutes > 0 or not args.every > 0:
        parser.error("--minutes and --every must be positive")
    args.work.mkdir(parents=True, exist_ok=True)
    models = args.models or make_models(args.work)
    episodes = max(20, int(args.minutes * 10))  # more than the time allows (a few episodes a minute here)
    command = run_command(models, args.work / "run", args.game, episodes)
    print(" ".join(command), flush=True)
    log = open(args.work / "run.log", "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    rows: list[dict] = []
    start = time.time()
    try:
        while proc.poll() is None and time.time() - start < args.minutes * 60:
            rows += sample(proc.pid, time.time() - start)
            time.sleep(args.every)
    finally:
        ended_by_itself = proc.poll() is not None
        if not ended_by_itself:
            proc.send_signal(signal.SIGINT)  # as Ctrl-C: the run keeps what it wrote
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    if not rows:
        print(f"the run ended before the first sample; see {args.work / 'run.log'}")
        return 1
    with open(args.work / "soak.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = summarise(rows, args.minutes)
    summary["run_ended_by_itself"] = ended_by_itself
    summary["steps_logged"] = sum(1 for _ in open(args.work / "run" / "trajectory.jsonl")) if (args.work / "run" / "trajectory.jsonl").exists() else 0
    (args.work / "soak.json").write_text(json.dumps(summary, indent=1))
    plot(rows, args.work / "soak.png", f"playtester run, ppgta, 2 envs, tester on: {args.minutes:g} min")
    print(f"{'kind':10} {'procs':>5} {'RSS start':>10} {'RSS end':>9} {'MB/hour':>9} {'files start':>11} {'files end':>9}")
    for kind, k in summary["kinds"].items():
        print(f"{kind:10} {k['processes_at_end']:5d} {k['rss_mb_start']:10.1f} {k['rss_mb_end']:9.1f} "
              f"{k['rss_slope_mb_per_hour'] if k['rss_slope_mb_per_hour'] is not None else '-':>9} "
              f"{k['open_files_start']:11d} {k['open_files_end']:9d}")
    print(f"{summary['steps_logged']} steps logged; wrote {args.work / 'soak.csv'}, soak.png, soak.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
