"""Demos from gameplay video (issue 23): how good are the IDM's pseudo-labels, and do they help?

Scripted path demos with known actions are rendered to H.264 mp4 (`playtester demos --video`),
labelled back by the encoder's inverse-dynamics head (`playtester demos --from-video`), and the
labels compared with the truth: per action, as a confusion matrix, and by confidence bucket. Then
VPT's question on the park's own measure: a path policy trained on N true-labelled demos, on the
same N plus 10·N IDM-labelled videos, and on the same N plus the same 10·N videos with their true
labels, each played from held-out starts on a park no demo saw (`playtester eval policy`), and
optionally on the IDM labels above a confidence (`--min-confidence-arm`).

Every stage runs the project's own commands (printed as they run) and is skipped when its output
is already in --workdir, so a run can be resumed (or an arm added). Fixed budgets: encoder and
policy epochs, one seed; the defaults fit about 40 minutes of a busy 2-core machine. Example (the
figures of docs/benchmarks/video.md; `report.json` in the workdir holds every table and each stage's seconds):

    python scripts/bench_video.py --workdir /work/data/h23/bench --min-confidence-arm 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BUCKETS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.01)


STAGE_SECONDS: dict[str, float] = {}
"""Wall-clock seconds of each stage run this time (a stage found done is not timed)."""


def run(cmd: list[str], log: Path | None = None, stage: str | None = None) -> None:
    print("$", shlex.join(cmd), flush=True)
    start = time.monotonic()
    if log is None:
        subprocess.run(cmd, check=True)
    else:
        with open(log, "w") as f:
            subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)
    if stage:
        STAGE_SECONDS[stage] = round(time.monotonic() - start, 1)


def make_demos(args, w: Path) -> None:
    enc = w / "enc"
    enc.mkdir(exist_ok=True)
    for park in args.encoder_parks:
        for behavior in ("path", "inspect"):
            out = enc / f"{behavior}-p{park}"
            if not out.exists():
                steps = ["--steps", "300"] if behavior == "path" else []
                run(["playtester", "demos", "--game", f"doom:park:{park}", "--behavior", behavior, "--episodes",
                     str(args.encoder_episodes), *steps, "--seed", "2000", "--out", str(out)])
    for name, n, seed, video in (("true", args.n, 0, []), ("extra", args.factor * args.n, 100, ["--video"])):
        if not (w / name).exists():
            run(["playtester", "demos", "--game", args.game, "--behavior", "path", "--episodes", str(n), "--steps", "300",
                 "--seed", str(seed), *video, "--out", str(w / name)])


def render_missing_videos(w: Path) -> Path:
    """`extra/NAME.mp4` for each extra episode (what `demos --video` writes), moved to videos/."""
    from playtester.datasets.episodes import episode_folders
    from playtester.datasets.video import episode_video

    videos = w / "videos"
    videos.mkdir(exist_ok=True)
    start, rendered = time.monotonic(), 0
    for folder in episode_folders(w / "extra"):
        target = videos / (folder.name + ".mp4")
        beside = folder.with_name(folder.name + ".mp4")
        if beside.exists():
            beside.rename(target)
        elif not target.exists():
            episode_video(folder, target)
            rendered += 1
    if rendered:
        STAGE_SECONDS[f"render {rendered} videos"] = round(time.monotonic() - start, 1)
    return videos


def truth_of(ep, extra: Path):
    """The scripted episode a video episode came from, and the step its first step is."""
    from playtester.datasets.episodes import Episode

    video = ep.meta["video"]
    return Episode.open(extra / Path(video["file"]).stem), int(video["first_step"])


def pseudo_label_table(w: Path, n_actions: int) -> dict:
    """Pseudo-labels against the executed actions (and the expert's labels) of the scripted demos."""
    from playtester.datasets.episodes import load_episodes

    pred, conf, executed, meant = [], [], [], []
    for ep in load_episodes(w / "idm"):
        truth, first = truth_of(ep, w / "extra")
        pred += [s["action"] for s in ep.steps]
        conf += [s["confidence"] for s in ep.steps]
        executed += truth.actions[first : first + len(ep)].tolist()
        meant += truth.labels[first : first + len(ep)].tolist()
    return summarise(np.array(pred), np.array(conf), np.array(executed), np.array(meant), n_actions)


def summarise(pred, conf, executed, meant, n_actions: int) -> dict:
    confusion = np.zeros((n_actions, n_actions), int)
    np.add.at(confusion, (executed, pred), 1)
    seen = confusion.sum(1) > 0
    per_action = np.where(seen, np.diag(confusion) / np.maximum(1, confusion.sum(1)), np.nan)
    buckets = []
    for lo, hi in zip(BUCKETS[:-1], BUCKETS[1:]):
        inside = (conf >= lo) & (conf < hi)
        buckets.append({"from": lo, "to": min(hi, 1.0), "steps": int(inside.sum()),
                        "accuracy": float((pred[inside] == executed[inside]).mean()) if inside.any() else None})
    above = [{"from": lo, "share": float((conf >= lo).mean()),
              "accuracy": float((pred[conf >= lo] == executed[conf >= lo]).mean()) if (conf >= lo).any() else None}
             for lo in BUCKETS[:-1]]
    majority = int(np.bincount(executed, minlength=n_actions).argmax())
    return {
        "steps": int(len(pred)), "accuracy": float((pred == executed).mean()),
        "accuracy_vs_expert_label": float((pred == meant).mean()),
        "balanced": float(np.nanmean(per_action)), "chance_balanced": float(1 / seen.sum()),
        "majority_baseline": float((executed == majority).mean()),
        "per_action": per_action.tolist(), "support": confusion.sum(1).tolist(), "confusion": confusion.tolist(),
        "buckets": buckets, "above": above,
    }


def uncompressed_table(w: Path, encoder: Path, n_actions: int) -> dict:
    """The same labeller on the scripted episodes' own frames (no H.264): what the codec costs."""
    import torch

    from playtester.datasets.episodes import load_episodes
    from playtester.perception.idm_label import PairLabeller

    torch.set_num_threads(1)
    labeller = PairLabeller.load(encoder)
    pred, conf, executed, meant = [], [], [], []
    for ep in load_episodes(w / "extra"):
        frames = np.array(ep.frames)
        probs = torch.cat([labeller.probabilities(frames[i : i + 65]) for i in range(0, len(frames) - 1, 64)]).numpy()
        pred += probs.argmax(1).tolist()
        conf += probs.max(1).tolist()
        executed += ep.actions[: len(probs)].tolist()
        meant += ep.labels[: len(probs)].tolist()
    return summarise(np.array(pred), np.array(conf), np.array(executed), np.array(meant), n_actions)


def true_labelled_copy(w: Path) -> Path:
    """The IDM episodes (same decoded frames) with the scripted demos' true labels instead."""
    from playtester.datasets.episodes import EpisodeWriter, load_episodes

    out = w / "video-truth"
    if out.exists():
        return out
    tmp = w / "video-truth.partial"
    tmp.mkdir(exist_ok=True)
    for ep in load_episodes(w / "idm"):
        truth, first = truth_of(ep, w / "extra")
        meta = {k: v for k, v in ep.meta.items() if k in ("video",)}
        with EpisodeWriter(tmp, ep.name, game=ep.meta["game"], behavior=ep.behavior, keymap=ep.keymap, fps=ep.meta["fps"],
                           extra=meta) as writer:
            for t in range(len(ep)):
                action, label = int(truth.actions[first + t]), int(truth.labels[first + t])
                writer.add(np.asarray(ep.frames[t]), action, ep.keymap.keys_for(action), label_source="truth",
                           **({"label": label} if label != action else {}))
    os.replace(tmp, out)
    return out


def held_out_accuracy(log: Path) -> float | None:
    """`train policy`'s held-out accuracy (the N true demos' test split) from its log."""
    found = re.search(r"held-out accuracy ([0-9.]+)%", log.read_text()) if log.exists() else None
    return float(found.group(1)) / 100 if found else None


def policy_arms(args, w: Path) -> dict[str, tuple[list[Path], list[str]]]:
    """Arm name → (demo folders, extra `train policy` options). Every arm splits the same N true
    demos the same way (video episodes only ever train), so all are scored on the same held-out demo."""
    n, m = args.n, args.factor * args.n
    arms = {
        f"{n} true": ([w / "true"], []),
        f"{n} true + {m} IDM-labelled": ([w / "true", w / "idm"], []),
        f"{n} true + the same {m} true-labelled": ([w / "true", w / "video-truth"], []),
    }
    if args.min_confidence_arm is not None:
        arms[f"{n} true + {m} IDM-labelled, confidence >= {args.min_confidence_arm:g}"] = (
            [w / "true", w / "idm"], ["--idm-min-confidence", str(args.min_confidence_arm)])
    return arms


def policies(args, w: Path, encoder: Path) -> dict:
    results = {}
    for i, (arm, (folders, options)) in enumerate(policy_arms(args, w).items()):
        ckpt = w / f"policy-{i}.ckpt"
        demos = [x for f in folders for x in ("--demos", str(f))]
        if not ckpt.exists():
            run(["playtester", "train", "policy", *demos, *options, "--encoder", str(encoder), "--out", str(ckpt), "--no-teacher",
                 "--epochs", str(args.policy_epochs), "--global-hidden", str(args.global_hidden), "--local-hidden",
                 str(args.local_hidden), "--seed", "0", "--logdir", str(w / "logs")], log=w / f"policy-{i}.log", stage=f"train policy {i}")
        scores = w / f"eval-{i}.json"
        if not scores.exists():
            run(["playtester", "eval", "policy", "--ckpt", str(ckpt), "--game", args.eval_game, "--episodes",
                 str(args.eval_episodes), "--seed", "1000", "--out", str(scores)], log=w / f"eval-{i}.log", stage=f"eval policy {i}")
        s = json.loads(scores.read_text())["summary"]
        accuracy = held_out_accuracy(w / f"policy-{i}.log")
        results[arm] = {"on_path": s["on_path"], "cells": s["cells"], "success_rate": s["success_rate"],
                        "mean_jsd": s["mean_jsd"], "held_out_accuracy": accuracy}
        print(f"{arm}: {s['on_path']:.1%} of steps on pathways, {s['cells']:.0f} cells, JSD {s['mean_jsd']:.3f}, "
              f"success {s['success_rate']:.0%}; held-out demo accuracy "
              f"{'?' if accuracy is None else format(accuracy, '.1%')}", flush=True)
    return results


def print_table(name: str, t: dict, actions: list[str]) -> None:
    print(f"\n{name}: {t['steps']} steps, accuracy {t['accuracy']:.1%} (against the expert's label {t['accuracy_vs_expert_label']:.1%}), "
          f"balanced {t['balanced']:.1%} (chance {t['chance_balanced']:.1%}), majority action {t['majority_baseline']:.1%}")
    for a, n, acc in zip(actions, t["support"], t["per_action"]):
        if n:
            print(f"  {a:13s} {n:6d} steps  {acc:6.1%}")
    print("  by confidence: " + "; ".join(
        f"[{b['from']:.1f}, {b['to']:.1f}) {b['steps']} steps {'' if b['accuracy'] is None else format(b['accuracy'], '.1%')}"
        for b in t["buckets"]))
    print("  at or above each confidence: " + "; ".join(
        f">= {a['from']:.1f}: {a['share']:.0%} of steps, {'' if a['accuracy'] is None else format(a['accuracy'], '.1%')}"
        for a in t["above"]))
    print("  confusion (rows: executed, columns: IDM):")
    for a, row in zip(actions, t["confusion"]):
        print(f"  {a:13s} " + " ".join(f"{v:5d}" for v in row))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--n", type=int, default=4, help="True-labelled path demos (N).")
    p.add_argument("--factor", type=int, default=10, help="Videos per true demo (10 in VPT's question).")
    p.add_argument("--game", default="doom:park:1", help="Park of the demos and videos.")
    p.add_argument("--eval-game", default="doom:park:2", help="Park the policies are played on (no demo saw it).")
    p.add_argument("--encoder-parks", type=int, nargs="+", default=[1, 3, 4])
    p.add_argument("--encoder-episodes", type=int, default=8, help="Per park and behaviour.")
    p.add_argument("--encoder-epochs", type=int, default=4)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--feature-dim", type=int, default=256)
    p.add_argument("--policy-epochs", type=int, default=15)
    p.add_argument("--global-hidden", type=int, default=256)
    p.add_argument("--local-hidden", type=int, default=64)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--min-confidence-arm", type=float, default=None,
                   help="Also train on the IDM labels with --idm-min-confidence this (a fourth arm).")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    w = args.workdir
    w.mkdir(parents=True, exist_ok=True)
    make_demos(args, w)
    encoder = w / "encoder.ckpt"
    if not encoder.exists():
        run(["playtester", "train", "encoder", "--demos", str(w / "enc"), "--out", str(encoder), "--image-size",
             str(args.image_size), "--feature-dim", str(args.feature_dim), "--pretrained", "none", "--epochs",
             str(args.encoder_epochs), "--seed", "0", "--logdir", str(w / "logs")], log=w / "encoder.log", stage="train encoder")
    videos = render_missing_videos(w)
    if not (w / "idm").exists():
        run(["playtester", "demos", "--from-video", str(videos), "--idm", str(encoder), "--out", str(w / "idm"),
             "--behavior", "path"], log=w / "idm.log", stage="demos --from-video")
    from playtester.perception.encoder import load_inverse_dynamics

    actions = load_inverse_dynamics(encoder).config.action_names
    report = {"video": pseudo_label_table(w, len(actions))}
    print_table("IDM labels on the H.264 videos", report["video"], actions)
    report["frames"] = uncompressed_table(w, encoder, len(actions))
    print_table("IDM labels on the demos' own frames (no codec)", report["frames"], actions)
    true_labelled_copy(w)
    report["policies"] = policies(args, w, encoder)
    earlier = json.loads((w / "report.json").read_text()).get("stage_seconds", {}) if (w / "report.json").exists() else {}
    report["stage_seconds"] = {**earlier, **STAGE_SECONDS}  # a resumed run keeps the times of the stages it found done
    report["args"] = {k: str(v) for k, v in vars(args).items()}
    (w / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\nwrote {w / 'report.json'}")


if __name__ == "__main__":
    sys.exit(main())
