"""The whole tester loop's throughput and the explorer's decision latency, side by side with an older commit.

Each round runs `playtester run explore --explorer ppgta` (PPO explorer trained online, the tester
loop in every game worker: detector, tracking, OOI tests with the test policy) on the park for
every `--envs` value, once with the working tree and once with `--ref` (checked out with
`git worktree add` into a temporary folder, or a folder of its files where there is no git history,
e.g. on a GPU machine: `git archive REF | tar -x -C DIR`), alternating which goes first, so that the machine's
noise (another job on the same cores) falls on both alike. Each tree runs as a subprocess with a
site folder laid out as installed (`pyproject.toml`'s package-dir, by symlinks) first on
PYTHONPATH; the script prints the `playtester.__file__` each one imported.

    python scripts/bench_loop.py --models M [--ref 8bedfd8] [--envs 1 2 4] [--rounds 2] [--episodes-per-env 1] [--steps 300]

M holds path.ckpt, inspect.ckpt and detector.ckpt (`playtester demo` writes them). Per tree and
`--envs`:

- steps/s: game steps (rows of `trajectory.jsonl`, explorer and test steps alike) over the time
  from the first row to the last, so PPO updates, detector calls and OOI tests in between count
  and start-up and the report do not (the file is read every 20 ms, its new rows timed by the look
  that saw them);
- explore ms, test ms: an instance's time per explorer step and per test step (`step_costs`: each
  instance's time between its rows goes to the later row's kind, so a rollout's end, the update
  and RND's training count toward explorer steps), and "at mix" the steps/s those two give at one
  share of explorer steps for both trees (the mean over all their runs). A run's steps/s hangs on
  how many of its steps are tests, which differs from run to run (a test step costs less than an
  explorer step); the two costs and the steps/s at one mix do not;
- start-up: seconds from the command's start to the first row;
- peak memory: the most the run's processes held together (their PSS, looked at every 0.5 s);
- decision: one explorer decision on a batch of `--envs` new frames (the frozen encoder, the
  actor-critic's forward, sampling the action) under `torch.inference_mode`, median and p90 ms
  over `--decisions`, in a process of its own with torch's default threads (the machine's cores)
  or `--decision-threads`; the working tree's decision as its runs decide (on the CPU in int8: its
  frozen encoder int8 after 64 frames, its int8 copy, `exploration/acting.py`; `--acting fp32` to
  time fp32's), the ref's in fp32. `--ref-args` gives the ref's runs options of their own (`--ref
  HEAD --ref-args '--config a.yaml' --new-args '--config b.yaml'`: one option against another on
  the same code);
- same run: whether the two trees' runs played the same actions (a digest of every row's env,
  episode, step, action and mode): a pure speed-up keeps it `yes` at `--envs 1`; with several
  instances the run is not repeatable even on one tree (which instance claims an OOI first, in the
  shared `claims.jsonl`, depends on timing).

The medians over rounds are printed with the ratios working tree / ref.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ISOLATE = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
"""Drops the editable install's finder (it would import the working tree whatever PYTHONPATH says)."""

MAIN = ISOLATE + "import runpy; sys.argv = ['playtester', *sys.argv[1:]]; runpy.run_module('playtester', run_name='__main__', alter_sys=True)"

LATENCY = ISOLATE + r"""
import time, json
import numpy as np, torch
import playtester
from playtester.imitation.live import load_policy
from playtester.exploration.imitation_ac import ImitationActorCritic
path, batch, n, threads, device, acting = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
if threads:
    torch.set_num_threads(threads)
torch.manual_seed(0)
policy = load_policy(path).policy
agent = ImitationActorCritic.from_policy(policy, num_values=2).eval().to(device)
actor, encoding, warm = agent, agent, 20
if acting == "int8":  # as a run with acting int8: the frozen encoder int8 once calibrated, an int8 copy decides
    from playtester.exploration.acting import int8_actor, int8_frozen_encoder
    from playtester.perception.int8 import CALIBRATION_FRAMES
    encoding = ImitationActorCritic.from_policy(policy, num_values=2).eval()
    int8_frozen_encoder(encoding)
    actor, warm = int8_actor(encoding), 20 + CALIBRATION_FRAMES // batch + 1
shape = (policy.cfg.frames.height, policy.cfg.frames.width)
rng = np.random.default_rng(0)
state, done = agent.initial_state(batch), torch.zeros(1, batch, device=device)
times = []
for i in range(n + warm):
    obs = torch.from_numpy(rng.integers(0, 256, (batch, *shape, 3), dtype=np.uint8))
    t0 = time.perf_counter()
    obs = obs.to(device)
    with torch.inference_mode():
        out = actor(encoding.prepare(obs).unsqueeze(0), state, done)
        state = out.state
        action = torch.distributions.Categorical(logits=out.logits[0]).sample()
    action.tolist()
    if i >= warm:
        times.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"file": playtester.__file__, "threads": torch.get_num_threads(), "device": device, "acting": acting, "median": float(np.median(times)),
                  "p90": float(np.percentile(times, 90))}))
"""


