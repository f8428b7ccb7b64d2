"""Wuji's comparison on the bug-injected Block Maze: bugs found at equal game steps and at equal
generations, over seeds, with p-values.

Strategies, the same oracles (crash, stuck, the maze's health assertion), each seed its own maze,
coin and bug places:

    random     uniformly random actions (a "generation" is one round of evaluations)
    rl         PPO only: the population's members trained further each generation, no selection
    ea_s       EA only, single objective (survivors by winning score)
    ea_s_rl    EA + PPO-refined offspring, single objective
    wuji       EA + PPO-refined offspring, NSGA-II on exploration and winning (as published)
    wuji_cheap Wuji refining only the offspring that beat their parent (`refine="improved"`)

Every run goes on until it has spent `--budget` game steps (evaluation plays and PPO training
together) and, with `--generations G`, played G generations, whichever comes last; bugs found
are then counted twice: by the step budget (equal steps) and by the generation (equal
generations). Without `--generations` only the step budget counts. A bug
counts as found when an oracle's finding happened on its cell; the bugs' places are read from the
game by this script only (the tester never sees them). Findings that match no injected bug are
counted apart. Per pair of strategies, Mann–Whitney (two-sided) with Cliff's delta on the per-seed
counts of all bugs and of the far and off-route bugs, and, since every strategy plays the same
maze in a seed, Wilcoxon's signed-rank test on the per-maze differences of bugs and of states
covered. `--report A/results.json B/results.json` prints earlier runs' tables again, together. `--jobs N` runs N seeds at once, each in its
own process.

    python scripts/bench_evolve.py [--seeds 0 1 2] [--budget 30000] [--generations G] [--population 6] [--jobs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from itertools import combinations
from dataclasses import replace
from pathlib import Path

from playtester.cores import wait_quietly

wait_quietly()  # before torch loads: runs at once must not spin on each other's cores (docs/benchmarks/explorer.md)

import torch
from scipy.stats import mannwhitneyu

from playtester.capture.frames import FrameSpec
from playtester.capture.block_maze import ENV_ID, BlockMaze
from playtester.evolution.run import run_evolve
from playtester.evolution.population import EvolutionConfig, default_offspring_ppo
from playtester.files import write_text_atomic
from playtester.load.stats import cliffs_delta, magnitude
from playtester.tester.runlog import read_jsonl

STRATEGIES = {
    "random": dict(policy="random", evolve=False, train_offspring=False),
    "rl": dict(evolve=False, train_offspring=True),
    "ea_s": dict(evolve=True, train_offspring=False, objectives="winning"),
    "ea_s_rl": dict(evolve=True, train_offspring=True, objectives="winning"),
    "wuji": dict(evolve=True, train_offspring=True, objectives="both", refine="all"),
    "wuji_cheap": dict(evolve=True, train_offspring=True, objectives="both", refine="improved"),
}
ASSERT = "playtester.capture.block_maze:health_in_range"


def run_one(strategy: str, seed: int, args: argparse.Namespace, root: Path) -> dict:
    torch.set_num_threads(1)
    maze = BlockMaze(maze_seed=seed, size=args.size)
    bug_at = {b.cell: b for b in maze.bugs}
    ppo = replace(default_offspring_ppo(), total_timesteps=args.ppo_steps)
    options = dict(STRATEGIES[strategy])
    cfg = EvolutionConfig(game=f"gym:{ENV_ID}", run_dir=str(root / f"{strategy}-{seed}"), game_options={"maze_seed": seed, "size": args.size},
                          population_size=args.population, generations=args.generations or 10**6,
                          budget_steps=0 if args.generations else args.budget, eval_episodes=args.episodes,
                          eval_steps=args.steps, num_envs=args.envs, frames=FrameSpec.square(args.frame_size), ppo=ppo, seed=seed, **options)
    shutil.rmtree(cfg.run_dir, ignore_errors=True)  # a benchmark run again starts afresh
    start = time.perf_counter()
    evo = run_evolve(cfg, assertions=[ASSERT], stuck_steps=8, log=lambda _: None)
    if evo.steps < args.budget:  # on to the step budget, from the checkpoint
        evo = run_evolve(replace(cfg, generations=10**6, budget_steps=args.budget, resume=True), assertions=[ASSERT],
                         stuck_steps=8, log=lambda _: None)
    wall = time.perf_counter() - start
    rows = list(read_jsonl(Path(cfg.run_dir) / "generations.jsonl"))
    findings = list(read_jsonl(Path(cfg.run_dir) / "findings.jsonl"))

    def found_by(within) -> dict:
        found, false = set(), set()
        for f in findings:
            if not within(f["details"]):
                continue
            pos = f["details"].get("position")
            bug = bug_at.get((int(pos[0]), int(pos[1]))) if pos else None
            if bug is None:
                false.add(f["details"]["signature"])
            else:
                found.add(bug.id)
        return {"bugs": len(found), "far_off": sum(maze.bugs[i].region != "near" for i in found),
                "regions": {r: sum(maze.bugs[i].region == r for i in found) for r in ("near", "far", "off_route")},
                "false": len(false)}

    at_gen = next((r for r in rows if r["generation"] == args.generations), rows[-1])
    times: dict[int, int] = {}
    for f in findings:
        pos = f["details"].get("position")
        bug = bug_at.get((int(pos[0]), int(pos[1]))) if pos else None
        if bug is not None:
            times[bug.id] = min(times.get(bug.id, 10**12), f["details"]["game_steps"])
    return {"strategy": strategy, "seed": seed, "of": len(maze.bugs),
            "steps": found_by(lambda d: d["game_steps"] <= args.budget),
            "generations": found_by(lambda d: d["generation"] <= (args.generations or 10**6)),
            "generations_at_budget": max((r["generation"] for r in rows if r["steps"] <= args.budget), default=0),
            "steps_at_generations": at_gen["steps"], "states_at_generations": at_gen["states_covered"],
            "states": rows[-1]["states_covered"], "best_winning": max(r["best_winning"] for r in rows),
            "times": sorted(times.values()), "total_generations": evo.generation, "total_steps": evo.steps, "wall": wall}


def mean_sd(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}" if len(values) > 1 else f"{values[0]:.1f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=int, default=30_000, help="game steps per run (evaluations + training)")
    ap.add_argument("--generations", type=int, default=0, help="generations every run plays at least (the equal-generations count); 0: none")
    ap.add_argument("--strategies", nargs="+", default=["random", "rl", "ea_s", "ea_s_rl", "wuji"], choices=list(STRATEGIES))
    ap.add_argument("--population", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=2, help="evaluation episodes per policy")
    ap.add_argument("--steps", type=int, default=100, help="step limit of an episode")
    ap.add_argument("--ppo-steps", type=int, default=1024, help="most PPO steps per refined offspring (early stop may end it first)")
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--frame-size", type=int, default=48)
    ap.add_argument("--size", type=int, default=15, help="maze side in cells (odd)")
    ap.add_argument("--jobs", type=int, default=1, help="seeds run at once, each in its own process")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_evolve"))
    ap.add_argument("--report", type=Path, nargs="+", metavar="RESULTS_JSON",
                    help="print the tables of earlier runs' results.json together (runs of other seeds with the same "
                         "settings), run nothing")
    args = ap.parse_args(argv)
    if args.report is not None:
        reprint(args)
        return
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    t0 = time.perf_counter()

    results: list[dict] = []
    if args.jobs > 1:
        from playtester.workers import process_pool

        with process_pool(args.jobs) as pool:
            futures = [pool.submit(run_one, strategy, seed, args, args.out / "runs") for seed in args.seeds for strategy in args.strategies]
            results = [f.result() for f in futures]
    else:
        for seed in args.seeds:  # strategies alternate within a seed: the machine's load falls on all alike
            for strategy in args.strategies:
                results.append(run_one(strategy, seed, args, args.out / "runs"))
                r = results[-1]
                print(f"seed {seed} {strategy:8s} equal steps: bugs {r['steps']['bugs']}/{r['of']} {r['steps']['regions']} | "
                      f"equal generations: bugs {r['generations']['bugs']} {r['generations']['regions']} at {r['steps_at_generations']} steps | "
                      f"{r['total_generations']} gens, {r['total_steps']} steps, {r['wall']:.0f} s", flush=True)
                write_text_atomic(args.out / "results.json", json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": results}, indent=1))
    write_text_atomic(args.out / "results.json", json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": results,
                                                              "load_average": [load_start, os.getloadavg()]}, indent=1))
    report(results, args, load_start, time.perf_counter() - t0)


SETTINGS = ("budget", "generations", "population", "episodes", "steps", "ppo_steps", "size")
"""What runs must share for `--report` to print them together."""


def reprint(args: argparse.Namespace) -> None:
    """`--report`: the tables of earlier runs, their rows together; runs with other settings refused in one line."""
    rows: list[dict] = []
    first = None
    for path in args.report:
        try:
            saved = json.loads(path.read_text())
            settings = {key: int(saved["args"][key]) for key in SETTINGS}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"error: --report {path}: not a bench_evolve results.json ({e})") from None
        if first is not None and settings != first:
            raise SystemExit(f"error: --report {path}: settings {settings} differ from {args.report[0]}'s {first}; report runs of one setting together")
        first = first or settings
        rows += saved["rows"]
    for key, value in first.items():
        setattr(args, key, value)
    args.strategies = [s for s in STRATEGIES if any(r["strategy"] == s for r in rows)]
    report(rows, args, (float("nan"),), float("nan"))


def report(results: list[dict], args: argparse.Namespace, load_start: tuple, seconds: float) -> None:
    """The two tables (equal steps, equal generations), the tests per pair and the per-seed counts."""
    args.seeds = sorted({r["seed"] for r in results})
    args.strategies = [s for s in args.strategies if any(r["strategy"] == s for r in results)]
    print(f"\nBlock Maze {args.size}×{args.size}, seeds {args.seeds}, population {args.population}, {args.episodes} evaluation episodes "
          f"of ≤ {args.steps} steps, ≤ {args.ppo_steps} PPO steps per refined offspring; load average {load_start[0]:.1f} → "
          f"{os.getloadavg()[0]:.1f}; {seconds:.0f} s")
    modes = [("steps", f"at equal steps ({args.budget} game steps)")]
    if args.generations:
        modes.append(("generations", f"at equal generations ({args.generations})"))
    for mode, heading in modes:
        print(f"\n{heading}:\n")
        print("| strategy | bugs found (of 9) | near / far / off-route | far + off-route | false findings | generations | game steps |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for strategy in args.strategies:
            rs = [r for r in results if r["strategy"] == strategy]
            regions = " / ".join(f"{statistics.mean(r[mode]['regions'][k] for r in rs):.1f}" for k in ("near", "far", "off_route"))
            gens = statistics.mean(r["generations_at_budget"] for r in rs) if mode == "steps" else args.generations
            steps = args.budget if mode == "steps" else statistics.mean(r["steps_at_generations"] for r in rs)
            print(f"| {strategy} | {mean_sd([r[mode]['bugs'] for r in rs])} | {regions} | {mean_sd([r[mode]['far_off'] for r in rs])} | "
                  f"{statistics.mean(r[mode]['false'] for r in rs):.1f} | {gens:.1f} | {steps:.0f} |")
        print()
        for a, b in combinations(args.strategies, 2):
            for key in ("bugs", "far_off"):
                x = [r[mode][key] for s in args.seeds for r in results if r["strategy"] == a and r["seed"] == s]
                y = [r[mode][key] for s in args.seeds for r in results if r["strategy"] == b and r["seed"] == s]
                p = float(mannwhitneyu(x, y, alternative="two-sided").pvalue) if len(x) > 1 else float("nan")
                d = cliffs_delta(x, y)
                print(f"- {a} vs {b}, {'all bugs' if key == 'bugs' else 'far + off-route'}: Mann–Whitney p = {p:.3g}, Cliff's δ = {d:+.2f} ({magnitude(d)})")
        paired(results, args, mode)
    print("\nper seed, bugs at equal steps" + (" / at equal generations:" if args.generations else ":"))
    for strategy in args.strategies:
        rs = sorted((r for r in results if r["strategy"] == strategy), key=lambda r: r["seed"])
        print(f"- {strategy}: " + ", ".join(f"{r['steps']['bugs']}" + (f"/{r['generations']['bugs']}" if args.generations else "")
                                            for r in rs))


def paired(results: list[dict], args: argparse.Namespace, mode: str) -> None:
    """Every strategy plays the same maze in a seed: the per-maze differences of bugs found and of
    states covered, by Wilcoxon's signed-rank test (two-sided, exact; mazes where the two tie drop
    out). With 5 mazes it cannot go below 0.0625, all five differences the same way."""
    from scipy.stats import wilcoxon

    states = "states" if mode == "steps" else "states_at_generations"
    by = {(r["strategy"], r["seed"]): r for r in results}
    seeds = [s for s in args.seeds if all((a, s) in by for a in args.strategies)]
    for a, b in combinations(args.strategies, 2):
        for label, value in (("bugs", lambda r: r[mode]["bugs"]), ("states covered", lambda r: r[states])):
            diff = [value(by[a, s]) - value(by[b, s]) for s in seeds]
            nonzero = [d for d in diff if d]
            p = float(wilcoxon(nonzero).pvalue) if nonzero else 1.0
            print(f"- paired by maze, {a} − {b}, {label}: differences {diff}, Wilcoxon p = {p:.3g}")


if __name__ == "__main__":
    main()
