"""How long `Places` takes to cluster a run that keeps finding new places, side by side with the
way it was done before 2026-11-29 (every exemplar stacked again at each look-up after a new place).

A level's returning run (`returns`, `playtester/tester/frontier.py`) finds thousands of pixel
places in 10 000 steps; the places view of a window run finds tens an episode. Unit vectors of the
pixel embedding's size, random (every one a new place at the pixel threshold), the two clusterers
in turn, `--rounds` times:

    python scripts/bench_places_growth.py --places 4000 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from playtester.perception.places import PIXEL_SIZE, PIXEL_THRESHOLD, Places, unit


class StackedPlaces(Places):
    """The clusterer as it was: the exemplars stacked into a matrix again whenever a place was added."""

    def nearest(self, vector: np.ndarray) -> tuple[int | None, float]:
        if not self.places:
            return None, float("inf")
        similarity = np.stack([p.vector for p in self.places]) @ vector
        i = int(np.argmax(similarity))
        return i, float(1.0 - similarity[i])


def seconds(kind: type[Places], vectors: list[np.ndarray]) -> tuple[float, int]:
    places = kind(PIXEL_THRESHOLD)
    start = time.perf_counter()
    for v in vectors:
        places.visit(v)
    return time.perf_counter() - start, places.count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--places", type=int, default=4000, help="New places the run finds.")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vectors = [unit(rng.standard_normal(PIXEL_SIZE[0] * PIXEL_SIZE[1])) for _ in range(args.places)]
    for r in range(args.rounds):
        before, n = seconds(StackedPlaces, vectors)
        now, m = seconds(Places, vectors)
        assert n == m == args.places
        print(f"round {r + 1}: {args.places} new places: stacked {before:.2f} s, buffer {now:.2f} s, ×{before / now:.1f}")


if __name__ == "__main__":
    main()
