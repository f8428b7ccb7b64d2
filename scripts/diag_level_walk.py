"""Why the level-walk expert stalls on a level: it walks the level as the benchmark's expert does
(`remember`, no jitter) outside the tester loop (no oracles, no logs: seconds, not minutes), and
prints per episode the reachable coverage cells it has been in (and the walkable cells it has
been in that the level graph calls out of reach: any is the graph's error), the keys it picked up, the
switches and walk-over lines it set off, the steps it spent stuck (not moving after a move) and
the steps spent going for a key or a switch. `--log FILE` writes every step (position, sector,
action, goal, keys, stuck count) as JSON lines for a closer look.

    python scripts/diag_level_walk.py doom:freedoom2:MAP10 --episodes 10 --steps 1000

Coverage here is the walker's own count of the reachable 64-unit cells (the report's
`reachable_share` counts the same cells from the run's trajectory).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("level", help="A Doom level's game spec, e.g. doom:freedoom2:MAP10.")
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1, help="As the benchmark's seed: episode e starts with seed × 1000 + e.")
    ap.add_argument("--rules", default="immortal", choices=("immortal", "no-monsters", "play"))
    ap.add_argument("--log", type=Path, help="Write every step as a JSON line here.")
    ap.add_argument("--left", action="store_true",
                    help="At the end, say how many reachable cells the walker's grid reaches at best (every switch and key "
                         "it can get to), and list the reachable cells never walked, by sector: how many, where, and "
                         "whether the grid routes there from where the walker stopped.")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="Try another value of one of capture/level_walk.py's constants (a number), e.g. --set GIVE_UP_STEPS=60.")
    args = ap.parse_args(argv)

    from playtester.capture import level_walk
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker

    for item in args.set:
        name, _, value = item.partition("=")
        if not isinstance(getattr(level_walk, name, None), (int, float)):
            ap.error(f"--set {item}: {name} is no numeric constant of capture/level_walk.py")
        setattr(level_walk, name, type(getattr(level_walk, name))(value))

    env = make_game(args.level, rules=args.rules, max_steps=args.steps)
    log = args.log.open("w") if args.log else None
    try:
        game = env.unwrapped
        walker = LevelWalker(game.graph, game.keymap, np.random.default_rng(args.seed), jitter=0.0, remember=True,
                             monsters=args.rules != "no-monsters", standing=args.rules == "immortal")
        total = int(walker.targets_mask.sum())
        walkable = game.graph.level.walkable_cells(level_walk.CELL)
        for episode in range(args.episodes):
            _, info = env.reset(seed=args.seed * 1000 + episode)
            walker.reset(info)
            stuck = errands = 0
            for t in range(args.steps):
                action = walker.act(info)
                stuck += walker.stuck_steps > 0
                errands += walker.goal_key is not None or walker.goal_switch is not None
                if log is not None:
                    x, y, z = info["position"]
                    goal = walker.route[-1] if walker.route else None
                    log.write(json.dumps({
                        "episode": episode, "t": t, "x": round(x), "y": round(y), "z": round(z),
                        "sector": game.graph.sector_at(x, y), "action": int(action),
                        "goal": None if goal is None else [round(v) for v in walker.nav.centre(goal)],
                        "key": walker.goal_key, "switch": walker.goal_switch, "keys": sorted(walker.keys),
                        "stuck": walker.stuck_steps, "cells": int((walker.visited & walker.targets_mask).sum())}) + "\n")
                _, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            cells = int((walker.visited & walker.targets_mask).sum())
            outside = int((walker.visited & ~walker.targets_mask & walkable).sum())
            print(f"episode {episode}: {cells} of {total} reachable cells ({cells / total:.1%}); keys {sorted(walker.keys) or '-'}; "
                  f"set off {sorted(walker.pressed) or '-'}; stuck {stuck} steps; {errands} steps going for a key or a switch; "
                  f"{outside} walkable cells walked that the graph calls out of reach", flush=True)
        if args.left:
            _left(walker, game.graph, info)
    finally:
        env.close()
        if log is not None:
            log.close()
    return 0


def _left(walker, graph, info) -> None:
    """The reachable cells never walked, grouped by the sector most of each lies in."""
    from collections import defaultdict

    from playtester.capture.level_walk import CELL

    reach = walker.grid_reach(*graph.start()[:2])
    print(f"  the walker's grid reaches {int(reach.sum())} of the {int(walker.targets_mask.sum())} reachable cells "
          f"(every switch and key it can get to); {int((reach & walker.visited).sum())} of them walked; "
          f"{int(walker.behind_monsters.sum())} more lie past a monster standing in the way (not counted)")
    nav = walker.nav
    start = nav.node_at(*info["position"][:2]) or nav._node_near(*info["position"][:2], radius=4)
    dist = nav.routes(start)[0] if start is not None else np.full(len(nav.cells), np.inf)
    x0, y0 = graph.level.bounds[:2]
    groups: dict[int, list[tuple[int, int, bool]]] = defaultdict(list)
    for row, col in np.argwhere(walker.targets_mask & ~walker.visited):
        xs, ys = x0 + col * CELL + np.arange(4, CELL, 8), y0 + row * CELL + np.arange(4, CELL, 8)
        sectors = [graph.sector_at(x, y) for x in xs for y in ys]
        sector = max(set(sectors) - {None}, key=sectors.count)
        nodes = [nav.node_at(x, y) for x in xs for y in ys]
        routed = any(n is not None and np.isfinite(dist[n]) for n in nodes)
        groups[sector].append((int(x0 + (col + 0.5) * CELL), int(y0 + (row + 0.5) * CELL), routed))
    for sector, cells in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:25]:
        s = graph.level.sectors[sector]
        print(f"  sector {sector} (floor {s.floor:g}, ceiling {s.ceiling:g}): {len(cells)} cells, "
              f"{sum(c[2] for c in cells)} routed; e.g. {cells[0][:2]}")


if __name__ == "__main__":
    sys.exit(main())
