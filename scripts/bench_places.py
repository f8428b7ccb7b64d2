"""Places without a map: which embedding, and which threshold, make a place one view?

The places view (`playtester/report/places.py`) clusters a run's frames online
(`playtester.perception.places.Places`): a frame farther than a threshold (cosine distance) from
every place's exemplar starts a new place. This measures, on park demo episodes whose steps carry
the player's position and angle (telemetry the clusterer never sees), for the pixel embedding and
for the frozen encoder's features:

- pairs: how well the distance tells two frames of the same view (within `--radius` map units and
  `--degrees` of heading) from the others, as ROC AUC, over every pair of frames of an episode;
- the clusterer at each threshold of a sweep, run over each episode as a run would: places per
  episode, purity (the share of steps whose pose is within twice those tolerances of their place's
  exemplar's: a place is one view), and how well the places count follows the pose cells the
  episode visited (Spearman's rho across episodes: a coverage figure without telemetry);
- the embedding's time per frame (this machine; it is shared, so compare the two side by side).

The threshold chosen for each embedding (`PIXEL_THRESHOLD`, `ENCODER_THRESHOLD`) is the largest
of the sweep whose purity is at least `--purity` (fewest places that are still one view each).

    python scripts/bench_places.py --demos playtester-demo/demos --policy playtester-demo/models/inspect.ckpt
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def angle_gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs((a - b + 180.0) % 360.0 - 180.0)


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(a positive pair scores above a negative one), ties halved (Mann–Whitney)."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demos", type=Path, nargs="+", required=True, help="Demo folders with position and angle per step.")
    ap.add_argument("--encoder", type=Path, help="An encoder checkpoint to measure (what `train policy` freezes into a policy).")
    ap.add_argument("--policy", type=Path, help="A policy checkpoint whose frozen encoder to measure (a run's test policy).")
    ap.add_argument("--every", type=int, default=2, help="Keep one step in this many.")
    ap.add_argument("--radius", type=float, default=64.0, help="Map units within which two frames are one view.")
    ap.add_argument("--degrees", type=float, default=30.0, help="Heading difference within which two frames are one view.")
    ap.add_argument("--purity", type=float, default=0.8, help="The purity the chosen threshold must keep.")
    ap.add_argument("--json", type=Path, help="Write every figure here.")
    args = ap.parse_args()

    import torch

    from playtester.datasets.episodes import load_episodes
    from playtester.perception.places import EncoderEmbedding, Places, PixelEmbedding
    from scipy.stats import spearmanr

    torch.set_num_threads(1)
    embeddings = {"pixels": PixelEmbedding()}
    if args.encoder is not None:  # the encoder a policy is trained on (the same weights, frozen in the policy)
        from playtester.perception.encoder import load_encoder

        encoder = load_encoder(args.encoder)
        embeddings["encoder"] = EncoderEmbedding(encoder, encoder.config.frames)
    if args.policy is not None:  # what a run has: its test (or preference) policy, the frozen encoder inside it
        from playtester.imitation.live import load_policy

        policy = load_policy(args.policy).policy
        embeddings["encoder"] = EncoderEmbedding(policy.encoder, policy.cfg.frames)

    episodes = [ep for folder in args.demos for ep in load_episodes(folder)]
    poses, frames = [], []
    for ep in episodes:
        keep = range(0, len(ep), args.every)
        poses.append(np.array([[*ep.steps[t]["position"][:2], ep.steps[t]["angle"]] for t in keep], np.float64))
        frames.append([np.asarray(ep.frames[t]) for t in keep])
    n_frames = sum(len(f) for f in frames)
    print(f"{len(episodes)} episodes, {n_frames} frames (one step in {args.every})")
    sweeps = {"pixels": [0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3],
              "encoder": [0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02]}
    report: dict = {"episodes": len(episodes), "frames": n_frames, "radius": args.radius, "degrees": args.degrees}
    for name, embed in embeddings.items():
        t0 = time.perf_counter()
        vectors = [np.stack([embed(f) for f in ep_frames]) for ep_frames in frames]
        ms = 1000 * (time.perf_counter() - t0) / n_frames
        dist, same = [], []
        for v, p in zip(vectors, poses):
            iu = np.triu_indices(len(v), 1)
            d = 1.0 - (v @ v.T)[iu]
            close = (np.hypot(*(p[:, None, :2] - p[None, :, :2]).transpose(2, 0, 1))[iu] <= args.radius) & \
                    (angle_gap(p[:, None, 2], p[None, :, 2])[iu] <= args.degrees)
            dist.append(d)
            same.append(close)
        dist, same = np.concatenate(dist), np.concatenate(same)
        auc = roc_auc(-dist, same)
        rows = []
        for threshold in sweeps[name]:
            counts, cells, pure, steps = [], [], 0, 0
            for v, p in zip(vectors, poses):
                places = Places(threshold)
                owner = []
                for x in v:
                    place, _ = places.visit(x)
                    owner.append(place)
                first = {}
                for i, place in enumerate(owner):
                    first.setdefault(place, i)
                exemplar = p[[first[o] for o in owner]]
                pure += int(((np.hypot(*(p[:, :2] - exemplar[:, :2]).T) <= 2 * args.radius) &
                             (angle_gap(p[:, 2], exemplar[:, 2]) <= 2 * args.degrees)).sum())
                steps += len(v)
                counts.append(places.count)
                cells.append(len({(int(x // 128), int(y // 128), int((a % 360) // 45)) for x, y, a in p}))
            rho = spearmanr(counts, cells).statistic if len(set(counts)) > 1 else float("nan")
            rows.append({"threshold": threshold, "places_per_episode": float(np.mean(counts)),
                         "pose_cells_per_episode": float(np.mean(cells)), "purity": pure / steps, "spearman": float(rho)})
        chosen = max((r for r in rows if r["purity"] >= args.purity), key=lambda r: r["threshold"], default=None)
        report[name] = {"ms_per_frame": ms, "pair_auc": auc, "same_view_pairs": int(same.sum()), "pairs": int(len(same)),
                        "sweep": rows, "chosen": chosen}
        print(f"\n{name}: {ms:.2f} ms a frame; same-view pairs told apart by distance: ROC AUC {auc:.3f} "
              f"({int(same.sum())} of {len(same)} pairs are one view)")
        print("| threshold | places / episode | pose cells / episode | purity | Spearman rho (places ~ pose cells) |")
        print("|---:|---:|---:|---:|---:|")
        for r in rows:
            mark = " (chosen)" if r is chosen else ""
            print(f"| {r['threshold']:g}{mark} | {r['places_per_episode']:.1f} | {r['pose_cells_per_episode']:.1f} | "
                  f"{100 * r['purity']:.1f} % | {r['spearman']:.2f} |")
    if "encoder" in report:
        print(f"\ntime per frame: encoder / pixels = ×{report['encoder']['ms_per_frame'] / report['pixels']['ms_per_frame']:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
