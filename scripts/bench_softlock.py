"""Softlocks found, and false ones: the softlock oracle (a level's geometry) and the confinement
oracle (pixels alone) on the level builder's test levels with and without traps.

The levels (`capture/park/level_builder.py`'s `softlock_levels`): a pit, a door a one-use switch
opens that closes behind the player, a one-way teleporter into a sealed room (traps); a one-way
drop to a hall that goes on to the exit, and a pit with a lift back up (no traps). Each is played

- by its scripted walk (`TrapLevel.walk`: look around, go in, walk the corners of where it landed
  round and round, or leave by the exit or the lift), one episode;
- by the random explorer (uniform actions over the level's key map, as `run explore --explorer
  random`), `--seeds` episodes of `--steps` steps.

Both oracles judge every step and nothing ends the episode (a run ends it at a softlock). What
is true comes from the plan, not from the oracles: an episode is trapped from its last entry into
a trap room if the player never left it again. A finding while trapped is right; any other is
false (on the levels without a trap, every one). Per oracle and driver: precision, recall (of the
episodes trapped for at least `--min-trapped` steps) and steps from the entry to the finding;
the time an oracle's step takes beside the engine's.

`--freedoom MAP…` also walks stock Freedoom 2 maps with the level-walk expert and the random
explorer: no softlock is known there, so every softlock finding is one to look at (printed with
its cause). First, how high a jump climbs (built ledges: `JUMP_CLIMB`), and how the places of the
places view and of the confinement oracle grow along the pit's walk.

    nice -n 10 python scripts/bench_softlock.py --seeds 5 --steps 2000 --freedoom MAP01 MAP02 --json softlock.json

The confinement oracle's settings were picked on seeds 0-4 and MAP01-MAP05; `--first-seed 5
--freedoom MAP06 MAP07 MAP08 MAP09 MAP10` measures it where they were not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np


def climb_heights(folder: Path, heights=(56, 60, 64)) -> dict[int, bool]:
    """Whether a jump while walking at it gets the player onto a ledge of each height (built levels)."""
    from playtester.capture.games import make_game
    from playtester.capture.park.level_builder import LevelPlan, Room, level_wad

    out = {}
    for h in heights:
        plan = LevelPlan(rows=["#########", "#aaaabbb#", "#aaaabbb#", "#########"],
                         rooms={"a": Room(ceiling=200), "b": Room(floor=h, ceiling=200)}, start="a")
        wad = folder / f"ledge{h}.wad"
        wad.write_bytes(level_wad(plan))
        env = make_game(f"doom:wad:{wad}")
        try:
            k = env.unwrapped.keymap.index
            best = 0.0
            for run_up in (2, 4, 6, 8):  # from a standing start 160 units away: the last jumps are at the wall
                _, info = env.reset(seed=0, options={"start": (96.0, 96.0, 0.0)})
                for a in (["forward"] * run_up + ["jump"] + ["forward"] * 6) * 2:
                    _, _, _, _, info = env.step(k(a))
                    best = max(best, float(info["position"][2]))
            out[h] = best >= h
        finally:
            env.close()
    return out


def places_in_the_pit(folder: Path) -> dict[str, list[int]]:
    """Distinct places, every 100 steps, along the pit's scripted walk (in the pit from about step
    50, walking its corners): by the places view's 16×12 picture, by a grey histogram of the whole
    frame (the confinement oracle's until 2026-11-26) and by the confinement oracle's band
    histogram. A confinement oracle needs places that stop growing in a trap."""
    from playtester.bugs.confinement import VIEW_SIZE, BandHistogram
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import WaypointWalk
    from playtester.capture.park.level_builder import level_wad, softlock_levels
    from playtester.perception.places import PixelEmbedding, Places

    level = softlock_levels()["pit"]
    wad = folder / "pit-places.wad"
    wad.write_bytes(level_wad(level.plan))
    env = make_game(f"doom:wad:{wad}")
    embeddings = {"pixels 16x12 (the places view)": PixelEmbedding(), "grey histogram at 0.05 (the frame's)": GreyHistogram(),
                  "band histogram (confinement)": BandHistogram()}
    places = {k: Places(e.threshold) for k, e in embeddings.items()}
    counts: dict[str, list[int]] = {k: [] for k in embeddings}
    try:
        walk = WaypointWalk(env.unwrapped.keymap, list(level.walk))
        frame, info = env.reset(seed=0)
        for t in range(5000):
            a = walk.act(info)
            if a is None:
                break
            frame, _, _, _, info = env.step(a)
            view = cv2.resize(frame, VIEW_SIZE, interpolation=cv2.INTER_AREA)
            for k, e in embeddings.items():
                places[k].visit(e(view))
                if t % 100 == 99:
                    counts[k].append(places[k].count)
    finally:
        env.close()
    return counts


class GreyHistogram:
    """The whole frame's grey levels in 16 bins, square-rooted, a unit vector: the confinement
    oracle's embedding until 2026-11-26, kept here for the comparison."""

    threshold = 0.05

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        from playtester.perception.places import unit

        counts = cv2.calcHist([cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)], [0], None, [16], [0, 256])
        return unit(np.sqrt(counts.ravel()))


