"""Wuji's comparison on the bug-injected Block Maze: bugs found over time and states covered.

Five strategies, the same budget of game steps (evaluation plays and PPO training together),
the same oracles (crash, stuck, the maze's health assertion), on several seeds (each seed its own
maze, coin and bug places):

    random     uniformly random actions
    rl         PPO only: the population's members trained further each generation, no selection
    ea_s       EA only, single objective (survivors by winning score)
    ea_s_rl    EA + PPO-refined offspring, single objective
    wuji       EA + PPO-refined offspring, NSGA-II on exploration and winning

A bug counts as found when an oracle's finding happened on its cell within the budget; the bugs'
places are read from the game by this script only (the tester never sees them). Findings that
match no injected bug are counted apart. Prints a table, saves a plot of bugs over game steps.

    python scripts/bench_evolve.py [--seeds 0 1 2] [--budget 30000] [--population 6] [--plot bench_evolve.png]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from playtester.capture.block_maze import ENV_ID, BlockMaze
from playtester.evolution.run import run_evolve
from playtester.evolution.population import EvolutionConfig, default_offspring_ppo
from playtester.tester.runlog import read_jsonl

STRATEGIES = {
    "random": dict(policy="random", evolve=False, train_offspring=False),
    "rl": dict(evolve=False, train_offspring=True),
    "ea_s": dict(evolve=True, train_offspring=False, objectives="winning"),
    "ea_s_rl": dict(evolve=True, train_offspring=True, objectives="winning"),
    "wuji": dict(evolve=True, train_offspring=True, objectives="both"),
}
ASSERT = "playtester.capture.block_maze:health_in_range"


def run_one(strategy: str, seed: int, args: argparse.Namespace, root: Path) -> dict:
    maze = BlockMaze(maze_seed=seed, size=args.size)
    bug_at = {b.cell: b for b in maze.bugs}
    ppo = replace(default_offspring_ppo(), total_timesteps=args.ppo_steps)
    cfg = EvolutionConfig(game=f"gym:{ENV_ID}", run_dir=str(root / f"{strategy}-{seed}"), game_options={"maze_seed": seed, "size": args.size},
                          population_size=args.population, generations=10**6, budget_steps=args.budget, eval_episodes=args.episodes,
                          eval_steps=args.steps, num_envs=args.envs, frame_size=args.frame_size, ppo=ppo, seed=seed,
                          **STRATEGIES[strategy])
    start = time.perf_counter()
    evo = run_evolve(cfg, assertions=[ASSERT], stuck_steps=8, log=lambda _: None)
    wall = time.perf_counter() - start
    found: dict[int, int] = {}  # bug id → game steps when first found
    false = set()
    for f in read_jsonl(Path(cfg.run_dir) / "findings.jsonl"):
        at = f["details"]["game_steps"]
        if at > args.budget:
            continue
        pos = f["details"].get("position")
        bug = bug_at.get((int(pos[0]), int(pos[1]))) if pos else None
        if bug is None:
            false.add(f["details"]["signature"])
        elif bug.id not in found or at < found[bug.id]:
            found[bug.id] = at
    rows = list(read_jsonl(Path(cfg.run_dir) / "generations.jsonl"))
    return {"strategy": strategy, "seed": seed, "bugs": len(found), "of": len(maze.bugs),
            "regions": {r: sum(maze.bugs[i].region == r for i in found) for r in ("near", "far", "off_route")},
            "times": sorted(found.values()), "false": len(false), "states": rows[-1]["states_covered"],
            "best_winning": max(r["best_winning"] for r in rows), "generations": evo.generation, "steps": evo.steps,
            "wall": wall}


def mean_sd(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=int, default=30_000, help="game steps per run (evaluations + training)")
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    ap.add_argument("--population", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=2, help="evaluation episodes per policy")
    ap.add_argument("--steps", type=int, default=100, help="step limit of an episode")
    ap.add_argument("--ppo-steps", type=int, default=1024, help="most PPO steps per offspring (early stop may end it first)")
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--frame-size", type=int, default=48)
    ap.add_argument("--size", type=int, default=15, help="maze side in cells (odd)")
    ap.add_argument("--plot", default="bench_evolve.png")
    args = ap.parse_args()
    torch.set_num_threads(1)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:  # strategies alternate within a seed: the machine's load falls on all alike
            for strategy in args.strategies:
                r = run_one(strategy, seed, args, Path(tmp))
                results.append(r)
                print(f"seed {seed} {strategy:8s} bugs {r['bugs']}/{r['of']} {r['regions']} false {r['false']} "
                      f"states {r['states']} best winning {r['best_winning']:.2f} gens {r['generations']} "
                      f"steps {r['steps']} {r['wall']:.0f} s", flush=True)

    print(f"\nBlock Maze {args.size}×{args.size}, budget {args.budget} game steps, seeds {args.seeds}, population {args.population}")
    print("| strategy | bugs found (of 9) | near / far / off-route | states covered | best winning score | false findings | generations | wall s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for strategy in args.strategies:
        rs = [r for r in results if r["strategy"] == strategy]
        regions = " / ".join(f"{statistics.mean(r['regions'][k] for r in rs):.1f}" for k in ("near", "far", "off_route"))
        print(f"| {strategy} | {mean_sd([r['bugs'] for r in rs])} | {regions} | {mean_sd([r['states'] for r in rs])} | "
              f"{mean_sd([r['best_winning'] for r in rs])} | {statistics.mean(r['false'] for r in rs):.1f} | "
              f"{statistics.mean(r['generations'] for r in rs):.1f} | {statistics.mean(r['wall'] for r in rs):.0f} |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0, args.budget, 101)
    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy in args.strategies:
        rs = [r for r in results if r["strategy"] == strategy]
        curve = np.mean([[sum(t <= g for t in r["times"]) for g in grid] for r in rs], axis=0)
        ax.step(grid, curve, where="post", label=strategy)
    ax.set_xlabel("game steps (evaluations + training)")
    ax.set_ylabel(f"bugs found (mean of {len(args.seeds)} seeds)")
    ax.set_title("Block Maze: injected bugs found over time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
