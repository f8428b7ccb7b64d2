"""Imitation on the park: the inspect and path policies with and without the DINO teacher.

Makes scripted demos, trains the encoder once, trains each policy twice (teacher on and off, the
same seed, split and budget), then plays every policy live from held-out starts and reports the
behaviour's own measure and the JSD success rate, side by side.

    python scripts/bench_imitation.py --workdir /tmp/bench-imitation [--game doom:park:1]
        [--inspect-episodes 40] [--path-episodes 20] [--encoder-minutes 10] [--policy-minutes 8]
        [--eval-episodes 10] [--behaviors inspect path] [--teacher yes no]

`--dagger-rounds R` then runs R DAgger rounds on each policy: the newest policy drives from its
training starts while the scripted expert labels (`playtester demos --dagger`), and the policy is
trained again on the demos plus every round's episodes, from its last weights (`train policy
--init`). Each round is evaluated on the same held-out starts, so the table shows what the
recoveries add:

    python scripts/bench_imitation.py --workdir /tmp/bench-imitation --dagger-rounds 2
        [--dagger-episodes 20] [--dagger-minutes 5] [--beta 0 0 0.5] [--eval-games doom:park:1 doom:park:2]
        [--dagger-games doom:park:1 doom:park:3]   # with --demo-games: drive on those parks too

`--demo-games` adds demos made on more parks (`--other-park-demos` of each behaviour on each, under
`demos/BEHAVIOUR/GAME/`); the encoder and the policies train on them all. Demos from several parks
are what made the encoder keep where the horizon is and the policies hold up on a park they never
saw (docs/benchmarks/imitation.md):

    python scripts/bench_imitation.py --workdir /tmp/bench-multi --demo-games doom:park:3 doom:park:4 \
        doom:park:5 doom:park:6 doom:park:7 --eval-games doom:park:1 doom:park:2

`--latency` instead times the live interface the tester loop calls, `LivePolicy.step(frame,
box)`, on 240×320 frames at the paper's shape (AlexNet trunk at 128², K = 4 local bi-GRU 256,
global GRU 1024, MLP 512 → 256; untrained weights, the cost does not depend on them), one torch
thread, with the encoder's and the recurrent part's shares (target: 10 ms a step):

    python scripts/bench_imitation.py --latency [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from playtester.cli import main as cli


def run(*args: str) -> None:
    code = cli([str(a) for a in args])
    if code != 0:
        raise SystemExit(f"playtester {' '.join(map(str, args))} exited with {code}")


def latency(steps: int) -> None:
    """Median (and fastest tenth) milliseconds of a live step, and of its parts; the encoder in
    the default channels-last layout against the plain NCHW one, step by step in turn."""
    import numpy as np
    import torch

    from playtester.imitation.live import LivePolicy
    from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder
    from playtester.perception.encoder import EncoderConfig

    torch.set_num_threads(1)
    encoder_cfg = EncoderConfig(action_names=[str(i) for i in range(9)], image_size=128, pretrained="none")
    cfg = PolicyConfig(feature_dim=encoder_cfg.feature_dim, encoder=vars(encoder_cfg))
    lives = {}
    for layout in ("NCHW", "channels-last"):
        torch.manual_seed(0)
        lives[layout] = LivePolicy(ImitationPolicy(cfg, build_encoder(cfg.encoder)), channels_last=layout == "channels-last")
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (16, 240, 320, 3), dtype=np.uint8)
    box = [120.0, 80.0, 180.0, 200.0]
    for live in lives.values():
        for i in range(20):  # warm-up
            live.step(frames[i % 16], box)
    times = {layout: ([], [], []) for layout in lives}
    for i in range(steps):
        for layout, live in lives.items():
            total, encode, recur = times[layout]
            t0 = time.perf_counter()
            feat = live.features(frames[i % 16], box)
            t1 = time.perf_counter()
            live.step_features(feat)
            t2 = time.perf_counter()
            encode.append(t1 - t0)
            recur.append(t2 - t1)
            total.append(t2 - t0)
    ms = lambda v, q: 1000 * float(np.quantile(v, q))  # noqa: E731
    for layout, (total, encode, recur) in times.items():
        print(f"LivePolicy.step, encoder {layout}, {steps} steps, one thread: total median {ms(total, 0.5):.1f} ms "
              f"(p10 {ms(total, 0.1):.1f}), encoder (mask, resize, AlexNet trunk) {ms(encode, 0.5):.1f} ms, "
              f"recurrent part and head {ms(recur, 0.5):.1f} ms; target 10 ms")
    ratio = ms(times["channels-last"][0], 0.5) / ms(times["NCHW"][0], 0.5)
    same = np.allclose(lives["NCHW"].features(frames[0], box).numpy(), lives["channels-last"].features(frames[0], box).numpy(), atol=1e-4)
    print(f"channels-last / NCHW, median step: {ratio:.2f}; same features: {same}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency", action="store_true", help="time the live step instead (no training)")
    p.add_argument("--steps", type=int, default=300, help="--latency: steps to time")
    p.add_argument("--workdir", type=Path)
    p.add_argument("--game", default="doom:park:1")
    p.add_argument("--inspect-episodes", type=int, default=40)
    p.add_argument("--path-episodes", type=int, default=20)
    p.add_argument("--encoder-minutes", type=float, default=10)
    p.add_argument("--encoder-epochs", type=int, default=10)
    p.add_argument("--policy-minutes", type=float, default=8)
    p.add_argument("--policy-epochs", type=int, default=40)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--global-hidden", type=int, default=1024)
    p.add_argument("--behaviors", nargs="+", choices=("inspect", "path"), default=["inspect", "path"])
    p.add_argument("--teacher", nargs="+", choices=("yes", "no"), default=["yes", "no"], help="with the DINO teacher, without, or both")
    p.add_argument("--dagger-rounds", type=int, default=0, help="DAgger rounds after the first training (0: none)")
    p.add_argument("--dagger-episodes", type=int, default=20, help="episodes the policy drives each round, on each --dagger-games park")
    p.add_argument("--dagger-games", nargs="+", default=[],
                   help="parks the DAgger episodes are driven on (default: --game; any park the demos came from)")
    p.add_argument("--dagger-minutes", type=float, default=5, help="training budget of each round")
    p.add_argument("--beta", type=float, nargs="+", default=[0.0],
                   help="share of steps the expert drives in DAgger episodes, one a round (the last one for later rounds)")
    p.add_argument("--greedy", action="store_true", help="also evaluate each policy taking its most likely action")
    p.add_argument("--eval-games", nargs="+", help="parks to evaluate on (default: --game); after the first, parks "
                   "the demos never saw, where every start and object is held out")
    p.add_argument("--other-park-episodes", type=int, default=20, help="tests on each --eval-games park after the first")
    p.add_argument("--demo-games", nargs="+", default=[], help="more parks to make demos on, besides --game")
    p.add_argument("--other-park-demos", type=int, default=20, help="demos of each behaviour on each --demo-games park")
    return p


def main() -> None:
    p = parser()
    args = p.parse_args()
    if args.latency:
        latency(args.steps)
        return
    if args.workdir is None:
        p.error("--workdir is needed (or --latency)")
    unknown = [g for g in args.dagger_games if g not in (args.game, *args.demo_games)]
    if unknown:
        p.error(f"--dagger-games {' '.join(unknown)}: the policy drives from its own demos' starts; use --game or --demo-games parks")
    w = args.workdir
    (w / "demos").mkdir(parents=True, exist_ok=True)
    (w / "models").mkdir(exist_ok=True)
    t0 = time.time()
    if not (w / "demos" / "inspect").exists():
        run("demos", "--game", args.game, "--behavior", "inspect", "--episodes", args.inspect_episodes, "--out", w / "demos" / "inspect")
    if not (w / "demos" / "path").exists():
        run("demos", "--game", args.game, "--behavior", "path", "--episodes", args.path_episodes, "--steps", 300,
            "--seed", 1000, "--out", w / "demos" / "path")
    for game in args.demo_games:
        for behavior, extra in (("inspect", []), ("path", ["--steps", 300, "--seed", 1000])):
            folder = w / "demos" / behavior / game.replace(":", "_")
            if not folder.exists():
                run("demos", "--game", game, "--behavior", behavior, "--episodes", args.other_park_demos, *extra, "--out", folder)
    encoder = w / "models" / "encoder.ckpt"
    if not encoder.exists():
        run("train", "encoder", "--demos", w / "demos", "--out", encoder, "--pretrained", "none",
            "--epochs", args.encoder_epochs, "--max-minutes", args.encoder_minutes)
    rows = []
    eval_games = args.eval_games or [args.game]
    eval_episodes = [args.eval_episodes] + [args.other_park_episodes] * (len(eval_games) - 1)

    def evaluate(ckpt: Path, name: str, behavior: str, teacher: bool, round_: int) -> None:
        for game, episodes in zip(eval_games, eval_episodes):
            for greedy in (False, True) if args.greedy else (False,):
                # kept: a rerun goes on where it stopped
                report = w / f"eval-{name}{'-greedy' if greedy else ''}-{game.replace(':', '_')}-n{episodes}.json"
                if not report.exists():
                    run("eval", "policy", "--ckpt", ckpt, "--game", game, "--episodes", episodes, "--out", report,
                        *(["--greedy"] if greedy else []))
                rows.append((behavior, teacher, round_, greedy, game, json.loads(report.read_text())["summary"]))

    for behavior in args.behaviors:
        for teacher in (t == "yes" for t in args.teacher):
            name = f"{behavior}-{'teacher' if teacher else 'no-teacher'}"
            ckpt = w / "models" / f"{name}.ckpt"
            no_teacher = [] if teacher else ["--no-teacher"]
            if not ckpt.exists():
                run("train", "policy", "--demos", w / "demos" / behavior, "--encoder", encoder, "--out", ckpt,
                    "--epochs", args.policy_epochs, "--max-minutes", args.policy_minutes, "--global-hidden", args.global_hidden,
                    *no_teacher)
            evaluate(ckpt, name, behavior, teacher, 0)
            rounds: list[Path] = []
            for r in range(1, args.dagger_rounds + 1):
                for game in args.dagger_games or [args.game]:
                    folder = w / "dagger" / name / (f"round{r}" if game == args.game else f"round{r}-{game.replace(':', '_')}")
                    if not folder.exists():
                        folder.parent.mkdir(parents=True, exist_ok=True)
                        run("demos", "--game", game, "--behavior", behavior, "--episodes", args.dagger_episodes, "--steps", 300,
                            "--seed", 5000 + 100 * (r - 1), "--dagger", ckpt, "--beta", args.beta[min(r, len(args.beta)) - 1],
                            "--out", folder)
                    rounds.append(folder)
                last, ckpt = ckpt, w / "models" / f"{name}-dagger{r}.ckpt"
                if not ckpt.exists():
                    run("train", "policy", "--demos", w / "demos" / behavior, *[a for f in rounds for a in ("--demos", f)],
                        "--encoder", encoder, "--out", ckpt, "--init", last, "--epochs", args.policy_epochs,
                        "--max-minutes", args.dagger_minutes, "--global-hidden", args.global_hidden, *no_teacher)
                evaluate(ckpt, f"{name}-dagger{r}", behavior, teacher, r)
    print_table(args, rows, time.time() - t0)


def print_table(args: argparse.Namespace, rows: list, seconds: float) -> None:
    more = f" (and {args.other_park_demos} of each on {', '.join(args.demo_games)})" if args.demo_games else ""
    print(f"\n{args.game}: {args.inspect_episodes} inspect and {args.path_episodes} path demos{more}; "
          f"{args.eval_episodes} held-out tests each; DAgger {args.dagger_episodes} episodes a round on {', '.join(args.dagger_games or [args.game])} (beta {' '.join(map(str, args.beta))}); "
          f"{seconds:.0f} s in all")
    print(f"{'behaviour':<9} {'teacher':<8} {'DAgger':>6} {'acting':<8} {'park':<12} {'success':>8} {'mean JSD':>9}  measure")
    for behavior, teacher, round_, greedy, game, s in rows:
        measure = (f"circled ≥270° in {s['circled_270']:.0%}, median {s['median_degrees']:.0f}°" if behavior == "inspect"
                   else f"{s['on_path']:.0%} of steps on pathways, {s.get('cells', float('nan')):.0f} cells walked")
        print(f"{behavior:<9} {'yes' if teacher else 'no':<8} {round_:>6} {'greedy' if greedy else 'sampled':<8} {game:<12} "
              f"{s['success_rate']:>8.0%} {s['mean_jsd']:>9.3f}  {measure}")


if __name__ == "__main__":
    main()
