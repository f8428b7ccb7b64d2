"""Does the feature encoder keep where the horizon is? A linear probe on its features.

A policy sees the frames only through the encoder. To look back to level after a glance it must
tell from one frame whether the view is above, at or below level. This fits a linear classifier
(softmax regression) on the encoder's features of demo frames, with the pitch from telemetry as
the label, and scores it on held-out episodes; the same probe on the frame shrunk to 16 × 16 grey
pixels is the reference (the information is in the frame), and the majority class is the floor.

    python scripts/probe_encoder.py --encoder models/encoder.ckpt --demos dagger/path/round1
        [--episodes 12] [--every 3]

The demos should wander in pitch (DAgger episodes of a path policy do); steps need `pitch`.

`--what box` asks the inspect policy's question instead: on OD-masked frames, is the box of the
object under test left of, at or right of the screen's centre, taking the inspector's 12° turn
tolerance as the edge of "at" (a box centre more than tan 12° / tan 45° = 21 % of the half-width
off centre, for Doom's 90° field of view)? The reference is the masked frame shrunk to 16 × 16
RGB (the mask keeps colour inside the box only). Steps without a box are left out; DAgger
episodes of an inspect policy have the object off centre often enough:

    python scripts/probe_encoder.py --what box --encoder models/encoder.ckpt --demos dagger/inspect/round1
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
import torch.nn.functional as F

from playtester.datasets.episodes import load_episodes
from playtester.imitation.policy import to_input
from playtester.perception.encoder import load_encoder
from playtester.perception.od_mask import od_mask_batch


def probe(x: torch.Tensor, y: torch.Tensor, n_train: int, steps: int = 500) -> float:
    """Held-out accuracy of softmax regression on standardised features."""
    mean, std = x[:n_train].mean(0), x[:n_train].std(0) + 1e-6
    x = (x - mean) / std
    torch.manual_seed(0)
    lin = torch.nn.Linear(x.shape[1], int(y.max()) + 1)
    opt = torch.optim.Adam(lin.parameters(), 1e-3, weight_decay=1e-3)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(lin(x[:n_train]), y[:n_train]).backward()
        opt.step()
    with torch.no_grad():
        return float((lin(x[n_train:]).argmax(-1) == y[n_train:]).float().mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--encoder", required=True)
    p.add_argument("--demos", required=True)
    p.add_argument("--episodes", type=int, default=12, help="the first half train the probe, the second half test it")
    p.add_argument("--every", type=int, default=3, help="take every n-th frame")
    p.add_argument("--what", choices=("pitch", "box"), default="pitch",
                   help="pitch: view below, level or above; box: the object's box left of, at or right of centre")
    args = p.parse_args()
    torch.set_num_threads(1)
    enc = load_encoder(args.encoder).eval()
    episodes = load_episodes(args.demos)[: args.episodes]
    feats, pixels, labels, cut = [], [], [], 0
    with torch.no_grad():
        for i, ep in enumerate(episodes):
            if i == len(episodes) // 2:  # the first half's frames train the probe
                cut = len(labels)
            idx = np.arange(0, len(ep), args.every)
            if args.what == "box":
                idx = np.array([t for t in idx if ep.steps[t].get("test_box")], dtype=int)
                if not len(idx):
                    continue
            boxes = [ep.steps[t].get("test_box") for t in idx] if args.what == "box" else [None] * len(idx)
            frames = torch.from_numpy(od_mask_batch(np.array(ep.frames[idx]), boxes))
            feats.append(enc(to_input(frames, enc.config.frames)))
            if args.what == "box":
                rgb = frames.permute(0, 3, 1, 2).float()
                pixels.append(F.interpolate(rgb, size=(16, 16), mode="area").flatten(1))
                labels += [box_side(b, frames.shape[2]) for b in boxes]
            else:
                grey = frames.permute(0, 3, 1, 2).float().mean(1, keepdim=True)
                pixels.append(F.interpolate(grey, size=(16, 16), mode="area").flatten(1))
                labels += [int(np.sign(round(ep.steps[t]["pitch"] / 9.9))) + 1 for t in idx]  # below, level, above
    y = torch.tensor(labels)
    floor = float(torch.bincount(y[cut:]).max()) / len(y[cut:])
    what, reference = (("left / at / right of centre", "16×16 RGB") if args.what == "box" else ("below / level / above", "16×16 grey"))
    print(f"{len(y)} frames of {len(episodes)} episodes ({cut} train the probe); {what}: {torch.bincount(y, minlength=3).tolist()}")
    print(f"held-out accuracy telling {what}: encoder features {probe(torch.cat(feats), y, cut):.1%}, "
          f"{reference} pixels {probe(torch.cat(pixels), y, cut):.1%}, majority class {floor:.1%}")


def box_side(box, width: int, edge: float = math.tan(math.radians(12.0))) -> int:
    """0, 1 or 2: a box's centre left of, at or right of the frame's centre, `edge` being the share of
    the half-width that counts as at (tan 12° for the inspector's 12° with a 90° field of view)."""
    off = ((box[0] + box[2]) / 2 - width / 2) / (width / 2)
    return 0 if off < -edge else 2 if off > edge else 1


if __name__ == "__main__":
    main()
