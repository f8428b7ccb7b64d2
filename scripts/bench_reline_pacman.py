"""RELINE's first study on its own game: injected "performance bugs" in Ms. Pac-Man.

    python scripts/bench_reline_pacman.py [--seeds 0 1 2 3 4] [--timesteps 200000] [--episodes 100] [--out runs/bench_pacman]

Four zones at the maze's side tunnels (`capture/screen_zones.py`: left and right screen edges,
upper and lower tunnel rows), each hit when a pixel of Ms. Pac-Man's colour is inside it.

- `reline`: PPO (our conv GRU in place of the paper's DQN) on the game reward plus +50 the first
  time each zone is hit in an episode;
- `rl`: the same PPO on the game reward only (the paper's rl-baseline);
- `random`: uniform random actions.

The game reward is the paper's: +1 for a step in which the score rose (a dot; the paper gives +1
a dot and 0 otherwise), so the sign of the score's change. Both PPO agents see rewards scaled by
`--reward-scale` (0.1: a dot 0.1, a zone 5) for steady value targets; the ordering of incentives
is the paper's. After training, every agent plays `--episodes` episodes (the paper: 1 000; the
table gives both the count and the count per 1 000), each from its own reset seed, actions
sampled from the policy, sticky actions on (ALE v5's default: the game is not deterministic to
an open-loop plan). Per seed, the number of episodes in which at least n zones were hit, n = 1..4;
Mann–Whitney (two-sided, Holm over the three pairs) with Cliff's delta on the per-seed counts of
episodes with all four.

Prints the markdown table docs/benchmarks/seeds.md holds and writes `results.json` under `--out`,
one row as each agent and seed finishes; run again with the same `--out` and settings, it reads
back the agent-seeds done and runs the rest (more `--seeds` added to a finished run, too).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

from playtester.cores import wait_quietly

wait_quietly()  # before torch loads: runs at once must not spin on each other's cores (docs/benchmarks/explorer.md)

import gymnasium as gym
import numpy as np
import torch

from playtester.capture.frames import FrameSpec
from playtester.capture.games import make_game
from playtester.capture.screen_zones import MS_PACMAN_ZONES, ScreenZone, ZoneHits
from playtester.capture.wrappers import ResizeFrame
from playtester.errors import UserError
from playtester.evolution.evaluation import EvalJob, evaluate, make_eval_envs
from playtester.evolution.state_coverage import StateCoverageConfig
from playtester.exploration.actor_critic import RandomAgent, RandomAgentConfig
from playtester.exploration.ppo import PPOConfig, train
from playtester.exploration.reward import ExplorationReward, ExplorationRewardConfig
from playtester.exploration.rnd import RNDConfig
from playtester.files import write_text_atomic
from playtester.load.stats import cliffs_delta, holm, magnitude

GAME = "gym:ALE/MsPacman-v5"
PAPER = {"reline": 911.6, "rl": 25.6, "random": 0.8}
"""Episodes of 1 000 with all four zones hit, as the issue quotes RELINE's Table 1; the copy of the
paper in shared/seeds gives 879 (median 907), 25 (23) and 1 (1)."""
AGENTS = ("reline", "rl", "random")


def pacman_env(frame_size: int | None, bonus: float, zones: tuple[ScreenZone, ...], max_steps: int) -> gym.Env:
    """Ms. Pac-Man with the paper's game reward, the zone oracle (and its bonus), frames at `frame_size`."""
    env = make_game(GAME, max_steps=max_steps)
    env = gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))
    env = ZoneHits(env, zones, bonus=bonus)
    return ResizeFrame(env, FrameSpec.square(frame_size)) if frame_size else env


class ZoneCounter:
    """PPO's `stop` callback that never stops: counts the zone hits of the training episodes."""

    def __init__(self):
        self.hits = 0

    def __call__(self, infos: dict) -> bool:
        new, mask = infos.get("zones_new"), infos.get("_zones_new")
        if new is not None:
            self.hits += sum(len(z) for z, m in zip(new, mask if mask is not None else [True] * len(new)) if m)
        return False


