"""One way to split demo episodes into training and held-out parts, for every model trained on them.

Frames of one episode never land on two sides (neighbouring frames are near copies, so a split by
frame would score memory, not generalisation). Within each behaviour the episodes, in path order,
are shuffled by the seed and cut into the parts in the order the caller lists them, the way
`torch.utils.data.random_split` cuts by its list of lengths; one generator serves the behaviours
in name order, so a seed always gives the same split of the same episodes.

A held-out part gets its rounded share of a behaviour's episodes, at least one where the share is
above 0, as long as one episode is left to train on; training gets the rest.

The inverse-dynamics encoder holds out `{"val": f, "train": 1 - f}`; behaviour cloning cuts
`{"train": 0.7, "val": 0.1, "test": 0.2}` of the expert-driven episodes.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from playtester.errors import UserError
from playtester.datasets.episodes import Episode


def part_sizes(n: int, shares: Mapping[str, float]) -> dict[str, int]:
    """How many of `n` episodes each part gets (see the module's rule)."""
    left = max(0, n - 1)  # what the held-out parts may take: one episode stays for training
    sizes = {}
    for part, share in shares.items():
        if part == "train":
            continue
        k = int(round(n * share))
        if share > 0:
            k = max(k, 1)
        sizes[part] = min(k, left)
        left -= sizes[part]
    sizes["train"] = n - sum(sizes.values())
    return sizes


def split_episodes(episodes: Sequence[Episode], shares: Mapping[str, float], seed: int = 0) -> dict[str, list[Episode]]:
    """The episodes of each part named in `shares` (one of them `train`; shares of 0 or more
    that sum to 1), stratified by behaviour and cut in the listed order."""
    if "train" not in shares or any(s < 0 for s in shares.values()) or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise UserError(f"episode split {dict(shares)}: give a train part and shares of 0 or more that sum to 1")
    groups: dict[str, list[Episode]] = {}
    for ep in sorted(episodes, key=lambda e: str(e.path)):
        groups.setdefault(ep.behavior, []).append(ep)
    rng = np.random.default_rng(seed)
    out: dict[str, list[Episode]] = {part: [] for part in shares}
    for behavior in sorted(groups):
        group = groups[behavior]
        order = rng.permutation(len(group))
        sizes = part_sizes(len(group), shares)
        start = 0
        for part in shares:
            out[part] += [group[int(i)] for i in order[start:start + sizes[part]]]
            start += sizes[part]
    return out