def trap_sectors(level) -> set[int]:
    """The sector indices of a test level's trap rooms (the builder writes one sector a room, in order)."""
    order = [k for k in level.plan.rooms if level.plan.cells(k)]
    return {order.index(k) for k in level.trap_rooms}


def play(env, oracles, actions, steps: int, trap: set[int]) -> dict:
    """One episode: `actions(info)` gives each action (None ends it early); every oracle judges every
    step. The truth (the last entry into the trap if it was never left), the findings, the times."""
    graph = env.unwrapped.graph
    frame, info = env.reset(seed=0)
    for o in oracles:
        o.reset()
    found = {o.name: [] for o in oracles}
    seconds = {o.name: 0.0 for o in oracles} | {"engine": 0.0}
    inside, entry = False, None
    below = beyond = 0
    softlock = next((o for o in oracles if o.name == "softlock"), None)
    t = 0
    for t in range(steps):
        a = actions(info)
        if a is None:
            break
        t0 = time.perf_counter()
        frame, _, _, _, info = env.step(a)
        seconds["engine"] += time.perf_counter() - t0
        sector = graph.sector_at(*info["position"][:2])
        here = sector in trap
        if here and not inside:
            entry = t
        inside = here
        below += info["position"][2] <= -90.0  # down where the test levels' pits and lower halls are
        if softlock is not None and sector is not None and softlock.start not in softlock.region(sector):
            beyond += 1  # past a one-way passage: only an exit (or the start again) keeps it from being a trap
        for o in oracles:
            t0 = time.perf_counter()
            for f in o.observe(frame, info, a, 0, t):  # a start inside a trap counts too: none of these levels starts in one
                found[o.name].append({"step": t, "cause": f.details.get("cause", f.message)})
            seconds[o.name] += time.perf_counter() - t0
    return {"steps": t + 1, "entry": entry if inside else None, "findings": found, "seconds": seconds,
            "below": below, "beyond": beyond}


def score(episodes: list[dict], name: str, min_trapped: int) -> dict:
    """Precision, recall and steps to find of one oracle over episodes (see the module's docstring)."""
    right = wrong = 0
    trapped, caught, delays = 0, 0, []
    for ep in episodes:
        entry = ep["entry"]
        hits = [f for f in ep["findings"][name] if entry is not None and f["step"] >= entry]
        right += len(hits)
        wrong += len(ep["findings"][name]) - len(hits)
        if entry is not None and ep["steps"] - entry >= min_trapped:
            trapped += 1
            if hits:
                caught += 1
                delays.append(hits[0]["step"] - entry)
    return {"findings": right + wrong, "right": right, "false": wrong,
            "precision": right / (right + wrong) if right + wrong else None,
            "trapped_episodes": trapped, "found": caught, "recall": caught / trapped if trapped else None,
            "steps_to_find": float(np.median(delays)) if delays else None}


