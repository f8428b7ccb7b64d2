"""Steps per second of game instances as Ray actors (`--cluster ray`) against local subprocesses
(`AsyncVectorEnv`), at equal instance count, side by side (issue 22).

Both vector envs hold the same instances, built by the same factory, reset in the same step
they end, and are stepped with the same random actions. Two kinds of instance:

    idle  an env whose step does nothing but hand back a blank 64×64 frame: what carrying a
          step costs each of them, with no game to hide it
    game  the game as the explorer's vector env builds it without a run (`make_env`: the game
          resized to 64×64): the raw env loop
    run   a run's game instance (`make_env` with the run's `wrap` and the mask: the tester loop
          writing the run's logs, the OD mask, 64×64); on Ray its records come back to this process, which writes them
    ppo   a whole run's playing and learning: `explore_with_ppo` with the inspector explorer
          (no test policy), one episode of `--ppo-steps` steps per instance, set-up included
          (games, workers or actors, the network); steps/s = trajectory lines / wall time, and
          `ppo playing` from the trajectory's first row to its last (set-up and report left out); with
          `--models M`, the whole tester run instead (ppgta with M's path policy, M's detector
          finding the OOIs, M's inspect policy testing them), every instance's actor loading them

Rounds alternate between the two so that the machine's noise falls on both alike; the median
of the rounds is reported, with the ratio Ray / local (1.0: no overhead). With `--nodes K` the Ray
side is a cluster of K nodes on this machine (Ray's multi-node harness, `ray.cluster_utils.Cluster`:
a head and K − 1 worker nodes, each a raylet of its own), the instances spread over them.

    python scripts/bench_cluster.py [--game doom:park] [--envs 2] [--steps 500] [--rounds 5] [--kinds idle game run ppo] [--nodes 3] [--models M]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from bench_loop import POLL_S, TrajectoryTail


class Idle(gym.Env):
    """Nothing to play: a blank frame a step, episodes of 100 steps."""

    observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    action_space = gym.spaces.Discrete(9)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros((64, 64, 3), np.uint8), {}

    def step(self, action):
        self.t += 1
        return np.zeros((64, 64, 3), np.uint8), 0.0, False, self.t >= 100, {}


def factories(kind: str, game: str, envs: int, run_dir: Path, on_ray: bool):
    """The instances' factories (and for Ray, the run's link)."""
    from playtester.capture.frames import FrameSpec
    from playtester.capture.envs import make_env

    if kind == "idle":
        return [Idle] * envs, None
    if kind == "game":
        return [functools.partial(make_env, game, FrameSpec.square(64))] * envs, None
    from playtester.tester.cluster import RunLink, tester_on_worker
    from playtester.tester.spec import RunSpec
    from playtester.tester.runner import _wrap

    run_dir.mkdir(parents=True)
    spec = RunSpec(game=game, tester=None, run_dir=str(run_dir), explorer="inspector", episodes=10**6, steps=10**6,
                   num_envs=envs)
    wrap = tester_on_worker if on_ray else functools.partial(_wrap, spec)
    return [functools.partial(make_env, game, FrameSpec.square(64), mask=True, game_options=spec.game_options(), wrap=wrap, index=i)
            for i in range(envs)], \
        RunLink(spec) if on_ray else None


def make(contender: str, kind: str, game: str, envs: int, run_dir: Path) -> gym.vector.VectorEnv:
    from playtester.exploration.ray_env import RayVectorEnv
    from playtester.exploration.vector_env import in_worker

    fns, link = factories(kind, game, envs, run_dir, contender == "ray")
    if contender == "ray":
        return RayVectorEnv(fns, link=link)
    return gym.vector.AsyncVectorEnv([functools.partial(in_worker, fn) for fn in fns],
                                     autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def ppo_rate(contender: str, game: str, envs: int, steps: int, run_dir: Path, models: Path | None = None) -> tuple[float, float]:
    """Game steps per second of a whole PPO run (see the module doc): set-up included, and while
    it plays (from the first row of its trajectory to the last, as `bench_loop.py` times a run)."""
    from playtester.tester.assemble import assembled
    from playtester.tester.spec import RunSpec
    from playtester.tester.runner import explore_with_ppo

    run_dir.mkdir(parents=True)
    tester = {} if models is None else dict(explorer="ppgta", tester=str(models / "inspect.ckpt"),
                                            preference=str(models / "path.ckpt"), detector=str(models / "detector.ckpt"))
    spec = RunSpec(**{"game": game, "tester": None, "run_dir": str(run_dir), "explorer": "inspector", "episodes": envs,
                      "steps": steps, "num_envs": envs, "rollout": 64, "seed": 0, **tester})
    tail, done = TrajectoryTail(run_dir / "trajectory.jsonl"), threading.Event()

    def watch() -> None:
        while not done.is_set():
            tail.poll(time.perf_counter())
            time.sleep(POLL_S)

    watcher = threading.Thread(target=watch, daemon=True)
    t0 = time.perf_counter()
    watcher.start()
    try:
        explore_with_ppo(assembled(spec, contender == "ray"), cluster=contender == "ray")
    finally:
        done.set()
        watcher.join()
    whole = sum(1 for _ in open(run_dir / "trajectory.jsonl")) / (time.perf_counter() - t0)
    first, last = tail.rows[0][0], tail.rows[-1][0]
    timed = sum(1 for seen, _ in tail.rows if seen > first)  # rows already there at the first look: not timed
    return whole, timed / max(last - first, 1e-9)


def steps_per_second(envs: gym.vector.VectorEnv, steps: int, rng: np.random.Generator) -> float:
    """Game steps per second (all instances together) over `steps` vector steps."""
    n = envs.single_action_space.n
    t0 = time.perf_counter()
    for _ in range(steps):
        envs.step(rng.integers(n, size=envs.num_envs))
    return steps * envs.num_envs / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="doom:park")
    parser.add_argument("--envs", type=int, default=2, help="game instances of each vector env")
    parser.add_argument("--steps", type=int, default=500, help="vector steps of one timed round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each contender")
    parser.add_argument("--kinds", nargs="+", default=["idle", "game", "run", "ppo"], choices=["idle", "game", "run", "ppo"])
    parser.add_argument("--ppo-steps", type=int, default=1000, help="ppo: steps of each instance's one episode")
    parser.add_argument("--ppo-rounds", type=int, default=3, help="ppo: runs of each contender")
    parser.add_argument("--nodes", type=int, default=1, help="Ray nodes on this machine (a head and NODES - 1 workers)")
    parser.add_argument("--models", type=Path, default=None,
                        help="ppo: the whole tester run with this folder's path.ckpt, inspect.ckpt and detector.ckpt")
    args = parser.parse_args()

    import ray

    from playtester.capture.games import make_game

    make_game(args.game).close()  # the park is generated once, before anything is timed
    cluster = None
    if args.nodes > 1:
        from ray.cluster_utils import Cluster

        per = -(-args.envs // args.nodes) + 1  # CPUs a node: room for its share and one replacement
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": per, "include_dashboard": False})
        for _ in range(args.nodes - 1):
            cluster.add_node(num_cpus=per)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="error")
    else:
        ray.init(num_cpus=args.envs, include_dashboard=False, log_to_driver=False, logging_level="error")
    before = os.getloadavg()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for kind in args.kinds:
                if kind == "ppo":
                    rates = {"local": [], "ray": []}
                    for r in range(args.ppo_rounds):  # alternating, each round's first the other's second before
                        for name in (("local", "ray") if r % 2 == 0 else ("ray", "local")):
                            rates[name].append(ppo_rate(name, args.game, args.envs, args.ppo_steps, Path(tmp) / f"ppo-{name}-{r}",
                                                        args.models))
                    for i, what in ((0, kind), (1, f"{kind} playing")):
                        local, on_ray = [x[i] for x in rates["local"]], [x[i] for x in rates["ray"]]
                        rows.append((what, statistics.median(local), statistics.median(on_ray)))
                        print(f"{what}: local {[round(x) for x in local]}, ray {[round(x) for x in on_ray]}", flush=True)
                    continue
                contenders = {}
                for name in ("local", "ray"):
                    contenders[name] = make(name, kind, args.game, args.envs, Path(tmp) / f"{kind}-{name}")
                    contenders[name].reset(seed=0)
                    steps_per_second(contenders[name], 50, np.random.default_rng(0))  # warm-up
                rates: dict[str, list[float]] = {name: [] for name in contenders}
                for r in range(args.rounds):
                    for name, envs in contenders.items():
                        rates[name].append(steps_per_second(envs, args.steps, np.random.default_rng(r)))
                for envs in contenders.values():
                    envs.close()
                local, on_ray = statistics.median(rates["local"]), statistics.median(rates["ray"])
                rows.append((kind, local, on_ray))
                print(f"{kind}: local {[round(x) for x in rates['local']]}, ray {[round(x) for x in rates['ray']]}", flush=True)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    after = os.getloadavg()
    print(f"\n{args.game}, {args.envs} instances, {args.rounds} rounds × {args.steps} vector steps, median steps/s "
          f"(all instances); Ray on {args.nodes} node(s); load average {before[0]:.2f} before, {after[0]:.2f} after "
          f"({os.cpu_count()} CPUs)")
    print(f"{'instance':<10}{'local (AsyncVectorEnv)':>24}{'Ray actors':>12}{'ray / local':>13}")
    for kind, local, on_ray in rows:
        print(f"{kind:<12}{local:>22.0f}{on_ray:>12.0f}{on_ray / local:>13.2f}")


if __name__ == "__main__":
    main()
