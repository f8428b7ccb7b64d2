"""Fuzz the whole command line longer than CI does: tests/test_cli_fuzz.py with more drawn
invocations and other draws (a seed of its own), its failures listed at the end.

    python scripts/fuzz_cli.py --examples 500            # about 500 invocations, seed 1
    python scripts/fuzz_cli.py --examples 500 --seed 7   # 500 others

`--examples` is the total: each option of each command gets its share (at least one). The
good inputs it needs (tiny demos, encoder, policy, detector, a run) are made first, as the test
makes them. Exit status 0 when no invocation went wrong.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="drawn invocations in all (default 500)")
    parser.add_argument("--seed", type=int, default=1, help="Hypothesis seed of the draws (CI's are derandomized)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from cli_fuzz import commands

    from playtester.cli import app

    options = sum(len(c.params) for c in commands(app))
    per_option = max(1, math.ceil(args.examples / options))
    env = {**os.environ, "FUZZ_EXAMPLES": str(per_option), "FUZZ_SEED": str(args.seed)}
    print(f"{options} options and arguments × {per_option} drawn invocations each, seed {args.seed}", flush=True)
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests" / "test_cli_fuzz.py"), "-q", "-s", "-p",
                           "no:cacheprovider", "--timeout", "0"], cwd=ROOT, env=env, capture_output=True, text=True)
    report = [line for line in done.stdout.splitlines() if line.startswith(("fuzzed ", "slowest: ", "failed: "))]
    print("\n".join(report) or done.stdout[-3000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