def site_folder(tree: Path, target: Path) -> Path:
    """`target` laid out as the package is installed from `tree` (symlinks to its files)."""
    dirs = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    sources = {(tree / s).resolve() for s in dirs.values()}
    for package, source in dirs.items():
        folder = target.joinpath(*package.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        for entry in (tree / source).iterdir():
            if entry.name == "__pycache__" or entry.resolve() in sources or (folder / entry.name).exists():
                continue
            (folder / entry.name).symlink_to(entry.resolve())
    return target


def python_path(site: Path) -> str:
    """The tree's site folder first, then what PYTHONPATH held already (packages installed with `--target`)."""
    return os.pathsep.join([str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def run_words(site: Path) -> list[str]:
    """`run explore` since the run was split by purpose; `run` before."""
    commands = site / "playtester" / "commands" / "run.py"
    return ["run", "explore"] if commands.exists() and '"explore"' in commands.read_text() else ["run"]


def run_loop(site: Path, models: Path, envs: int, episodes: int, steps: int, out: Path, extra: list[str] = (),
             variables: dict[str, str] | None = None) -> dict:
    """One `playtester run explore`; its steps/s, start-up and the digest of its actions."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, **(variables or {}), "PYTHONPATH": python_path(site)}
    cmd = [sys.executable, "-c", MAIN, *run_words(site), "--game", "doom:park:1", "--explorer", "ppgta",
           "--preference", str(models / "path.ckpt"), "--tester", str(models / "inspect.ckpt"),
           "--detector", str(models / "detector.ckpt"), "--episodes", str(envs * episodes), "--steps", str(steps),
           "--envs", str(envs), "--out", str(out), *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=site, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = TrajectoryTail(out / "trajectory.jsonl")
    peak, looked = 0.0, 0.0
    while proc.poll() is None:
        now = time.perf_counter()
        tail.poll(now)
        if now - looked > MEMORY_POLL_S:
            peak, looked = max(peak, tree_memory_mb(proc.pid)), now
        time.sleep(POLL_S)
    log = proc.stdout.read()
    if proc.returncode != 0 or not tail.rows:
        sys.exit(f"bench_loop: the run failed ({' '.join(cmd)}):\n{log[-3000:]}")
    first = tail.rows[0][0]
    first_rows = sum(1 for seen, _ in tail.rows if seen == first)  # those already there at the first look: not timed
    last = tail.rows[-1][0]
    rows = [row for _, row in tail.rows]
    key = sorted((r["env"], r["episode"], r["t"], r["action"], r["mode"]) for r in rows)
    tests = [json.loads(line) for line in (out / "tests.jsonl").read_text().splitlines()] if (out / "tests.jsonl").exists() else []
    return {"sps": (len(rows) - first_rows) / max(last - first, 1e-9), "startup": first - start, "steps": len(rows), "peak_mb": peak,
            "tests": len(tests), "passed": sum(bool(t.get("success")) for t in tests),
            "jsd": statistics.mean(t["jsd"] for t in tests) if tests else float("nan"),
            **step_costs(tail.rows),
            "digest": hashlib.blake2b(repr(key).encode(), digest_size=6).hexdigest()}


POLL_S = 0.02
"""How often a run's trajectory is looked at: a row's time is the look that first saw it."""
MEMORY_POLL_S = 0.5
"""How often the run's memory is looked at (`tree_memory_mb`)."""


def tree_memory_mb(pid: int) -> float:
    """The memory of process `pid` and every process under it, in MB: the sum of their PSS (each
    page shared by n processes counts 1/n to each, so forked workers' shared pages count once)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in (Path("/proc") / str(p) / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


class TrajectoryTail:
    """The rows of a growing `trajectory.jsonl`, each with the time it was first seen (the run
    flushes a row a step, so a look reads the steps played since the last one)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""
        self.rows: list[tuple[float, dict]] = []

    def poll(self, now: float) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        self.rows += [(now, json.loads(line)) for line in lines if line.strip()]


def step_costs(timed_rows: list[tuple[float, dict]]) -> dict[str, float]:
    """Milliseconds of an instance's time per explorer step and per test step.

    Each instance's time between one of its rows and the next goes to the later row's kind
    (`mode`: explore or test), so waiting at a rollout's end and the update that follows count
    toward the explorer step after them, and a test's steps toward tests. Rows seen at one look
    share its time (the first takes the gap, the others none); summed over a run the split errs
    by at most a look's period at each change of kind. A run's speed hangs on how many of its steps are
    tests (they cost less than explorer steps), which varies from run to run; these two costs do
    not, and `mixed_sps` puts two trees at one mix."""
    last: dict[int, float] = {}
    spent = {"explore": 0.0, "test": 0.0}
    count = {"explore": 0, "test": 0}
    for seen, row in timed_rows:
        env, kind = row["env"], "test" if row["mode"] == "test" else "explore"
        if env in last:
            spent[kind] += seen - last[env]
            count[kind] += 1
        last[env] = seen
    return {f"{kind}_ms": 1000 * spent[kind] / count[kind] if count[kind] else float("nan") for kind in spent} | \
        {"explore_share": count["explore"] / max(1, sum(count.values()))}


def mixed_sps(costs: dict[str, float], envs: int, explore_share: float) -> float:
    """Game steps a second of `envs` instances whose steps cost `costs` (`step_costs`), at a mix
    of `explore_share` explorer steps (the rest tests)."""
    per_step = explore_share * costs["explore_ms"] + (1 - explore_share) * costs["test_ms"]
    return envs * 1000 / per_step


def latency(site: Path, models: Path, batch: int, n: int, threads: int, device: str = "cpu", acting: str = "fp32") -> dict:
    done = subprocess.run([sys.executable, "-c", LATENCY, str(models / "path.ckpt"), str(batch), str(n), str(threads), device, acting],
                          env={**os.environ, "PYTHONPATH": python_path(site)}, cwd=site, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench_loop: the latency probe failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def imported(site: Path) -> str:
    return subprocess.run([sys.executable, "-c", ISOLATE + "import playtester; print(playtester.__file__)"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": python_path(site)}, cwd=site, check=True).stdout.strip()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=Path, required=True, help="folder with path.ckpt, inspect.ckpt, detector.ckpt")
    p.add_argument("--ref", default=None, help="an older commit to run side by side (git worktree), or a folder holding "
                   "its files where there is no git history (`git archive REF | tar -x -C DIR`; the working tree itself "
                   "to compare options, with --new-args)")
    p.add_argument("--envs", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--episodes-per-env", type=int, default=1)
    p.add_argument("--steps", type=int, default=300, help="game steps an episode")
    p.add_argument("--decisions", type=int, default=200)
    p.add_argument("--decisions-only", action="store_true", help="time the decision alone (batches of --envs frames), no runs")
    p.add_argument("--new-args", default="", help="more options for the working tree's run only, e.g. '--config knobs.yaml'")
    p.add_argument("--ref-args", default="", help="more options for the --ref tree's run only, e.g. '--config knobs.yaml' "
                   "(with --ref HEAD: the same code with other knobs; its decision is timed in fp32)")
    p.add_argument("--new-env", nargs="*", default=[], metavar="NAME=VALUE",
                   help="environment variables for the working tree's run only, e.g. OMP_NUM_THREADS=1")
    p.add_argument("--decision-threads", type=int, default=0,
                   help="torch threads for the decision latency (0: torch's default, the machine's cores)")
    p.add_argument("--decision-device", default="cpu", choices=("cpu", "cuda"),
                   help="the working tree's decision latency on this device (the ref's on the CPU); pair with --new-args '--device cuda'")
    p.add_argument("--acting", default=None, choices=("fp32", "int8"),
                   help="the working tree's decision latency in fp32 or int8 (default: as its runs decide: int8 on the CPU, "
                        "fp32 on cuda; the ref's is timed in fp32)")
    args = p.parse_args()
    args.models = args.models.resolve()
    for name in ("path.ckpt", "inspect.ckpt", "detector.ckpt"):
        if not (args.models / name).is_file():
            sys.exit(f"bench_loop: --models {args.models} has no {name}; run `playtester demo` and give its models folder")
    if args.acting is None:
        args.acting = "int8" if args.decision_device == "cpu" else "fp32"
    if args.acting == "int8" and args.decision_device != "cpu":
        sys.exit("bench_loop: --acting int8 quantises for the CPU; time it with --decision-device cpu")

    scratch = Path(tempfile.mkdtemp(prefix="bench_loop-"))
    trees = {"new": ROOT}
    worktree = None
    try:
        if args.ref and Path(args.ref).is_dir():
            trees["ref"] = Path(args.ref).resolve()
        elif args.ref:
            worktree = scratch / "ref"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.ref], check=True,
                           capture_output=True)
            trees["ref"] = worktree
        sites = {name: site_folder(tree, scratch / f"site-{name}") for name, tree in trees.items()}
        for name, site in sites.items():
            print(f"{name}: {trees[name]} imports {imported(site)}", flush=True)
        new_args = shlex.split(args.new_args)
        new = {"device": args.decision_device, "acting": args.acting}
        old = {"device": "cpu", "acting": "fp32"}
        results: dict[tuple[str, int], list[dict]] = {}
        for r in range(args.rounds):
            order = list(sites) if r % 2 == 0 else list(reversed(list(sites)))
            for envs in args.envs:
                for name in order:
                    if args.decisions_only:
                        res = latency(sites[name], args.models, envs, args.decisions, args.decision_threads,
                                      **(new if name == "new" else old))
                        no_run = dict.fromkeys(("sps", "startup", "explore_ms", "test_ms", "explore_share", "peak_mb"), float("nan"))
                        results.setdefault((name, envs), []).append({**res, **no_run, "digest": ""})
                        print(f"round {r + 1} {name} batch {envs}: decision {res['median']:.1f} ms median / {res['p90']:.1f} p90 "
                              f"({res['threads']} threads, {res.get('acting', 'fp32')})", flush=True)
                        continue
                    res = run_loop(sites[name], args.models, envs, args.episodes_per_env, args.steps, scratch / f"run-{name}",
                                   new_args if name == "new" else shlex.split(args.ref_args),
                                   dict(v.split("=", 1) for v in args.new_env) if name == "new" else {})
                    res.update(latency(sites[name], args.models, envs, args.decisions, args.decision_threads,
                                       **(new if name == "new" else old)))
                    results.setdefault((name, envs), []).append(res)
                    print(f"round {r + 1} {name} envs {envs}: {res['sps']:.1f} steps/s ({res['steps']} steps, "
                          f"{res['tests']} tests, {res['passed']} passed, mean JSD {res['jsd']:.3f}; an instance's "
                          f"{res['explore_ms']:.1f} ms an explorer step, {res['test_ms']:.1f} ms a test step, "
                          f"{100 * res['explore_share']:.0f} % explorer steps), start-up {res['startup']:.1f} s, peak memory "
                          f"{res['peak_mb']:.0f} MB, decision {res['median']:.1f} ms "
                          f"median / {res['p90']:.1f} p90 ({res['threads']} threads), actions {res['digest']}", flush=True)
        print("\nmedians over rounds")
        print(f"{'tree':5} {'envs':>4} {'steps/s':>8} {'explore ms':>10} {'test ms':>8} {'at mix':>7} {'start-up s':>10} "
              f"{'decision ms':>11} {'p90 ms':>7} {'peak MB':>7} same run")
        measures = ("sps", "startup", "median", "p90", "explore_ms", "test_ms", "peak_mb")
        med = {k: {m: statistics.median(x[m] for x in v) for m in measures} for k, v in results.items()}
        mix = {}  # each --envs value's share of explorer steps over every run of both trees: one mix for both
        for envs in args.envs:
            runs = [x for (_, e), v in results.items() if e == envs for x in v]
            mix[envs] = statistics.mean(x["explore_share"] for x in runs)
        for (name, envs), m in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            same = ""
            if name == "new" and ("ref", envs) in results and not args.decisions_only:
                same = "yes" if {x["digest"] for x in results[(name, envs)]} == {x["digest"] for x in results[("ref", envs)]} else "no"
            m["mixed"] = mixed_sps(m, envs, mix[envs])
            print(f"{name:5} {envs:4d} {m['sps']:8.1f} {m['explore_ms']:10.1f} {m['test_ms']:8.1f} "
                  f"{m['mixed']:7.1f} {m['startup']:10.1f} {m['median']:11.1f} {m['p90']:7.1f} {m['peak_mb']:7.0f} {same}")
        if not args.decisions_only:
            print("(explore ms, test ms: an instance's time per explorer step and per test step, medians over rounds; at mix: "
                  "the steps/s those give at one mix for both trees, " + ", ".join(f"{100 * mix[e]:.0f} % explorer steps at envs {e}" for e in args.envs) + ")")
        if "ref" in sites:
            print("\nratios new / ref")
            for envs in args.envs:
                n, o = med[("new", envs)], med[("ref", envs)]
                steps = "" if args.decisions_only else (f", explorer step ×{n['explore_ms'] / o['explore_ms']:.2f}, test step "
                                                        f"×{n['test_ms'] / o['test_ms']:.2f}, steps/s at one mix ×{n['mixed'] / o['mixed']:.2f}")
                print(f"envs {envs}: steps/s ×{n['sps'] / o['sps']:.2f}{steps}, start-up ×{n['startup'] / o['startup']:.2f}, "
                      f"decision median ×{n['median'] / o['median']:.2f}")
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