def train_agent(name: str, seed: int, args: argparse.Namespace, zones) -> tuple[torch.nn.Module, float, int]:
    bonus = 50.0 if name == "reline" else 0.0
    # With --novelty rnd, both PPO agents alike: classic RND (one predictor, its prediction error)
    # on the 64 px frames, its return in a second value head, the streams' advantages weighted
    # 2 : 1 as in Burda et al.'s Atari runs.
    rnd = args.novelty == "rnd"
    cfg = PPOConfig(env_id=GAME, run_dir=str(args.out / f"train-{name}-{seed}"), seed=seed, total_timesteps=args.timesteps,
                    num_envs=args.envs, num_steps=128, num_minibatches=2, update_epochs=4, learning_rate=2.5e-4, clip_coef=0.1,
                    vector_env="sync", encoder="conv", frames=FrameSpec.square(args.frame_size), hidden_dim=256, rnn_dim=128,
                    env_reward_coef=args.reward_scale, checkpoint_every=0, log_every=8, accelerator=args.accelerator,
                    ext_coef=2.0 if rnd else 1.0)
    hook = ExplorationReward(ExplorationRewardConfig(rnd=RNDConfig(num_predictors=1, reward="prediction_error"), use_preference=False),
                             num_envs=args.envs) if rnd else None
    start = time.perf_counter()
    counter = ZoneCounter()
    result = train(cfg, env_fn=functools.partial(pacman_env, args.frame_size, bonus, zones, args.max_steps), stop=counter,
                   reward_hook=hook)
    return result.agent, time.perf_counter() - start, counter.hits


class ZonesAtEnd:
    """Watcher: the zones an evaluation episode hit, read from its last step's info."""

    def __init__(self, out: dict[int, int], job: EvalJob):
        self.out, self.job = out, job

    def step(self, action, frame, reward, info, done) -> None:
        if done:
            self.out[self.job.episode] = len(info.get("zones_hit", ()))

    def close(self) -> None:
        pass


def play(agent: torch.nn.Module, seed: int, args: argparse.Namespace, zones) -> dict:
    """`--episodes` episodes of `agent`; how many zones each hit, and its length and score."""
    hits: dict[int, int] = {}
    jobs = [EvalJob(0, e, 1_000_000 + seed * 10_000 + e) for e in range(args.episodes)]
    envs = make_eval_envs(functools.partial(pacman_env, None, 0.0, zones, args.max_steps), args.envs)
    try:
        results = evaluate([agent], jobs, envs, FrameSpec.square(args.frame_size), StateCoverageConfig(),
                           watch=lambda job, frame, info: ZonesAtEnd(hits, job))
    finally:
        envs.close()
    counts = [hits[e] for e in range(args.episodes)]
    return {"at_least": [sum(c >= n for c in counts) for n in range(1, len(zones) + 1)],
            "length": float(np.mean([r.steps for r in results])), "dots": float(np.mean([r.reward for r in results]))}


