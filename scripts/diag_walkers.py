"""Cheap pixel-only walkers on a Doom level, outside the tester loop: how far does behaviour that
needs no learning carry on the `levels` profile's budget? A floor any explorer should clear.

    python scripts/diag_walkers.py --levels doom:freedoom2:MAP01 doom:freedoom1:E1M2 --seeds 1 2 3 4 5

Each walker plays `--episodes` × `--steps` under `immortal` rules, episode e of seed s from reset
seed s × 1000 + e (as `bench_agents.py`'s runs), and is scored as the report scores a run: the
share of the level's reachable 64-unit cells (as the report counts them under `immortal`) it has
stood in over the whole run: telemetry scores, never steers. The walkers, all on pixels and the
level key map only:

- `random`: a uniform action a step (the benchmark's random agent);
- `held`: a uniform action held for a geometric number of steps, mean `HOLD_MEAN` (temporally
  extended random, as ez-greedy's persistence);
- `zeta`: the same with a heavy-tailed hold, n ~ zeta(2) capped at 100 (ez-greedy's own);
- `bounce`: forward until the view stops changing (`blocked`), then USE (a door opens to what a
  player faces) and a turn of 3–12 steps one way; any step, with odds `WANDER`, a turn of 1–5.

One-sided Mann–Whitney U over seeds, each walker against random.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

HOLD_MEAN = 4
WANDER = 0.03
BLOCKED = 2.5
"""`bounce`: a forward step whose view's column profile (grey, the HUD rows off) moved less than
this (mean absolute change, 0–255) is blocked. Measured on MAP01 (forward steps of a walker, 3 000
steps): 2.4 the median step that moved the player under a unit, 3.9 the 5th percentile of steps
that moved it over 5 units; the bob of a player pushing at a wall shifts the view up and down,
which a column profile hardly sees."""
WALKERS = ("random", "held", "zeta", "bounce")


def profile(frame: np.ndarray) -> np.ndarray:
    """The view's column profile: grey, the rows between the top and the HUD, averaged down each column."""
    h = frame.shape[0]
    return frame[h // 12:h * 3 // 4].mean(axis=2).mean(axis=0)


class Walker:
    def __init__(self, kind: str, actions: list[str], rng: np.random.Generator):
        self.kind, self.rng, self.n = kind, rng, len(actions)
        self.forward, self.use = actions.index("forward"), actions.index("use")
        self.turns = [actions.index("turn_left"), actions.index("turn_right")]
        self.plan: list[int] = []
        self.last: np.ndarray | None = None

    def act(self, frame: np.ndarray, previous: int | None) -> int:
        view = profile(frame)
        if self.kind == "bounce" and previous == self.forward and self.last is not None \
                and np.abs(view - self.last).mean() < BLOCKED:
            self.plan = [self.use] + [int(self.rng.choice(self.turns))] * int(self.rng.integers(3, 13))
        self.last = view
        if not self.plan:
            self.plan = self._next()
        return self.plan.pop(0)

    def _next(self) -> list[int]:
        if self.kind == "bounce":
            if self.rng.random() < WANDER:
                return [int(self.rng.choice(self.turns))] * int(self.rng.integers(1, 6))
            return [self.forward]
        a = int(self.rng.integers(self.n))
        if self.kind == "held":
            return [a] * int(self.rng.geometric(1.0 / HOLD_MEAN))
        if self.kind == "zeta":
            return [a] * int(min(self.rng.zipf(2.0), 100))
        return [a]


def reachable(level: str) -> np.ndarray:
    """The level's reachable coverage cells as a run's report counts them under `immortal`."""
    from playtester.report.maps import level_source

    source, why = level_source(level, {"rules": "immortal"})
    if source is None or source.reachable_mask is None:
        raise SystemExit(f"error: {level}: no reachable cells to score against ({why or 'no player start'})")
    return source.reachable_mask


def walk(level: str, targets: np.ndarray, kind: str, seed: int, episodes: int, steps: int) -> float:
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import coverage_cell

    env = make_game(level, rules="immortal", max_steps=steps)
    try:
        game = env.unwrapped
        visited = np.zeros_like(targets)
        walker = Walker(kind, [a.name for a in game.keymap.actions], np.random.default_rng(seed))
        for episode in range(episodes):
            frame, info = env.reset(seed=seed * 1000 + episode)
            walker.plan, walker.last, action = [], None, None
            for _ in range(steps):
                action = walker.act(frame, action)
                frame, _, terminated, truncated, info = env.step(action)
                r, c = coverage_cell(game.graph.level.bounds, *info["position"][:2])
                if 0 <= r < visited.shape[0] and 0 <= c < visited.shape[1]:
                    visited[r, c] = True
                if terminated or truncated:
                    break
        return float((visited & targets).sum() / targets.sum())
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", nargs="+", default=["doom:freedoom2:MAP01", "doom:freedoom1:E1M2"])
    ap.add_argument("--walkers", nargs="+", default=list(WALKERS), choices=WALKERS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args(argv)
    from scipy.stats import mannwhitneyu

    print("| level | walker | reachable coverage (seeds " + ", ".join(map(str, args.seeds)) + ") | × random | p (greater than random) |")
    print("| --- | --- | --- | ---: | ---: |")
    for level in args.levels:
        targets = reachable(level)
        share = {k: [walk(level, targets, k, s, args.episodes, args.steps) for s in args.seeds] for k in args.walkers}
        base = share.get("random")
        for k, v in share.items():
            ratio = f"×{np.mean(v) / np.mean(base):.2f}" if base else "–"
            p = f"{mannwhitneyu(v, base, alternative='greater').pvalue:.3f}" if base and k != "random" else "–"
            print(f"| {level} | {k} | {100 * np.mean(v):.1f} % ({' / '.join(f'{100 * x:.1f}' for x in v)}) | {ratio} | {p} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
