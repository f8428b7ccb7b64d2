"""`acting: int8` against fp32: how far the int8 networks' actions are from fp32's, and their time.

The two networks that play, each with its encoder's convolutions statically quantised (calibrated
on the first `--calibration` demo frames, as a run calibrates on its first frames) and its GRUs and
linear layers dynamically quantised (perception/int8.py), against the fp32 network on the same
frames:

- the explorer: the PPGTA actor-critic made from the path policy (`path.ckpt`), its frozen encoder
  int8 (`int8_frozen_encoder`) and its decisions by `int8_actor`, on the path demos;
- the test policy (`inspect.ckpt`, `LivePolicy.quantise`) on the inspect demos, each frame
  OD-masked by the demo's box of the object under test.

Each network runs a whole demo episode step by step carrying its own recurrent state, as it does
in a run, so the gap includes the drift of the state over an episode. Per step: KL(fp32 ‖ int8)
of the action distributions, whether the most likely action is the same, and, for an action
sampled from fp32's distribution, |log π_fp32(a) − log π_int8(a)|: the explorer's PPO update
starts its probability ratio at exp of that instead of 1 (its clip is 0.2).

Time: one explorer decision (encode the frame, the actor-critic's forward, sample) and one test
step (OD mask, encode, the policy's step), fp32 and int8 alternating on the same demo frames in
one process, median ms and the ratio int8 / fp32.

    python scripts/bench_int8.py --models M --demos DEMOS [--every 4] [--threads 2] [--timed 300] [--calibration 64]

M holds path.ckpt and inspect.ckpt (`playtester demo` writes them); DEMOS holds the `path` and
`inspect` demo folders (`playtester demos --behavior path|inspect`), or give `--path-demos` and
`--inspect-demos` apart.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from playtester.perception.int8 import CALIBRATION_FRAMES


def gaps(fp32: list[torch.Tensor], int8: list[torch.Tensor], rng: np.random.Generator) -> dict[str, float]:
    """The per-step gap of two lists of log-probabilities (A each)."""
    p, q = torch.stack(fp32).double(), torch.stack(int8).double()
    kl = (p.exp() * (p - q)).sum(-1).numpy()
    probs = p.exp().numpy()
    sampled = np.array([rng.choice(len(row), p=row / row.sum()) for row in probs])
    dlogp = np.abs((p - q).numpy()[np.arange(len(sampled)), sampled])
    return {"steps": len(kl), "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)), "kl_max": float(kl.max()),
            "argmax_same": float((p.argmax(-1) == q.argmax(-1)).double().mean()),
            "dlogp_mean": float(dlogp.mean()), "dlogp_p99": float(np.percentile(dlogp, 99)),
            "ratio_out_of_clip": float((np.abs(np.exp(dlogp) - 1) > 0.2).mean())}


def int8_explorer(path_ckpt: Path, calibration: list[np.ndarray]):
    """The explorer as `acting: int8` runs it: its frozen encoder calibrated on `calibration`
    (frames at the explorer's size) and int8, and the int8 copy that decides."""
    from playtester.exploration.acting import int8_actor, int8_frozen_encoder
    from playtester.exploration.imitation_ac import ImitationActorCritic

    agent = ImitationActorCritic.from_checkpoint(path_ckpt).eval()
    int8_frozen_encoder(agent, calibration_frames=len(calibration))
    with torch.inference_mode():
        for frame in calibration:
            agent.prepare(torch.from_numpy(np.array(frame)[None]))
    return agent, int8_actor(agent)


def int8_test_policy(inspect_ckpt: Path, frames: list[np.ndarray], boxes: list):
    """The test policy as `acting: int8` runs it, its encoder calibrated on `frames` (OD-masked
    by `boxes`); its state reset after."""
    from playtester.imitation.live import load_policy

    live = load_policy(inspect_ckpt).quantise(calibration_frames=len(frames))
    for frame, box in zip(frames, boxes):
        live.step(frame, box)
    live.reset()
    return live


def explorer_gap(path_ckpt: Path, episodes: list, rng: np.random.Generator, calibration: int = CALIBRATION_FRAMES) -> dict[str, float]:
    from playtester.exploration.imitation_ac import ImitationActorCritic

    agent = ImitationActorCritic.from_checkpoint(path_ckpt).eval()
    agent8, actor = int8_explorer(path_ckpt, [f for ep in episodes for f in ep.frames][:calibration])
    fp32, int8 = [], []
    with torch.inference_mode():
        for ep in episodes:
            s32, s8 = agent.initial_state(1), agent.initial_state(1)
            for t in range(len(ep.frames)):
                frame = torch.from_numpy(np.array(ep.frames[t : t + 1]))
                done = torch.full((1, 1), float(t == 0))
                a, b = agent(agent.prepare(frame).unsqueeze(0), s32, done), actor(agent8.prepare(frame).unsqueeze(0), s8, done)
                s32, s8 = a.state, b.state
                fp32.append(torch.log_softmax(a.logits[0, 0], -1))
                int8.append(torch.log_softmax(b.logits[0, 0], -1))
    return gaps(fp32, int8, rng)


def test_policy_gap(inspect_ckpt: Path, episodes: list, rng: np.random.Generator, calibration: int = CALIBRATION_FRAMES) -> dict[str, float]:
    from playtester.imitation.data import test_boxes
    from playtester.imitation.live import load_policy

    pairs = [(frame, box) for ep in episodes for frame, box in zip(ep.frames, test_boxes(ep))][:calibration]
    live32 = load_policy(inspect_ckpt)
    live8 = int8_test_policy(inspect_ckpt, [f for f, _ in pairs], [b for _, b in pairs])
    fp32, int8 = [], []
    for ep in episodes:
        live32.reset()
        live8.reset()
        for frame, box in zip(ep.frames, test_boxes(ep)):
            fp32.append(torch.from_numpy(live32.step(frame, box)).clamp_min(1e-12).log())
            int8.append(torch.from_numpy(live8.step(frame, box)).clamp_min(1e-12).log())
    return gaps(fp32, int8, rng)


def timings(path_ckpt: Path, inspect_ckpt: Path, frames: np.ndarray, boxes: list, n: int,
            calibration: int = CALIBRATION_FRAMES) -> dict[str, float]:
    """Median ms of a decision and of a test step, fp32 and int8 alternating on the same frames."""
    from playtester.exploration.imitation_ac import ImitationActorCritic
    from playtester.imitation.live import load_policy

    agent = ImitationActorCritic.from_checkpoint(path_ckpt).eval()
    small = [agent.policy_cfg.frames.resize(f) for f in frames]  # what the explorer's env gives it
    agent8, actor = int8_explorer(path_ckpt, small[:calibration])
    live32 = load_policy(inspect_ckpt)
    live8 = int8_test_policy(inspect_ckpt, list(frames[:calibration]), boxes[:calibration])
    states = {"fp32": agent.initial_state(1), "int8": agent.initial_state(1)}
    nets = {"fp32": agent, "int8": actor}
    encoders = {"fp32": agent, "int8": agent8}
    lives = {"fp32": live32, "int8": live8}
    times: dict[str, list[float]] = {f"{part}_{kind}": [] for part in ("decision", "test_step") for kind in nets}
    done = torch.zeros(1, 1)
    for i in range(n + 20):
        j = i % len(frames)
        for kind in (("fp32", "int8") if i % 2 else ("int8", "fp32")):
            encoders[kind]._features.clear()  # every decision encodes its frame, as in a run
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = nets[kind](encoders[kind].prepare(torch.from_numpy(small[j][None])).unsqueeze(0), states[kind], done)
                states[kind] = out.state
                int(torch.distributions.Categorical(logits=out.logits[0, 0]).sample())
            t1 = time.perf_counter()
            lives[kind].step(frames[j], boxes[j])
            t2 = time.perf_counter()
            if i >= 20:
                times[f"decision_{kind}"].append((t1 - t0) * 1000)
                times[f"test_step_{kind}"].append((t2 - t1) * 1000)
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, required=True, help="folder with path.ckpt and inspect.ckpt")
    parser.add_argument("--demos", type=Path, default=None, help="folder holding path/ and inspect/ demo folders")
    parser.add_argument("--path-demos", type=Path, default=None)
    parser.add_argument("--inspect-demos", type=Path, default=None)
    parser.add_argument("--every", type=int, default=4, help="every this many demo episodes (in name order)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--timed", type=int, default=300, help="decisions and test steps timed per precision")
    parser.add_argument("--calibration", type=int, default=CALIBRATION_FRAMES,
                        help="frames each int8 encoder observes before it turns int8 (a run's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path_demos = args.path_demos or (args.demos / "path" if args.demos else None)
    inspect_demos = args.inspect_demos or (args.demos / "inspect" if args.demos else None)
    for what, folder in (("--models", args.models), ("path demos", path_demos), ("inspect demos", inspect_demos)):
        if folder is None or not folder.is_dir():
            sys.exit(f"bench_int8: {what} {folder}: not a folder; give --demos DEMOS (with path/ and inspect/) or both --path-demos and --inspect-demos")
    for name in ("path.ckpt", "inspect.ckpt"):
        if not (args.models / name).is_file():
            sys.exit(f"bench_int8: --models {args.models} has no {name}; run `playtester demo` and give its models folder")
    if args.calibration < 1:
        sys.exit(f"bench_int8: --calibration {args.calibration}: give 1 frame or more")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from playtester.imitation.data import load_demo_folders, test_boxes

    path_eps = sorted(load_demo_folders(path_demos, None)[0], key=lambda e: str(e.path))[:: args.every]
    inspect_eps = sorted(load_demo_folders(inspect_demos, None)[0], key=lambda e: str(e.path))[:: args.every]
    rng = np.random.default_rng(args.seed)
    print(f"{len(path_eps)} path and {len(inspect_eps)} inspect demo episodes, torch {torch.__version__}, {args.threads} threads, "
          f"quantised engine {torch.backends.quantized.engine}", flush=True)
    rows = {"explorer (path demos)": explorer_gap(args.models / "path.ckpt", path_eps, rng, args.calibration),
            "test policy (inspect demos)": test_policy_gap(args.models / "inspect.ckpt", inspect_eps, rng, args.calibration)}
    print(f"\n{'network':28} {'steps':>6} {'KL mean':>9} {'KL p99':>9} {'KL max':>8} {'same argmax':>11} "
          f"{'|Δlog π| mean':>13} {'p99':>7} {'ratio out of clip':>17}")
    for name, r in rows.items():
        print(f"{name:28} {r['steps']:6d} {r['kl_mean']:9.2e} {r['kl_p99']:9.2e} {r['kl_max']:8.3f} {r['argmax_same'] * 100:10.2f}% "
              f"{r['dlogp_mean']:13.4f} {r['dlogp_p99']:7.4f} {r['ratio_out_of_clip'] * 100:16.2f}%")
    frames = np.concatenate([np.asarray(ep.frames) for ep in inspect_eps])
    boxes = [b for ep in inspect_eps for b in test_boxes(ep)]
    t = timings(args.models / "path.ckpt", args.models / "inspect.ckpt", frames, boxes, args.timed, args.calibration)
    print(f"\nmedian ms, {args.threads} threads, {args.timed} each, alternating")
    for part in ("decision", "test_step"):
        print(f"{part:10} fp32 {t[f'{part}_fp32']:6.2f}  int8 {t[f'{part}_int8']:6.2f}  ×{t[f'{part}_int8'] / t[f'{part}_fp32']:.2f}")


if __name__ == "__main__":
    main()