def run_agent(name: str, seed: int, args: argparse.Namespace, zones) -> dict:
    """Train one agent on one seed (random is not trained) and play its evaluation episodes."""
    torch.set_num_threads(1)
    if name == "random":
        agent, seconds, hits = RandomAgent(RandomAgentConfig(num_actions=9)), 0.0, None
    else:
        agent, seconds, hits = train_agent(name, seed, args, zones)
    return {"agent": name, "seed": seed, "train_seconds": seconds, "training_zone_hits": hits, **play(agent.cpu(), seed, args, zones)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--timesteps", type=int, default=200_000, help="PPO training steps per agent and seed")
    ap.add_argument("--episodes", type=int, default=100, help="evaluation episodes per agent and seed (the paper: 1000)")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--frame-size", type=int, default=64)
    ap.add_argument("--max-steps", type=int, default=3000, help="step limit of an episode (4 frames a step)")
    ap.add_argument("--reward-scale", type=float, default=0.1)
    ap.add_argument("--zones", nargs=4, metavar="X0,Y0,X1,Y1", help="the four zones (pixels of the 160×210 frame); default: the tunnels")
    ap.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    ap.add_argument("--novelty", choices=("none", "rnd"), default="none",
                    help="an exploration bonus for both PPO agents: rnd, classic RND on the frames (the "
                         "paper's agents have none; a lever for zones found too rarely in training)")
    ap.add_argument("--accelerator", default="cpu", help="where PPO learns: cpu or cuda (the games stay on the CPU)")
    ap.add_argument("--jobs", type=int, default=1, help="agents and seeds trained at once, each in its own process")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_pacman"))
    args = ap.parse_args(argv)
    try:
        zones = (tuple(ScreenZone.parse(z, n.name) for z, n in zip(args.zones, MS_PACMAN_ZONES)) if args.zones else MS_PACMAN_ZONES)
        pacman_env(None, 0.0, zones, args.max_steps).close()  # the zones are checked against the screen before any training
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        kept = done_rows(args.out / "results.json", args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    done = {(r["agent"], r["seed"]) for r in kept}
    tasks = [(name, seed) for seed in args.seeds for name in args.agents if (name, seed) not in done]
    wanted = len(args.seeds) * len(args.agents)
    if len(tasks) < wanted:
        print(f"{wanted - len(tasks)} agent-seeds read back from {args.out / 'results.json'}; {len(tasks)} to run", flush=True)

    def keep(row: dict) -> None:
        """Every finished agent-seed is written at once: a long run stopped keeps what it did."""
        kept.append(row)
        print(json.dumps(row), flush=True)
        write_text_atomic(args.out / "results.json", json.dumps({"args": settings(args), "rows": kept}, indent=1))

    if args.jobs > 1 and len(tasks) > 1:
        from concurrent.futures import as_completed

        from playtester.workers import process_pool

        with process_pool(args.jobs) as pool:
            for future in as_completed([pool.submit(run_agent, name, seed, args, zones) for name, seed in tasks]):
                keep(future.result())
    else:
        for name, seed in tasks:
            keep(run_agent(name, seed, args, zones))
    report([r for r in kept if r["seed"] in args.seeds and r["agent"] in args.agents], args, time.perf_counter() - t0)
    return 0


SETTINGS = ("timesteps", "episodes", "envs", "frame_size", "max_steps", "reward_scale", "zones", "novelty")
"""What an agent-seed's figures depend on: rows of `results.json` made with other values are not
mixed with this run's."""


ADDED_SINCE = {"novelty": "none"}
"""Settings added after results files were written: what those files ran with."""


def settings(args: argparse.Namespace) -> dict[str, str]:
    return {k: str(getattr(args, k)) for k in SETTINGS}


def done_rows(path: Path, args: argparse.Namespace) -> list[dict]:
    """The rows an earlier run under `--out` finished, when it ran with the same settings."""
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
        earlier, rows = doc["args"], list(doc["rows"])
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a results file of this benchmark ({e}); give another --out") from None
    then = {k: str(earlier.get(k, ADDED_SINCE.get(k))) for k in SETTINGS}
    differ = [f"--{k.replace('_', '-')} {then[k]}" for k in SETTINGS if then[k] != settings(args)[k]]
    if differ:
        raise UserError(f"{path}: made with other settings ({', '.join(differ)}); give another --out or the same settings")
    return rows


def report(rows: list[dict], args: argparse.Namespace, seconds: float) -> None:
    rows = sorted(rows, key=lambda r: (r["seed"], r["agent"]))
    per_1000 = 1000 / args.episodes
    names = [a for a in args.agents if any(r["agent"] == a for r in rows)]
    print(f"\nMs. Pac-Man, {len(args.seeds)} seeds, PPO {args.timesteps} steps per agent, {args.episodes} evaluation episodes each; {seconds:.0f} s\n")
    print("| agent | episodes with ≥ 1 / 2 / 3 / 4 zones hit (of " f"{args.episodes}, mean ± sd over seeds) | all four, per 1 000 | the paper, per 1 000 | dots a episode | steps a episode | zone hits in training (per seed) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for a in names:
        rs = [r for r in rows if r["agent"] == a]
        cells = " / ".join(f"{statistics.mean(r['at_least'][n] for r in rs):.1f} ± {statistics.pstdev(r['at_least'][n] for r in rs):.1f}"
                           for n in range(4))
        four = statistics.mean(r["at_least"][3] for r in rs) * per_1000
        hits = ", ".join("–" if r["training_zone_hits"] is None else str(r["training_zone_hits"]) for r in rs)
        print(f"| {a} | {cells} | {four:.1f} | {PAPER[a]} | {statistics.mean(r['dots'] for r in rs):.0f} | "
              f"{statistics.mean(r['length'] for r in rs):.0f} | {hits} |")
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    if len(args.seeds) > 1 and pairs:
        from scipy import stats

        four = {a: [r["at_least"][3] for r in rows if r["agent"] == a] for a in names}
        ones = {a: [r["at_least"][0] for r in rows if r["agent"] == a] for a in names}
        for label, data in (("all four zones", four), ("at least one zone", ones)):
            raw = [stats.mannwhitneyu(data[a], data[b], alternative="two-sided").pvalue for a, b in pairs]
            for (a, b), p, p_holm in zip(pairs, raw, holm(raw)):
                d = cliffs_delta(data[a], data[b])
                print(f"- {label}: {a} vs {b}: Mann–Whitney p = {p:.3g} (Holm {p_holm:.3g}), Cliff's δ = {d:+.2f} ({magnitude(d)})")


if __name__ == "__main__":
    sys.exit(main())
