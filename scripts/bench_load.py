"""RELINE on the performance-bugged park: the load agent, the plain explorer, random and the path
follower, 5 seeds, low-FPS points inside the slow groves against outside.

    python scripts/bench_load.py [--profile small|full] [--game doom:park-perf:5:24x24] [--jobs N] [--timesteps N] [--out runs/bench_load]

Frame time is the step's CPU time (the engine process's and the game thread's: `DoomGame`'s
default `frame_clock="cpu"`), which the other processes on a shared machine do not change; the
wall clock, read in the same steps, is reported beside it in the reliability check only.

1. Grove distances: cells of walking from every start point to the nearest grove, and the steps
   that takes walking straight (the episodes must be longer than that for an agent to get there).
2. Reliability: one fixed action sequence (walk into a slow grove, turn on the spot) replayed
   `replays` times from the same start; Spearman's ρ between the per-step frame times of every
   pair of replays (Holm-adjusted p), for the CPU clock and the wall clock.
3. Per seed (in parallel with `--jobs`: the CPU clock makes that fair): the random agent plays
   `baseline_episodes` for `t_b = mean + 5 sd`; PPO trains the plain explorer (inspector mode:
   single-predictor RND, conv GRU) and the load agent (the same + `LoadReward`, whose warm-up
   shifts `t_b` by the quartile rule to `t`); then the load agent, the explorer, random and the
   scripted path follower (a player sent along the paths into the groves, nearest first, from
   telemetry: the control that shows the groves can be reached and measured) play
   `eval_episodes` from the same random starts, interleaved.
   Low-FPS points are telemetry cells where more than half the visits exceeded `t`; a point is in
   a grove when its cell overlaps one (`perf.json`, never shown to the agents).
4. Over seeds: in-grove points per agent; the load agent against each other agent by Mann–Whitney
   (two-sided, Holm) with Cliff's delta on the per-seed counts, and on the frame times at
   in-grove low-FPS points pooled over seeds (RELINE's comparison).

Writes `results.json`, `replays.png` and per seed one low-FPS map per agent under `--out`, and
prints the markdown table docs/benchmarks/seeds.md holds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

from playtester.cores import wait_quietly

wait_quietly()  # before torch loads: runs at once must not spin on each other's cores (docs/benchmarks/explorer.md)

import numpy as np
import torch

from playtester.files import write_bytes_atomic, write_text_atomic
from playtester.capture.frames import FrameSpec
from playtester.capture.games import make_game, park_config_from_spec
from playtester.capture.park.birdseye import render_birdseye
from playtester.capture.park.perf import PerfParkConfig, build_perf_park, walk_distances
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.load.reward import LoadReward, LoadRewardConfig, LoadThreshold
from playtester.load.agent import frame_times, load_env, play_episodes
from playtester.exploration.modes import explorer_preset
from playtester.exploration.ppo import PPOConfig, train
from playtester.exploration.reward import ExplorationReward
from playtester.exploration.rnd import RNDConfig
from playtester.load.stats import cliffs_delta, compare_agents, holm, magnitude, spearman_reliability
from playtester.load.lowfps import VisitLog, confidence_summary, low_fps_map, low_fps_points, point_frame_times

PROFILES = {
    # "small": what 2 shared cores allow in about an hour; "full": the protocol (a machine with a core per job)
    "small": dict(seeds=5, replays=5, baseline_episodes=2, timesteps=2048, warmup_steps=64, eval_episodes=2, steps=500),
    "smoke": dict(seeds=2, replays=2, baseline_episodes=1, timesteps=128, warmup_steps=16, eval_episodes=1, steps=40),
    "full": dict(seeds=5, replays=10, baseline_episodes=4, timesteps=65536, warmup_steps=128, eval_episodes=8, steps=500),
}
FRAME = FrameSpec.square(64)
AGENTS = ("load agent", "explorer", "random", "path follower (scripted)")
"""The path follower is sent into the groves (telemetry and the zones' cells): the control that
the groves can be reached and measured."""
FORWARD_UNITS_PER_STEP = 20.6
"""Map units a step of walking straight covers on the park (measured: 10 forward steps from a standstill)."""


def png(image: np.ndarray) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def reliability(game: str, zones, replays: int, out: Path) -> dict:
    """Spearman's ρ between replays of one fixed sequence, for the CPU clock and the wall clock read
    in the same steps (so the comparison of the two is paired)."""
    from playtester.capture.timing import warm_up

    z = zones[0]
    actions = [0] * 14 + [4] * 16 + [0] * 10  # walk east into the grove, turn, walk on
    env = make_game(game)
    timings = {"cpu": np.zeros((replays, len(actions))), "wall": np.zeros((replays, len(actions)))}
    try:
        warm_up(env, 20, seed=3)
        for r in range(replays):
            env.reset(seed=3, options={"start": (z.x - 3 * 128, z.y, 0.0)})
            for t, a in enumerate(actions):
                info = env.step(a)[4]
                timings["cpu"][r, t], timings["wall"][r, t] = info["frame_cpu_ms"], info["frame_wall_ms"]
    finally:
        env.close()
    rel = {clock: spearman_reliability(t).to_dict() for clock, t in timings.items()}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3), dpi=100)
    for ax, (clock, t) in zip(axes, timings.items()):
        for row in t:
            ax.plot(row, color="#1f77b4", alpha=0.4, lw=1)
        ax.set_xlabel("step of the fixed action sequence")
        ax.set_ylabel(f"frame time, {clock} clock (ms)")
        ax.set_title(f"{clock}: Spearman ρ min {rel[clock]['rho_min']:.2f}, median {rel[clock]['rho_median']:.2f}", fontsize=10)
    fig.tight_layout()
    fig.canvas.draw()
    write_bytes_atomic(out / "replays.png", png(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()))
    plt.close(fig)
    return rel


def grove_distances(layout, zones) -> dict:
    """Cells of walking from every start point to the nearest grove, and the steps that takes."""
    dist = walk_distances(layout, [z.cell for z in zones])
    cells = np.array([dist[layout.cell_of(s.x, s.y)[::-1]] for s in layout.starts])
    per_cell = layout.config.cell / FORWARD_UNITS_PER_STEP
    return {"starts": len(cells), "cells_min": int(cells.min()), "cells_median": float(np.median(cells)),
            "cells_max": int(cells.max()), "steps_per_cell": per_cell,
            "straight_steps_median": float(np.median(cells) * per_cell), "straight_steps_max": float(cells.max() * per_cell)}


def train_agent(name: str, game: str, p: dict, seed: int, out: Path, threshold: LoadThreshold | None) -> tuple[torch.nn.Module, LoadThreshold | None, float]:
    preset = explorer_preset("inspector", RNDConfig(hidden_dim=128, out_dim=64))
    explore = ExplorationReward(preset.reward, num_envs=1)
    hook = explore
    if threshold is not None:
        hook = LoadReward(LoadRewardConfig(warmup_steps=p["warmup_steps"]), threshold, num_envs=1, inner=explore, game=game)
    cfg = PPOConfig(env_id=game, run_dir=str(out / f"train-{name}"), seed=seed, total_timesteps=p["timesteps"], num_envs=1,
                    num_steps=128, num_minibatches=1, update_epochs=4, vector_env="sync", encoder="conv", frames=FRAME,
                    hidden_dim=128, rnn_dim=128, env_reward_coef=0.0, checkpoint_every=0, log_every=4)
    start = time.perf_counter()
    result = train(cfg, reward_hook=hook, env_fn=functools.partial(load_env, game, FRAME, p["steps"]))
    shifted = hook.threshold if isinstance(hook, LoadReward) else None
    return result.agent, shifted, time.perf_counter() - start


def play_path_follower(env, layout, zones, game: str, seed: int, episode: int) -> list[dict]:
    """One episode of the scripted path follower (telemetry-driven), sent into the groves, the
    nearest first by the paths, then on along the network: the control that shows a grove can be
    reached within an episode and that its frames are measured as slow."""
    from playtester.capture.experts import PathFollower
    from playtester.capture.timing import require_frame_time

    _, info = env.reset(seed=seed)
    here = layout.cell_of(*info["position"][:2])
    mask = layout.pathway_mask

    def steps_along_paths(cell: tuple[int, int]) -> float:
        route = layout.route(here, cell, only=mask)
        return len(route) if route else float("inf")  # a grove the paths do not reach from here: last

    groves = sorted((z.cell for z in zones), key=steps_along_paths)
    follower = PathFollower(layout, env.unwrapped.keymap, np.random.default_rng(seed), goals=groves)
    follower.reset(info)
    records, t = [], 0
    while True:
        action = follower.act(info)
        _, _, terminated, truncated, info = env.step(action)
        records.append({"episode": episode, "t": t, "action": action, "frame_time_ms": require_frame_time(info, game),
                        "position": [float(v) for v in info["position"]]})
        t += 1
        if terminated or truncated:
            return records


def collect(agents: dict, game: str, p: dict, seed: int, layout, zones) -> dict[str, list[dict]]:
    """Episodes of every agent, interleaved (episode e of each in turn) so that the machine's load
    falls on all alike; the same start seeds for all."""
    env = load_env(game, FRAME, p["steps"])
    records: dict[str, list[dict]] = {name: [] for name in agents}
    try:
        for e in range(p["eval_episodes"]):
            for name, agent in agents.items():
                if agent == "path":
                    records[name] += play_path_follower(env, layout, zones, game, seed + e, e)
                else:
                    eps = play_episodes(agent, env, 1, game=game, seed=seed + e, warmup_steps=20 if e == 0 else 0)
                    records[name] += [r | {"episode": e} for r in eps]
    finally:
        env.close()
    return records


def evaluate(name: str, records: list[dict], t: float, layout, zones, out: Path) -> dict:
    """One agent's low-FPS points, split into those in a grove and those outside."""
    cell = float(layout.config.cell)
    log = VisitLog.from_records(records, cell=cell)
    points = low_fps_points(log, t)
    in_grove = [pt for pt in points if pt.centre and any(z.contains(*pt.centre, margin=cell * 0.71) for z in zones)]
    inside = np.array([any(z.contains(r["position"][0], r["position"][1]) for z in zones) if r.get("position") else False
                       for r in records])
    view = render_birdseye(layout, oois=False)
    write_bytes_atomic(out / f"lowfps-{name.split()[0]}.png", png(low_fps_map(view, points, cell, visited=log)))
    all_times = frame_times(records)
    return {
        "agent": name, "steps": len(records), "steps_in_groves": int(inside.sum()), "cells_visited": len(log.times),
        "low_fps_points": len(points), "in_grove_points": len(in_grove), "outside_points": len(points) - len(in_grove),
        **{k: v for k, v in confidence_summary(points).items() if k != "points"},
        "frame_time_median_in_groves": float(np.median(all_times[inside])) if inside.any() else None,
        "frame_time_median_outside": float(np.median(all_times[~inside])) if (~inside).any() else None,
        "over_t_share": float(np.mean(all_times > t)), "_point_times": point_frame_times(in_grove).tolist(),
    }


def run_seed(game: str, p: dict, seed: int, out: Path) -> dict:
    """One seed of the comparison: its baseline threshold, its two trained agents, four agents played."""
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    files = build_perf_park(PerfParkConfig(park=park_config_from_spec(game)))
    zones, layout = files.zones(), files.layout()
    random_agent = RandomAgent(RandomAgentConfig(num_actions=9))
    env = load_env(game, FRAME, p["steps"])
    try:
        baseline = play_episodes(random_agent, env, p["baseline_episodes"], game=game, seed=seed * 1000 + 500)
    finally:
        env.close()
    threshold = LoadThreshold.from_baseline(frame_times(baseline))
    explorer, _, explorer_s = train_agent("explorer", game, p, seed, out, None)
    load, shifted, load_s = train_agent("load", game, p, seed, out, threshold)
    t = shifted.value
    agents = {"load agent": load, "explorer": explorer, "random": random_agent, "path follower (scripted)": "path"}
    records = collect(agents, game, p, seed * 1000 + 1000, layout, zones)
    rows = [evaluate(name, records[name], t, layout, zones, out) for name in agents]
    return {"seed": seed, "threshold": shifted.to_dict(), "train_seconds": {"explorer": explorer_s, "load": load_s}, "agents": rows}


def summarise(per_seed: list[dict]) -> dict:
    """Per agent, the in-grove points over seeds; the load agent against each other agent by
    Mann–Whitney (two-sided, Holm) with Cliff's delta on the per-seed counts, and on the frame
    times at in-grove low-FPS points (RELINE's comparison), pooled over seeds."""
    from scipy import stats

    counts = {a: [next(r for r in s["agents"] if r["agent"] == a)["in_grove_points"] for s in per_seed] for a in AGENTS}
    others = [a for a in AGENTS if a != "load agent"]
    raw = [float(stats.mannwhitneyu(counts["load agent"], counts[a], alternative="two-sided").pvalue) for a in others]
    tests = [{"a": "load agent", "b": b, "p": p, "p_holm": float(ph), "cliffs_delta": cliffs_delta(counts["load agent"], counts[b]),
              "magnitude": magnitude(cliffs_delta(counts["load agent"], counts[b]))}
             for b, p, ph in zip(others, raw, holm(raw))]
    point_times = {a: [t for s in per_seed for r in s["agents"] if r["agent"] == a for t in r["_point_times"]] for a in AGENTS}
    return {"in_grove_points": counts, "count_tests": tests,
            "point_time_tests": [c.__dict__ for c in compare_agents(point_times)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="small")
    ap.add_argument("--game", default="doom:park-perf:5:24x24")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_load"))
    ap.add_argument("--seeds", type=int, nargs="+", help="default: 0 … the profile's seeds − 1")
    ap.add_argument("--jobs", type=int, default=1, help="seeds played at once, each in its own process (the CPU clock is "
                    "not disturbed by the others; give each job a core)")
    ap.add_argument("--timesteps", type=int, help="PPO steps per trained agent instead of the profile's")
    args = ap.parse_args(argv)
    p = PROFILES[args.profile] | ({"timesteps": args.timesteps} if args.timesteps else {})
    seeds = args.seeds if args.seeds is not None else list(range(p["seeds"]))
    args.out.mkdir(parents=True, exist_ok=True)
    files = build_perf_park(PerfParkConfig(park=park_config_from_spec(args.game)))
    zones, layout = files.zones(), files.layout()
    results: dict = {"game": args.game, "profile": args.profile, **p, "seeds": seeds, "load_average_start": os.getloadavg()}
    t0 = time.perf_counter()
    results["grove_distances"] = grove_distances(layout, zones)
    print("grove distances:", results["grove_distances"], flush=True)
    results["reliability"] = reliability(args.game, zones, p["replays"], args.out)
    print("reliability:", results["reliability"], flush=True)

    per_seed = []
    if args.jobs > 1:
        from playtester.workers import process_pool

        with process_pool(args.jobs) as pool:
            futures = [pool.submit(run_seed, args.game, p, s, args.out / f"seed-{s}") for s in seeds]
            per_seed = [f.result() for f in futures]
    else:
        for s in seeds:
            per_seed.append(run_seed(args.game, p, s, args.out / f"seed-{s}"))
            print(f"seed {s}:", [{k: v for k, v in r.items() if not k.startswith("_")} for r in per_seed[-1]["agents"]], flush=True)
    results["summary"] = summarise(per_seed)
    results["per_seed"] = [s | {"agents": [{k: v for k, v in r.items() if not k.startswith("_")} for r in s["agents"]]} for s in per_seed]
    results["load_average_end"] = os.getloadavg()
    results["wall_seconds"] = time.perf_counter() - t0
    write_text_atomic(args.out / "results.json", json.dumps(results, indent=1))
    print_table(results, per_seed)
    return 0


def print_table(results: dict, per_seed: list[dict]) -> None:
    g, rel = results["grove_distances"], results["reliability"]
    print(f"\ngroves: {g['cells_min']}–{g['cells_max']} cells of walking from a start (median {g['cells_median']:.0f}), "
          f"{g['steps_per_cell']:.1f} steps a cell straight: {g['straight_steps_median']:.0f} steps at the median, "
          f"{g['straight_steps_max']:.0f} at most; episodes of {results['steps']} steps")
    print(f"reliability (Spearman ρ over {results['replays']} replays): CPU clock min {rel['cpu']['rho_min']:.2f} median "
          f"{rel['cpu']['rho_median']:.2f}; wall clock min {rel['wall']['rho_min']:.2f} median {rel['wall']['rho_median']:.2f}")
    thresholds = [s["threshold"]["value"] for s in per_seed]
    print(f"thresholds t (CPU ms): {', '.join(f'{v:.2f}' for v in thresholds)}; load average {results['load_average_start'][0]:.1f} "
          f"at the start, {results['load_average_end'][0]:.1f} at the end; {results['wall_seconds']:.0f} s\n")
    print("| agent | steps in groves (a seed) | low-FPS points in groves (mean ± sd; per seed) | outside groves | "
          "frame time median in / outside groves (CPU ms) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for a in AGENTS:
        rows = [next(r for r in s["agents"] if r["agent"] == a) for s in per_seed]
        inside = [r["in_grove_points"] for r in rows]
        med_in = [r["frame_time_median_in_groves"] for r in rows if r["frame_time_median_in_groves"] is not None]
        med_out = [r["frame_time_median_outside"] for r in rows if r["frame_time_median_outside"] is not None]
        print(f"| {a} | {np.mean([r['steps_in_groves'] for r in rows]):.0f} | {np.mean(inside):.1f} ± {np.std(inside):.1f} "
              f"({', '.join(map(str, inside))}) | {np.mean([r['outside_points'] for r in rows]):.1f} | "
              f"{np.median(med_in) if med_in else float('nan'):.2f} / {np.median(med_out) if med_out else float('nan'):.2f} |")
    print("\nIn-grove low-FPS points per seed, load agent against each (Mann–Whitney, two-sided, Holm; Cliff's δ):")
    for c in results["summary"]["count_tests"]:
        print(f"- load agent vs {c['b']}: p = {c['p']:.3g} (Holm {c['p_holm']:.3g}), δ = {c['cliffs_delta']:+.2f} ({c['magnitude']})")
    print("Frame times at in-grove low-FPS points, pooled over seeds (RELINE's comparison):")
    for c in results["summary"]["point_time_tests"]:
        print(f"- {c['a']} vs {c['b']}: p = {c['p_holm']:.3g} (Holm), δ = {c['cliffs_delta']:+.2f} ({c['magnitude']})")


if __name__ == "__main__":
    sys.exit(main())
