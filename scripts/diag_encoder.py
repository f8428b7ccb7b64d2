"""Why an encoder does not learn inverse dynamics on some demos: is the action in the frames, and
does any training variant learn it?

Two parts, on a folder of demo episodes whose steps carry telemetry (`position`, `angle`, `pitch`):

- `motion`: how well the player's true motion tells the action taken, the ceiling of what two
  frames can show. A 7-nearest-neighbour classifier (standardised features, 3/4 of the steps to
  fit, 1/4 to score) on the motion between the two frames (forward and sideways displacement in
  the player's frame, turn, pitch change), and on that plus the motion of the step before (Doom's
  momentum carries each step's speed into the next); the majority action is the floor.
- `probe`: short trainings of the masked inverse-dynamics model (`perception/encoder.py`) under
  variants, the same data and seed each, and their held-out accuracy on 600 pairs of the held-out
  episodes: `base` (the recipe: OD mask on one frame, class weights, lr 3e-4, AlexNet trunk),
  `nomask`, `nobal` (no class weights), `lr3` (lr 1e-3), `compact` (the detector's body),
  `from=ENCODER.ckpt` (the trunk of another encoder to start from).

    python scripts/diag_encoder.py motion --demos lvdemos
    python scripts/diag_encoder.py probe --demos lvdemos --size 64 --steps 300 --variants base nomask nobal lr3 compact
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def motion_features(steps: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step t (1 … n-2): the motion over the step, the motion over it and the step before, the action."""
    pos = np.array([s["position"][:2] for s in steps], float)
    ang = np.radians([s["angle"] for s in steps])
    pitch = np.array([s.get("pitch", 0.0) for s in steps], float)
    now, both, actions = [], [], []
    for t in range(1, len(steps) - 1):
        d, before = pos[t + 1] - pos[t], pos[t] - pos[t - 1]
        ahead = np.array([np.cos(ang[t]), np.sin(ang[t])])
        left = np.array([-ahead[1], ahead[0]])
        turn = (np.degrees(ang[t + 1] - ang[t]) + 180) % 360 - 180
        m = [d @ ahead, d @ left, turn, pitch[t + 1] - pitch[t]]
        now.append(m)
        both.append(m + [(d - before) @ ahead, (d - before) @ left])
        actions.append(int(steps[t]["action"]))
    return np.array(now), np.array(both), np.array(actions)


def knn_accuracy(x: np.ndarray, y: np.ndarray, k: int = 7, seed: int = 0) -> float:
    idx = np.random.default_rng(seed).permutation(len(y))
    fit, test = idx[: len(y) * 3 // 4], idx[len(y) * 3 // 4:]
    z = (x - x.mean(0)) / (x.std(0) + 1e-9)
    hits = 0
    for i in test:
        near = np.argsort(((z[fit] - z[i]) ** 2).sum(1))[:k]
        hits += int(np.bincount(y[fit][near]).argmax() == y[i])
    return hits / len(test)


def motion(args) -> None:
    now, both, actions = [], [], []
    for path in sorted(args.demos.rglob("steps.jsonl")):
        steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if len(steps) < 3 or "position" not in steps[0]:
            continue
        step_motion, with_before, taken = motion_features(steps)
        now.append(step_motion)
        both.append(with_before)
        actions.append(taken)
    if not actions:
        raise SystemExit(f"error: {args.demos}: no episodes whose steps carry position and angle")
    y = np.concatenate(actions)
    print(f"{len(y)} steps; majority action {np.bincount(y).max() / len(y):.1%}")
    print(f"the step's motion: {knn_accuracy(np.concatenate(now), y):.1%}")
    print(f"the step's motion and the step before's: {knn_accuracy(np.concatenate(both), y):.1%}")


def probe(args) -> None:
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, default_collate

    from playtester.capture.frames import FrameSpec
    from playtester.datasets.transitions import TransitionDataModule
    from playtester.perception.encoder import EncoderConfig, InverseDynamics, frames_to_float, mask_one_of_two
    from playtester.perception.recipes import class_weights
    from playtester.perception.training import read_checkpoint

    torch.set_num_threads(args.threads)
    frames = FrameSpec.square(args.size)
    dm = TransitionDataModule(args.demos, frames=frames, batch_size=32, seed=0)
    dm.setup()
    names = dm.action_names
    counts = np.bincount(dm.train_set.actions, minlength=len(names)).tolist()
    weights = torch.tensor(class_weights(counts), dtype=torch.float32)  # the recipe's (`train encoder --balance`)
    print("training actions:", dict(zip(names, counts)))
    held = default_collate([dm.val_set[int(i)] for i in np.random.default_rng(0).choice(len(dm.val_set), min(600, len(dm.val_set)), replace=False)])
    for variant in args.variants:
        torch.manual_seed(0)
        cfg = EncoderConfig(action_names=names, frames=frames, trunk="compact" if variant == "compact" else "alexnet",
                            lr=1e-3 if variant == "lr3" else 3e-4)
        model = InverseDynamics(cfg)
        if variant.startswith("from="):
            _, state = read_checkpoint(variant.removeprefix("from="), "encoder")
            model.encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")})
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        mask_prob = 0.0 if variant == "nomask" else cfg.mask_prob

        def pairs(batch, generator=None):
            prev, curr = frames_to_float(batch.prev), frames_to_float(batch.curr)
            return mask_one_of_two(prev, curr, batch.prev_box, batch.curr_box, mask_prob, generator)

        loader = DataLoader(dm.train_set, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0),
                            collate_fn=default_collate)
        batches, losses, started = iter(loader), [], time.time()
        for _ in range(args.steps):
            batch = next(batches, None)
            if batch is None:
                batches = iter(loader)
                batch = next(batches)
            loss = F.cross_entropy(model(*pairs(batch)), batch.action, weight=None if variant == "nobal" else weights)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            prev, curr = pairs(held, torch.Generator().manual_seed(1))
            pred = torch.cat([model(prev[i:i + 100], curr[i:i + 100]).argmax(1) for i in range(0, len(prev), 100)])
        y = held.action
        per = {n: ((pred == y) & (y == k)).sum().item() / (y == k).sum().item() for k, n in enumerate(names) if (y == k).any()}
        print(f"{variant}: loss first/last 50 steps {np.mean(losses[:50]):.3f}/{np.mean(losses[-50:]):.3f}; held-out accuracy "
              f"{(pred == y).float().mean().item():.1%}, balanced {np.mean(list(per.values())):.1%} "
              f"(chance {1 / len(per):.1%}); {', '.join(f'{n} {a:.0%}' for n, a in per.items())}; {time.time() - started:.0f} s",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("motion", "probe"))
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--size", type=int, default=64, help="probe: frames resized to this square")
    parser.add_argument("--steps", type=int, default=300, help="probe: optimiser steps of 32 pairs per variant")
    parser.add_argument("--variants", nargs="+", default=["base", "nomask", "nobal", "lr3", "compact"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not args.demos.is_dir():
        raise SystemExit(f"error: --demos {args.demos}: no such folder")
    if args.part == "motion":
        motion(args)
    else:
        probe(args)


if __name__ == "__main__":
    main()
