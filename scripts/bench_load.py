"""RELINE on the performance-bugged park: the load agent, the plain explorer and random, compared.

    python scripts/bench_load.py [--profile small|default] [--game doom:park-perf:5:24x24] [--out runs/bench_load]

1. Reliability: one fixed action sequence (walk into a slow grove, turn on the spot) replayed
   `replays` times from the same start; Spearman's ρ between the per-step frame times of every
   pair of replays (Holm-adjusted p).
2. Baseline: the random agent plays `baseline_episodes`; `t_b = mean + 5 sd` of its frame times.
3. Training (PPO, one game in this process so nothing else runs while a step is timed):
   the plain explorer (inspector mode: single-predictor RND, PPO's conv GRU) and the load agent
   (the same explorer + `LoadReward`, whose warm-up shifts `t_b` by the quartile rule to `t`).
4. Evaluation: each agent, random, and the scripted path follower (a player who walks the paths,
   from telemetry: the control that shows the zones can be reached) play `eval_episodes` from the
   same random starts, interleaved episode by episode; low-FPS points are
   telemetry cells where more than half the visits exceeded `t`; a point is a true one when its
   cell overlaps a ground-truth slow zone (`perf.json`, never shown to the agents).

Writes `results.json`, `violins.png`, `replays.png` and one low-FPS map per agent under `--out`,
and prints the markdown table that docs/benchmarks/load.md holds.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from playtester.files import write_bytes_atomic, write_text_atomic
from playtester.capture.games import make_game, park_config_from_spec
from playtester.capture.park.birdseye import render_birdseye
from playtester.capture.park.perf import PerfParkConfig, build_perf_park
from playtester.capture.timing import raise_priority, replay_timings
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.load.reward import LoadReward, LoadRewardConfig, LoadThreshold
from playtester.load.agent import frame_times, load_env, play_episodes
from playtester.exploration.modes import explorer_preset
from playtester.exploration.ppo import PPOConfig, train
from playtester.exploration.reward import ExplorationReward
from playtester.exploration.rnd import RNDConfig
from playtester.load.stats import compare_agents, spearman_reliability
from playtester.load.lowfps import VisitLog, confidence_summary, low_fps_map, low_fps_points, point_frame_times, violin_plot

PROFILES = {
    # minutes on 2 shared cores
    "small": dict(replays=5, baseline_episodes=2, timesteps=4096, warmup_steps=64, eval_episodes=4, steps=200),
    "default": dict(replays=10, baseline_episodes=4, timesteps=16384, warmup_steps=128, eval_episodes=8, steps=300),
}
FRAME = 64


def png(image: np.ndarray) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def reliability(game: str, zones, replays: int, out: Path) -> dict:
    z = zones[0]
    actions = [0] * 14 + [4] * 16 + [0] * 10  # walk east into the grove, turn, walk on
    env = make_game(game)
    try:
        timings = replay_timings(env, actions, replays, game=game, seed=3,
                                 reset_options={"start": (z.x - 3 * 128, z.y, 0.0)}, warmup_steps=20)
    finally:
        env.close()
    rel = spearman_reliability(timings)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    for row in timings:
        ax.plot(row, color="#1f77b4", alpha=0.4, lw=1)
    ax.set_xlabel("step of the fixed action sequence")
    ax.set_ylabel("frame time (ms)")
    ax.set_title(f"{replays} replays: Spearman ρ min {rel.rho_min:.2f}, median {rel.rho_median:.2f}", fontsize=10)
    fig.tight_layout()
    fig.canvas.draw()
    write_bytes_atomic(out / "replays.png", png(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()))
    plt.close(fig)
    return rel.to_dict()


def train_agent(name: str, game: str, p: dict, seed: int, out: Path, threshold: LoadThreshold | None) -> tuple[torch.nn.Module, LoadThreshold | None, float]:
    preset = explorer_preset("inspector", RNDConfig(hidden_dim=128, out_dim=64))
    explore = ExplorationReward(preset.reward, num_envs=1)
    hook = explore
    if threshold is not None:
        hook = LoadReward(LoadRewardConfig(warmup_steps=p["warmup_steps"]), threshold, num_envs=1, inner=explore, game=game)
    cfg = PPOConfig(env_id=game, run_dir=str(out / f"train-{name}"), seed=seed, total_timesteps=p["timesteps"], num_envs=1,
                    num_steps=128, num_minibatches=1, update_epochs=4, vector_env="sync", encoder="conv", frame_size=FRAME,
                    hidden_dim=128, rnn_dim=128, env_reward_coef=0.0, checkpoint_every=0, log_every=4)
    start = time.perf_counter()
    result = train(cfg, reward_hook=hook, env_fn=functools.partial(load_env, game, FRAME, p["steps"]))
    shifted = hook.threshold if isinstance(hook, LoadReward) else None
    return result.agent, shifted, time.perf_counter() - start


def play_path_follower(env, layout, game: str, seed: int, episode: int) -> list[dict]:
    """One episode of the scripted path follower (telemetry-driven): the player who walks the paths."""
    from playtester.capture.experts import PathFollower
    from playtester.capture.timing import require_frame_time

    follower = PathFollower(layout, env.unwrapped.keymap, np.random.default_rng(seed))
    _, info = env.reset(seed=seed)
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


def collect(agents: dict, game: str, p: dict, seed: int, layout) -> dict[str, list[dict]]:
    """Episodes of every agent, interleaved (episode e of each in turn) so that the machine's load
    falls on all alike; the same start seeds for all."""
    env = load_env(game, FRAME, p["steps"])
    records: dict[str, list[dict]] = {name: [] for name in agents}
    try:
        for e in range(p["eval_episodes"]):
            for name, agent in agents.items():
                if agent == "path":
                    records[name] += play_path_follower(env, layout, game, seed + e, e)
                else:
                    eps = play_episodes(agent, env, 1, game=game, seed=seed + e, warmup_steps=20 if e == 0 else 0)
                    records[name] += [r | {"episode": e} for r in eps]
    finally:
        env.close()
    return records


def evaluate(name: str, records: list[dict], t: float, layout, zones, out: Path) -> dict:
    cell = float(layout.config.cell)
    log = VisitLog.from_records(records, cell=cell)
    points = low_fps_points(log, t)
    true = [pt for pt in points if pt.centre and any(z.contains(*pt.centre, margin=cell * 0.71) for z in zones)]
    in_zone = sum(any(z.contains(r["position"][0], r["position"][1]) for z in zones) for r in records if r.get("position"))
    view = render_birdseye(layout, oois=False)
    write_bytes_atomic(out / f"lowfps-{name.split()[0]}.png", png(low_fps_map(view, points, cell, visited=log)))
    all_times = frame_times(records)
    return {
        "agent": name, "steps": len(records), "steps_in_zones": int(in_zone), "cells_visited": len(log.times),
        "low_fps_points": len(points), "true_points": len(true), **{k: v for k, v in confidence_summary(points).items() if k != "points"},
        "frame_time_median": float(np.median(all_times)), "frame_time_p99": float(np.percentile(all_times, 99)),
        "over_t_share": float(np.mean(all_times > t)), "_point_times": point_frame_times(points).tolist(),
        "_all_times": all_times.tolist(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="small")
    ap.add_argument("--game", default="doom:park-perf:5:24x24")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_load"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--raise-priority", action="store_true", help="lift this process's priority (nice -10) if allowed")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    p = PROFILES[args.profile]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.raise_priority:
        print("priority:", raise_priority())
    files = build_perf_park(PerfParkConfig(park=park_config_from_spec(args.game)))
    zones, layout = files.zones(), files.layout()
    results: dict = {"game": args.game, "profile": args.profile, **p}
    t0 = time.perf_counter()

    results["reliability"] = reliability(args.game, zones, p["replays"], args.out)
    print("reliability:", results["reliability"], flush=True)

    random_agent = RandomAgent(RandomAgentConfig(num_actions=9))
    env = load_env(args.game, FRAME, p["steps"])
    try:
        baseline = play_episodes(random_agent, env, p["baseline_episodes"], game=args.game, seed=args.seed + 500)
    finally:
        env.close()
    threshold = LoadThreshold.from_baseline(frame_times(baseline))
    print(f"baseline: t_b = {threshold.base:.2f} ms over {threshold.baseline.n} steps", flush=True)

    explorer, _, explorer_s = train_agent("explorer", args.game, p, args.seed, args.out, None)
    load, shifted, load_s = train_agent("load", args.game, p, args.seed, args.out, threshold)
    t = shifted.value
    results["threshold"] = shifted.to_dict()
    results["train_seconds"] = {"explorer": explorer_s, "load": load_s}
    print(f"threshold: t = {t:.2f} ms (δ = {shifted.shift:+.2f}); trained in {explorer_s:.0f} s and {load_s:.0f} s", flush=True)

    agents = {"load agent": load, "explorer": explorer, "random": random_agent, "path follower (scripted)": "path"}
    records = collect(agents, args.game, p, args.seed + 1000, layout)
    rows = []
    for name in agents:
        rows.append(evaluate(name, records[name], t, layout, zones, args.out))
        print({k: v for k, v in rows[-1].items() if not k.startswith("_")}, flush=True)
    point_times = {r["agent"]: r["_point_times"] for r in rows}
    all_times = {r["agent"]: r["_all_times"] for r in rows}
    use = point_times if sum(len(v) > 0 for v in point_times.values()) >= 2 else all_times
    results["comparison_on"] = "frame times at low-FPS points" if use is point_times else "all frame times"
    results["comparisons"] = [c.__dict__ for c in compare_agents(use)]
    write_bytes_atomic(args.out / "violins.png", png(violin_plot(use, t, results["comparison_on"])))
    results["agents"] = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    results["wall_seconds"] = time.perf_counter() - t0
    write_text_atomic(args.out / "results.json", json.dumps(results, indent=1))

    print(f"\nt = {t:.2f} ms (t_b {threshold.base:.2f} + δ {shifted.shift:+.2f}); reliability ρ min "
          f"{results['reliability']['rho_min']:.2f}, median {results['reliability']['rho_median']:.2f}; {results['wall_seconds']:.0f} s\n")
    print("| agent | steps | steps in slow zones | low-FPS points (in a zone) | confidence median (min–max) | frame time median / p99 (ms) | steps over t |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        conf = (f"{r['confidence_median']:.0%} ({r['confidence_min']:.0%}–{r['confidence_max']:.0%})"
                if r["low_fps_points"] else "–")
        print(f"| {r['agent']} | {r['steps']} | {r['steps_in_zones']} | {r['low_fps_points']} ({r['true_points']}) | {conf} | "
              f"{r['frame_time_median']:.2f} / {r['frame_time_p99']:.2f} | {r['over_t_share']:.1%} |")
    print(f"\nMann–Whitney (Holm) and Cliff's delta on {results['comparison_on']}:")
    for c in results["comparisons"]:
        p_text = f"{c['p_holm']:.3g}" if not math.isnan(c["p_holm"]) else "–"
        print(f"- {c['a']} vs {c['b']}: p = {p_text}, d = {c['cliffs_delta']:+.2f} ({c['magnitude']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
