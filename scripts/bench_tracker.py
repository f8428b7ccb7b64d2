"""How well the box tracker follows an OOI between detector passes, against keeping the last box.

Plays OOI tests on the park the way the tester loop does (random exploration until the detector
boxes an untested object close enough to test, then the test policy for a test's steps), with the
detector on every frame of the test as the reference. Then, for each K, it anchors the tracker on
the detector's box every K steps and, on the frames in between, compares with the detector's box
there (IoU) two ways of giving the test policy a box:

    tracker   `BoxTracker.follow` (the last trusted box when it answers None), the loop's way
    last box  the box of the last detector pass, unchanged (`track_every` before the tracker)

and prints, per K: the mean IoU (0 where the way gives no box) and the share of frames at
IoU ≥ 0.5 on the frames the detector boxed; on the frames it did not, how often the way still
gives a box (the object is out of view or hidden: a box there is wrong); the tracker's time.

    python scripts/bench_tracker.py --models playtester-demo/models [--tests 20] [--ks 2 4 8]

`--models` holds `detector.ckpt` and `inspect.ckpt` (what `playtester demo` trains).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def play_tests(models: Path, tests: int, test_steps: int, seed: int, min_score: float, min_height: int):
    """`tests` OOI tests, each a list of (frame, detector box or None) from its first frame."""
    import torch

    from playtester.capture.games import make_game
    from playtester.imitation.live import load_policy
    from playtester.perception.detector import load_detector
    from playtester.tester.identity import best_overlap
    from playtester.tester.loop import ModelDetector

    torch.set_num_threads(1)
    env = make_game("doom:park:1")
    detector = ModelDetector(load_detector(models / "detector.ckpt"), env.unwrapped.scenario.layout.oois)
    live = load_policy(models / "inspect.ckpt")
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    tested: set = set()
    out = []
    while len(out) < tests:
        obs, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, info = env.reset()
            tested.clear()
            continue
        ready = [d for d in detector(obs, info) if d["score"] >= min_score and d["box"][3] - d["box"][1] >= min_height
                 and d["ooi"] not in tested]
        if not ready:
            continue
        target = max(ready, key=lambda d: d["score"])
        tested.add(target["ooi"])
        box, seen = target["box"], [(obs, target["box"])]
        live.reset()
        for _ in range(test_steps):
            probs = live.step(obs, box)
            obs, _, terminated, truncated, info = env.step(int(rng.choice(len(probs), p=probs / probs.sum())))
            if terminated or truncated:
                break
            same = [d for d in detector(obs, info) if d["class"] == target["class"]]
            by_id = [d["box"] for d in same if d["ooi"] is not None and d["ooi"] == target["ooi"]]
            i = None if by_id or box is None else best_overlap(box, [d["box"] for d in same])
            found = by_id[0] if by_id else None if i is None else same[i]["box"]
            seen.append((obs, found))
            box = found if found is not None else box
        out.append(seen)
        print(f"test {len(out)}/{tests}: {target['class']} {target['ooi']}, {len(seen)} frames, "
              f"boxed on {sum(b is not None for _, b in seen)}", flush=True)
        if terminated or truncated:
            obs, info = env.reset()
            tested.clear()
    env.close()
    return out


def compare(tests, k: int) -> dict:
    """The box the test policy would get on the frames between detector passes every `k` steps,
    against the detector's own box there, as the tester loop gives it: at a pass the detector's
    box (None when it finds nothing), in between the tracker's (None when it loses the object)
    or, the old way, the last pass's box."""
    from playtester.perception.tracker import BoxTracker
    from playtester.tester.identity import iou

    tracked, kept, tracked_extra, kept_extra, times = [], [], 0, 0, []
    for seen in tests:
        tracker, last_pass, box = BoxTracker(), None, None
        for t, (frame, reference) in enumerate(seen):
            if t % k == 0:
                tracker.anchor(frame, reference)
                last_pass = box = reference
                continue
            if tracker.patch is not None:
                start = time.perf_counter()
                box = tracker.follow(frame)
                times.append(time.perf_counter() - start)
            if reference is not None:
                tracked.append(0.0 if box is None else iou(box, reference))
                kept.append(0.0 if last_pass is None else iou(last_pass, reference))
            else:
                tracked_extra += box is not None
                kept_extra += last_pass is not None
    tracked, kept = np.array(tracked), np.array(kept)
    between = sum(max(0, len(seen) - 1 - (len(seen) - 1) // k) for seen in tests)
    unseen = between - len(tracked)
    return {"k": k, "frames": len(tracked), "unseen": unseen, "tracker_mean": tracked.mean(),
            "tracker_good": (tracked >= 0.5).mean(), "kept_mean": kept.mean(), "kept_good": (kept >= 0.5).mean(),
            "tracker_extra": tracked_extra / max(1, unseen), "kept_extra": kept_extra / max(1, unseen),
            "ms": 1e3 * np.median(times) if times else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, required=True, help="folder with detector.ckpt and inspect.ckpt")
    parser.add_argument("--tests", type=int, default=20, help="OOI tests to play")
    parser.add_argument("--test-steps", type=int, default=100, help="steps a test")
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8], help="detector every K test steps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tests = play_tests(args.models, args.tests, args.test_steps, args.seed, min_score=0.6, min_height=28)
    print(f"\n{sum(len(s) for s in tests)} test frames, the detector boxed the OOI on {sum(b is not None for s in tests for _, b in s)}")
    print("\n| K | frames boxed (between passes) | tracker: mean IoU / IoU ≥ 0.5 | last pass's box: mean IoU / IoU ≥ 0.5 "
          "| frames not boxed given a box: tracker / last pass | tracker ms a frame |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for k in args.ks:
        r = compare(tests, k)
        print(f"| {k} | {r['frames']} | {r['tracker_mean']:.3f} / {100 * r['tracker_good']:.1f} % | "
              f"{r['kept_mean']:.3f} / {100 * r['kept_good']:.1f} % | {100 * r['tracker_extra']:.1f} % / "
              f"{100 * r['kept_extra']:.1f} % | {r['ms']:.2f} |")


if __name__ == "__main__":
    main()