def oracles_for(env):
    from playtester.bugs.confinement import ConfinementOracle
    from playtester.bugs.softlock import softlock_oracle

    game = env.unwrapped
    return [softlock_oracle(game.graph, game.keymap), ConfinementOracle()]


def test_levels(folder: Path, seeds: int, steps: int, first_seed: int = 0) -> dict[str, dict[str, list[dict]]]:
    """Every test level's episodes, by driver (`walk`, `random`)."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import WaypointWalk
    from playtester.capture.park.level_builder import level_wad, softlock_levels

    out: dict[str, dict[str, list[dict]]] = {}
    for name, level in softlock_levels().items():
        wad = folder / f"{name}.wad"
        wad.write_bytes(level_wad(level.plan))
        env = make_game(f"doom:wad:{wad}")
        try:
            oracles, trap = oracles_for(env), trap_sectors(level)
            walk = WaypointWalk(env.unwrapped.keymap, list(level.walk))
            walk.reset()
            out[name] = {"walk": [play(env, oracles, walk.act, 5000, trap)], "random": []}
            for seed in range(first_seed, first_seed + seeds):
                rng = np.random.default_rng(seed + 1)  # as `run explore --explorer random --seed SEED` draws
                n = env.action_space.n
                out[name]["random"].append(play(env, oracles, lambda info: int(rng.integers(n)), steps, trap))
                print(f"{name} random seed {seed}: trapped from {out[name]['random'][-1]['entry']}, findings "
                      f"{ {k: [f['step'] for f in v] for k, v in out[name]['random'][-1]['findings'].items()} }", flush=True)
        finally:
            env.close()
    return out


def freedoom(maps: list[str], steps: int, seeds: int, first_seed: int = 0) -> list[dict]:
    """Softlock findings on stock Freedoom 2 maps: the level-walk expert and the random explorer."""
    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker

    rows = []
    for m in maps:
        env = make_game(f"doom:freedoom2:{m}")
        try:
            game = env.unwrapped
            oracles = oracles_for(env)
            walker = LevelWalker(game.graph, game.keymap, np.random.default_rng(0), jitter=0.0)
            first = {"done": False}

            def walk(info):
                if not first["done"]:
                    walker.reset(info)
                    first["done"] = True
                return walker.act(info)

            drivers = [("walker", walk)] + [(f"random {s}", (lambda r: lambda info: int(r.integers(env.action_space.n)))(
                np.random.default_rng(s + 1))) for s in range(first_seed, first_seed + seeds)]
            for driver, act in drivers:
                ep = play(env, oracles, act, steps, set())
                rows.append({"map": m, "driver": driver, "steps": ep["steps"], "start_out_of_reach": ep["beyond"],
                             "softlock": ep["findings"]["softlock"], "confined": ep["findings"]["confined"],
                             "seconds": ep["seconds"]})
                print(f"freedoom2 {m} {driver}: {ep['steps']} steps, {ep['beyond']} of them with the start out of reach; "
                      f"softlock {ep['findings']['softlock']}, confined {[f['step'] for f in ep['findings']['confined']]}",
                      flush=True)
        finally:
            env.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="Random explorer episodes on each test level.")
    ap.add_argument("--steps", type=int, default=2000, help="Steps of each random episode.")
    ap.add_argument("--first-seed", type=int, default=0, help="The random explorer's first seed (seeds FIRST … FIRST+SEEDS-1, on the test "
                    "levels and Freedoom): 5 for seeds the confinement oracle's settings were not picked on.")
    ap.add_argument("--min-trapped", type=int, default=200, help="Steps trapped before an episode's end for recall to count it.")
    ap.add_argument("--freedoom", nargs="*", default=[], help="Freedoom 2 maps to walk as well (e.g. MAP01 MAP02).")
    ap.add_argument("--freedoom-steps", type=int, default=2000)
    ap.add_argument("--freedoom-seeds", type=int, default=1)
    ap.add_argument("--json", type=Path, help="Write every figure here.")
    args = ap.parse_args(argv)
    if args.seeds < 0 or args.steps < 1 or args.first_seed < 0:
        print(f"error: --seeds {args.seeds} --steps {args.steps} --first-seed {args.first_seed}: give 0 or more seeds from seed 0 "
              "on and at least 1 step", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        climbs = climb_heights(folder)
        print("a jump walking at the ledge gets onto: " + ", ".join(f"{h} units {'yes' if ok else 'no'}" for h, ok in climbs.items()))
        grown = places_in_the_pit(folder)
        for k, v in grown.items():
            print(f"places along the pit's walk, every 100 steps, by {k}: {v}")
        episodes = test_levels(folder, args.seeds, args.steps, args.first_seed)
    from playtester.capture.park.level_builder import softlock_levels

    levels = softlock_levels()
    table = {}
    print(f"\n{'oracle':10} {'driver':7} {'findings':>8} {'false':>6} {'precision':>9} {'recall':>12} {'steps to find':>13}")
    for oracle in ("softlock", "confined"):
        for driver in ("walk", "random"):
            eps = [e for name in episodes for e in episodes[name][driver]]
            s = score(eps, oracle, args.min_trapped)
            table[f"{oracle}/{driver}"] = s
            prec = "–" if s["precision"] is None else f"{s['precision']:.2f}"
            rec = f"{s['found']}/{s['trapped_episodes']}"
            print(f"{oracle:10} {driver:7} {s['findings']:8d} {s['false']:6d} {prec:>9} {rec:>12} "
                  f"{'–' if s['steps_to_find'] is None else s['steps_to_find']:>13}")
    print("\nper level (walk | random: trapped episodes, softlock found, confined found, false softlock, false confined):")
    for name, by in episodes.items():
        w = by["walk"][0]
        r = {o: score(by["random"], o, args.min_trapped) for o in ("softlock", "confined")}
        print(f"  {name:9} trap={levels[name].trap!s:5} walk: entry {w['entry']}, softlock "
              f"{[f['step'] for f in w['findings']['softlock']]}, confined {[f['step'] for f in w['findings']['confined']]} | "
              f"random: {r['softlock']['trapped_episodes']} trapped, {r['softlock']['found']}, {r['confined']['found']}, "
              f"{r['softlock']['false']}, {r['confined']['false']}")
        for f in w["findings"]["softlock"][:1]:
            print(f"            why: {f['cause']}")
        if not levels[name].trap:
            down = sum(e["below"] >= args.min_trapped for e in by["random"])
            print(f"            random episodes {args.min_trapped}+ steps down below (a lower hall or the lift's pit): {down} "
                  f"of {len(by['random'])}; steps with the start out of reach: walk {w['beyond']}, random "
                  f"{sum(e['beyond'] for e in by['random'])}")
    seconds = {k: sum(e["seconds"][k] for by in episodes.values() for d in by.values() for e in d) for k in ("engine", "softlock", "confined")}
    steps = sum(e["steps"] for by in episodes.values() for d in by.values() for e in d)
    print(f"\ntime a step (ms, this shared machine): engine {1000 * seconds['engine'] / steps:.2f}, softlock oracle "
          f"{1000 * seconds['softlock'] / steps:.3f} (×{seconds['softlock'] / seconds['engine']:.2f} the engine's), confinement "
          f"{1000 * seconds['confined'] / steps:.3f} (×{seconds['confined'] / seconds['engine']:.2f})")
    real = freedoom(args.freedoom, args.freedoom_steps, args.freedoom_seeds, args.first_seed) if args.freedoom else []
    if args.json:
        args.json.write_text(json.dumps({"climb": climbs, "places_in_the_pit": grown, "table": table, "episodes": episodes,
                                         "freedoom": real}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
