"""The memory estimates that refuse an option before anything is allocated, against what the
command then takes: each command run twice, at a small and a large setting, in a process of its
own; the difference of their peak resident memory (what the setting adds) beside the difference
of the two estimates, and their ratio (1: the estimate is right; above 1: it over-states).

    python scripts/bench_memory_estimates.py --demos DEMOS --encoder ENCODER.ckpt [--out /tmp/bench-memory]

- `run` (PPO explorer, inspector, one instance): `--rollout` 256 against 2048, episodes of two
  rollouts and a bit, so that an update runs (`exploration/explorer.py rollout_memory`);
- `train policy`: `--global-hidden` 1024 against 4096, one epoch (`imitation/policy.py
  training_memory`).

DEMOS and ENCODER: a few demo episodes (`playtester demos`) and an encoder trained on them
(`playtester train encoder`), e.g. from `playtester demo --profile smoke`. Fixed budgets, so the
figures do not depend on the machine's speed; the machine's load changes only how long it takes.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
from pathlib import Path

GAME = "doom:park:5:24x24"


def peak_kb(argv: list[str]) -> int:
    """The peak resident memory (KB) of `playtester ARGV` run in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-m", "playtester", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"playtester {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if after <= before:
        raise SystemExit("a later child must use more memory than the one before it (ru_maxrss is the largest "
                         "child's); run the small setting first")
    return after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--encoder", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-memory"))
    parser.add_argument("--only", choices=("run", "policy"), help="one of the two pairs")
    args = parser.parse_args()
    from playtester.capture.frames import FrameSpec
    from playtester.exploration.explorer import rollout_memory
    from playtester.imitation.policy import PolicyConfig, training_memory
    from playtester.perception.training import read_checkpoint

    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    rows = []

    def run_argv(rollout: int) -> list[str]:
        config = args.out / f"run{rollout}.yaml"  # `run explore` takes --rollout from a --config file
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"rollout: {rollout}\n")
        return ["run", "explore", "--game", GAME, "--explorer", "inspector", "--envs", "1", "--episodes", "1",
                "--steps", str(2 * rollout + 10), "--config", str(config), "--out", str(args.out / f"run{rollout}")]

    if args.only != "policy":
        small, large = (peak_kb(run_argv(r)) for r in (256, 2048))
        estimate = rollout_memory(2048, 1, FrameSpec.square(64)) - rollout_memory(256, 1, FrameSpec.square(64))
        rows.append(("run --rollout 256 → 2048 (inspector, 1 instance)", (large - small) * 1024, estimate))

    features = int(read_checkpoint(args.encoder, "encoder")[0].get("feature_dim", 512))

    def policy_argv(hidden: int) -> list[str]:
        return ["train", "policy", "--demos", str(args.demos), "--encoder", str(args.encoder), "--epochs", "1",
                "--global-hidden", str(hidden), "--out", str(args.out / f"policy{hidden}.ckpt")]

    if args.only != "run":
        small, large = (peak_kb(policy_argv(h)) for h in (1024, 4096))
        estimate = (training_memory(PolicyConfig(feature_dim=features, global_hidden=4096), 8, 32)
                    - training_memory(PolicyConfig(feature_dim=features, global_hidden=1024), 8, 32))
        rows.append(("train policy --global-hidden 1024 → 4096", (large - small) * 1024, estimate))

    print(f"{'setting':55} {'measured':>10} {'estimated':>10} {'ratio':>6}")
    for name, measured, estimated in rows:
        print(f"{name:55} {measured / 1e6:8.0f} MB {estimated / 1e6:8.0f} MB {estimated / measured:6.2f}")


if __name__ == "__main__":
    main()
