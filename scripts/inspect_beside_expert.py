"""Where does an inspect policy go wrong? Play it beside the scripted expert and see where they part.

With `--ckpt`, the policy drives from the same held-out starts as `playtester eval policy` (same
seed, same starts, the same sampling) while an `Inspector` without jitter says at each step what it
would have done; each test prints its degrees circled and how often the two agreed, overall and in
the first 30 steps, and `--show` prints the step table of the tests named (distance to the object,
its bearing off the screen's centre, whether it is on screen, the two actions).

Without `--ckpt`, the expert drives, from the demos' starts (`playtester demos`), and the script
says how often the object is on screen while the expert walks up to it and while it circles:
what a policy cloned from those demos can see.

    python scripts/inspect_beside_expert.py --game doom:park:2 --ckpt models/inspect.ckpt --episodes 20 [--show 4,7]
    python scripts/inspect_beside_expert.py --game doom:park:2 --episodes 20
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from playtester.capture.doom import wrap_angle
from playtester.capture.experts import CircleProgress, Inspector, bearing, inspect_start, ooi_on_screen
from playtester.capture.games import make_game
from playtester.imitation.evaluate import held_out_cases
from playtester.imitation.live import load_policy


def expert_alone(env, layout, episodes: int) -> None:
    keymap = env.unwrapped.keymap
    reachable = [o for o in layout.oois if o.reachable]
    approach = [0, 0]
    circling = [0, 0]
    lengths, degrees = [], []
    for i in range(episodes):
        rng = np.random.default_rng(i)  # as `playtester demos --seed 0`
        ooi = reachable[i % len(reachable)]
        frame, info = env.reset(seed=i, options={"start": inspect_start(layout, ooi, rng)})
        expert = Inspector(layout, keymap, rng, ooi)
        expert.reset(info)
        for t in range(400):
            count = circling if expert.circling else approach
            count[0] += ooi_on_screen(info, ooi.id) is not None
            count[1] += 1
            frame, _, terminated, truncated, info = env.step(expert.act(info))
            if expert.done or terminated or truncated:
                break
        lengths.append(t + 1)
        degrees.append(expert.progress.degrees)
    print(f"expert alone, {episodes} demos: object on screen in {approach[0]}/{approach[1]} approach steps "
          f"({approach[0] / max(1, approach[1]):.0%}) and {circling[0]}/{circling[1]} circling steps "
          f"({circling[0] / max(1, circling[1]):.0%}); {np.mean(lengths):.0f} steps and {np.mean(degrees):.0f}° on average")


def policy_beside_expert(env, layout, game: str, ckpt: str, episodes: int, seed: int, show: set[int]) -> None:
    live = load_policy(ckpt)
    names = live.keymap.names
    targets, _, held_out = held_out_cases(layout, live.scoring, game, "inspect")
    steps = int(round(1.5 * live.scoring.get("max_length", 200)))
    rng = np.random.default_rng(seed)
    circled = 0
    for i in range(episodes):
        live.reset()
        ooi = targets[i % len(targets)]
        frame, info = env.reset(seed=seed + i, options={"start": inspect_start(layout, ooi, rng, facing_spread=20.0)})
        expert = Inspector(layout, env.unwrapped.keymap, np.random.default_rng(0), ooi, jitter=0.0)
        expert.reset(info)
        progress = CircleProgress(ooi)
        rows = []
        for t in range(steps):
            seen = ooi_on_screen(info, ooi.id)
            probs = live.step(frame, seen["box"] if seen else None)
            action = int(rng.choice(len(probs), p=probs / probs.sum()))
            meant = expert.act(info)
            x, y, _ = info["position"]
            off = wrap_angle(bearing(x, y, ooi.x, ooi.y) - float(info["angle"]))
            rows.append((t, math.hypot(ooi.x - x, ooi.y - y), off, seen is not None, names[action], names[meant], float(probs.max())))
            frame, _, terminated, truncated, info = env.step(action)
            progress.update(*info["position"][:2], ooi_on_screen(info, ooi.id) is not None)
            if terminated or truncated:
                break
        agree = [r[4] == r[5] for r in rows]
        circled += progress.degrees >= 270
        print(f"test {i:2d}  OOI {ooi.id:3d}  start {rows[0][1]:4.0f} units away, {rows[0][2]:+4.0f}° off centre  "
              f"circled {progress.degrees:4.0f}°  agrees with the expert in {np.mean(agree):.0%} of steps, "
              f"{np.mean(agree[:30]):.0%} of the first 30")
        if i in show:
            print("      step  distance  off centre  on screen  policy        expert        p(policy's best)")
            for t, dist, off, on, a, e, p in rows[:40]:
                print(f"      {t:4d}  {dist:8.0f}  {off:+9.0f}°  {'yes' if on else 'no':>9}  {a:<12}  {e:<12}  {p:.2f}")
    print(f"{circled}/{episodes} tests circled ≥ 270° ({'held out' if held_out else 'trained'} objects of {game})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--game", default="doom:park:2")
    ap.add_argument("--ckpt", help="an inspect policy; without it the expert drives alone")
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1000, help="as eval policy --seed (the same default)")
    ap.add_argument("--show", default="", help="tests whose first 40 steps to print, e.g. 4,7")
    args = ap.parse_args()
    torch.set_num_threads(1)
    env = make_game(args.game)
    try:
        layout = env.unwrapped.scenario.layout
        if args.ckpt:
            show = {int(v) for v in args.show.split(",") if v.strip()}
            policy_beside_expert(env, layout, args.game, args.ckpt, args.episodes, args.seed, show)
        else:
            expert_alone(env, layout, args.episodes)
    finally:
        env.close()


if __name__ == "__main__":
    main()
