"""Where a tester run's games wait at each rollout's end (issue 39): a `playtester run explore`
with the defaults, in this process, with the trainer's rollout-end steps timed: the wait for the
update that ran beside the rollout (`Updates.finish`), the int8 acting copy (`acting_copy`), the
reward hand-off, and the collection itself.

    python scripts/bench_rollout_waits.py --models DEMO/models --out /tmp/waits            # the defaults
    python scripts/bench_rollout_waits.py --models DEMO/models --out /tmp/waits6 -- --threads 6

Arguments after `--` go to `run explore`. Prints one line a timed step: calls, total, mean, max.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from pathlib import Path


def timed(spent: dict[str, list[float]], name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name].append(time.perf_counter() - start)
    return wrapper


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=Path("playtester-demo/models"), help="folder with path.ckpt, inspect.ckpt, detector.ckpt")
    parser.add_argument("--game", default="doom:park:1")
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400, help="steps of each instance's one episode")
    parser.add_argument("--out", type=Path, required=True, help="the run's folder (replaced)")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)

    import playtester.exploration.ppo as ppo
    from playtester.cli import main as playtester

    spent: dict[str, list[float]] = collections.defaultdict(list)
    ppo.Updates.finish = timed(spent, "waiting for the update", ppo.Updates.finish)
    ppo.acting_copy = timed(spent, "int8 acting copy", ppo.acting_copy)
    ppo.rollout_rewards = timed(spent, "reward hand-off", ppo.rollout_rewards)
    ppo.collect_rollout_free = timed(spent, "collecting", ppo.collect_rollout_free)
    ppo.collect_rollout = timed(spent, "collecting (lockstep)", ppo.collect_rollout)
    m = args.models
    started = time.perf_counter()
    code = playtester(["run", "explore", "--game", args.game, "--explorer", "ppgta", "--preference", str(m / "path.ckpt"),
                       "--tester", str(m / "inspect.ckpt"), "--detector", str(m / "detector.ckpt"), "--episodes", str(args.envs),
                       "--steps", str(args.steps), "--envs", str(args.envs), "--out", str(args.out), "--overwrite", *extra])
    print(f"exit {code}, {time.perf_counter() - started:.1f} s in all")
    for name, times in spent.items():
        print(f"{name:24s} {len(times):3d} calls  total {sum(times):6.2f} s  mean {1000 * sum(times) / len(times):7.1f} ms  "
              f"max {1000 * max(times):7.1f} ms")
    return code


if __name__ == "__main__":
    sys.exit(main())
