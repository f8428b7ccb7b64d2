"""Commands over games and scenarios: `games`, `shots`, `demos`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.capture.errors import UserError

console = Console()


def progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False,
    )


def check_out_parent(out: Path) -> None:
    if not out.parent.exists():
        raise UserError(f"--out {out}: its parent folder {out.parent} does not exist; create it first")


def games() -> None:
    """List the game specs that --game accepts, with examples."""
    from playtester.capture.games import BACKENDS

    table = Table(title="Game specs (--game)", show_lines=False)
    table.add_column("spec")
    table.add_column("what it plays")
    table.add_column("example")
    for b in BACKENDS.values():
        table.add_row(b.usage.replace(" | ", "\n"), b.description, b.example)
    console.print(table)


def shots(
    out: Path = typer.Option(..., "--out", help="Folder for images/ and labels.json (COCO)."),
    game: Optional[str] = typer.Option(None, "--game", help="Auto-label shots in a game with ground truth, e.g. doom:park."),
    n: int = typer.Option(2000, "--n", min=1, help="With --game: how many shots."),
    demos: Optional[Path] = typer.Option(None, "--demos", help="Take frames from demo episodes instead (for labelling)."),
    every: int = typer.Option(20, "--every", min=1, help="With --demos: keep one frame in this many."),
    min_box: int = typer.Option(6, "--min-box", min=1, help="Smallest box side in pixels to label."),
    seed: int = typer.Option(0, "--seed", help="Seed of the shot positions."),
    resolution: str = typer.Option("320x240", "--resolution", help="Engine resolution with --game."),
) -> None:
    """Detection shots as COCO (images/ + labels.json), what CVAT and Label Studio read and write.

    With --game the engine labels every shot: the player is placed around objects of interest,
    balanced over their kinds. With --demos, every N-th frame of the episodes is kept, labelled
    when the episode carries ground-truth boxes, otherwise ready to label by hand.
    """
    if (game is None) == (demos is None):
        raise UserError("shots: give exactly one of --game (auto-labelled) or --demos (frames from episodes)")
    check_out_parent(out)
    if game is not None:
        path, counts = _shots_from_game(game, out, n, min_box, seed, resolution)
    else:
        path, counts = _shots_from_demos(demos, out, every, min_box)
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    console.print(f"wrote {path} and images in {path.parent / 'images'} (boxes: {summary})")


def _shots_from_game(spec: str, out: Path, n: int, min_box: int, seed: int, resolution: str):
    import numpy as np

    from playtester.capture.games import make_game
    from playtester.datasets.coco import CocoWriter

    env = make_game(spec, resolution=resolution)
    try:
        layout = getattr(env.unwrapped, "scenario", None) and env.unwrapped.scenario.layout
        if layout is None:
            raise UserError(f"shots --game {spec}: this game has no ground-truth objects; use --demos and label the frames")
        rng = np.random.default_rng(seed)
        writer = CocoWriter(out)
        by_kind = {k: [o for o in layout.oois if o.kind == k] for k in writer.counts}
        by_kind = {k: v for k, v in by_kind.items() if v}
        with progress() as bar:
            task = bar.add_task("shots", total=n)
            tries = 0
            while len(writer.images) < n:
                tries += 1
                if tries > 20 * n + 100:
                    raise UserError(f"shots --game {spec}: could not frame enough objects; try a larger park")
                kind = min(by_kind, key=lambda k: (writer.counts[k], rng.random()))
                ooi = by_kind[kind][int(rng.integers(len(by_kind[kind])))]
                dist = float(rng.uniform(90, 520))
                around = float(rng.uniform(0, 2 * math.pi))
                x, y = ooi.x + dist * math.cos(around), ooi.y + dist * math.sin(around)
                x0, y0, x1, y1 = layout.bounds
                if not (x0 + 40 < x < x1 - 40 and y0 + 40 < y < y1 - 40) or not layout.walkable()[layout.cell_of(x, y)[::-1]]:
                    continue
                facing = math.degrees(math.atan2(ooi.y - y, ooi.x - x)) + float(rng.uniform(-30, 30))
                frame, info = env.reset(seed=int(rng.integers(2**31 - 1)), options={"start": (x, y, facing)})
                objects = [o for o in info.get("objects", []) if min(o["box"][2] - o["box"][0], o["box"][3] - o["box"][1]) >= min_box]
                if not any(o["ooi"] == ooi.id for o in objects):
                    continue
                writer.add(frame, objects, game=spec, position=list(info["position"]), angle=info["angle"])
                bar.advance(task)
        return writer.close(game=spec, seed=seed), writer.counts
    finally:
        env.close()


def _shots_from_demos(demos: Path, out: Path, every: int, min_box: int):
    from playtester.datasets.coco import CocoWriter
    from playtester.datasets.episodes import load_episodes

    episodes = load_episodes(demos)
    writer = CocoWriter(out)
    total = sum(len(range(0, len(ep), every)) for ep in episodes)
    with progress() as bar:
        task = bar.add_task("frames", total=total)
        for ep in episodes:
            for t in range(0, len(ep), every):
                objects = [
                    o for o in ep.steps[t].get("objects", [])
                    if min(o["box"][2] - o["box"][0], o["box"][3] - o["box"][1]) >= min_box
                ]
                writer.add(ep.frames[t], objects, episode=ep.name, t=t)
                bar.advance(task)
    return writer.close(source=str(demos)), writer.counts


def demos(
    out: Path = typer.Option(..., "--out", help="Folder to write episodes into (created; its parent must exist)."),
    game: str = typer.Option("doom:park", "--game", help="A game with ground truth, e.g. doom:park or doom:park:7."),
    behavior: str = typer.Option(..., "--behavior", help="path (follow the pathways) or inspect (circle an OOI 360°)."),
    episodes: int = typer.Option(10, "--episodes", min=1, help="How many episodes."),
    steps: int = typer.Option(300, "--steps", min=1, help="Most steps per episode (inspect stops when the circle is done)."),
    seed: int = typer.Option(0, "--seed", help="Seed of starts and expert choices; episode i uses seed+i."),
    resolution: str = typer.Option("320x240", "--resolution", help="Engine resolution."),
    dagger: Optional[Path] = typer.Option(
        None, "--dagger", metavar="POLICY.ckpt",
        help="DAgger: this trained policy drives (from its own training starts) and the expert labels each "
             "state with what it would have done. Write them to a folder of their own, then train on the demos and it "
             "(train policy --demos DEMOS --demos THIS --init POLICY.ckpt).",
    ),
    beta: float = typer.Option(0.0, "--beta", help="--dagger: the share of steps the expert drives instead of the policy."),
) -> None:
    """Record scripted-expert demos: ordinary demo episodes, as if a tester had played them.

    With --dagger, the policy drives and the expert labels: episodes that teach the policy to
    come back to the path or the object after its own mistakes (training uses the labels).
    """
    import numpy as np

    from playtester.capture.experts import Inspector, PathFollower, inspect_start
    from playtester.capture.games import make_game
    from playtester.datasets.episodes import EpisodeWriter, next_episode_name

    if behavior not in ("path", "inspect"):
        raise UserError(f"--behavior {behavior!r}: use path or inspect")
    if beta and dagger is None:
        raise UserError(f"--beta {beta}: it is the expert's share of the driving in DAgger episodes; pass --dagger POLICY.ckpt too")
    check_out_parent(out)
    env = make_game(game, resolution=resolution)
    try:
        layout = getattr(env.unwrapped, "scenario", None) and env.unwrapped.scenario.layout
        if layout is None:
            raise UserError(f"demos --game {game}: the scripted experts need a game with ground truth (doom:park)")
        keymap = env.unwrapped.keymap
        path_starts = [i for i, s in enumerate(layout.starts) if s.on_path] or list(range(len(layout.starts)))
        reachable = [o for o in layout.oois if o.reachable]
        driver, extra = None, {}
        if dagger is not None:
            from playtester.imitation.dagger import load_driver, training_starts, training_targets

            driver, scoring = load_driver(dagger, behavior, keymap, beta, seed)
            if behavior == "path":
                path_starts = [i for i in training_starts(scoring, dagger, game) if i < len(layout.starts)]
            else:
                known = set(training_targets(scoring, dagger, game))
                reachable = [o for o in reachable if o.id in known]
            if not path_starts or not reachable:
                raise UserError(f"--dagger {dagger}: its training starts or targets are not in {game}; use the game it was trained on")
            extra = {"dagger": {"policy": str(dagger), "beta": beta}}
        stats = []
        with progress() as bar:
            task = bar.add_task(f"{behavior} {'DAgger episodes' if driver else 'demos'}", total=episodes)
            for i in range(episodes):
                ep_seed = seed + i
                rng = np.random.default_rng(ep_seed)
                if behavior == "path":
                    expert = PathFollower(layout, keymap, rng)
                    start: object = path_starts[int(rng.integers(len(path_starts)))]
                else:
                    ooi = reachable[(seed + i) % len(reachable)]
                    expert = Inspector(layout, keymap, rng, ooi)
                    start = [round(v, 3) for v in inspect_start(layout, ooi, rng)]
                options = {"start": start}
                frame, info = env.reset(seed=ep_seed, options=options)
                expert.reset(info)
                if driver is not None:
                    driver.reset()
                name = next_episode_name(out)
                writer = EpisodeWriter(
                    out, name, game=game, behavior=behavior, keymap=keymap,
                    fps=env.unwrapped.metadata["render_fps"],
                    extra={"reset": {"seed": ep_seed, "options": options}, "expert": type(expert).__name__, **extra},
                )
                with writer:
                    on_path, cells = 0, set()
                    for _ in range(steps):
                        taken = expert.act(info)  # jitter included
                        label = expert.intended  # what the expert meant: what a policy should learn
                        notes = expert.annotations(info)
                        action = taken if driver is None else driver.choose(frame, notes.get("test_box"), taken)
                        writer.add(
                            frame, action, keymap.keys_for(action), position=info["position"], angle=info["angle"],
                            pitch=info["pitch"], objects=info.get("objects", []), **notes,
                            **({"label": label} if label != action else {}),
                        )
                        on_path += layout.on_pathway(*info["position"][:2])
                        cells.add(layout.cell_of(*info["position"][:2]))
                        frame, _, terminated, truncated, info = env.step(action)
                        if terminated or truncated or expert.done:
                            break
                    n = writer.n
                    if behavior == "path":
                        stats.append({"steps": n, "on_path": on_path / n, "cells": len(cells)})
                    else:
                        p = expert.progress
                        stats.append({"steps": n, "degrees": p.degrees, "on_screen": p.steps_on_screen / max(1, p.steps)})
                bar.advance(task)
    finally:
        env.close()
    if behavior == "path":
        share = sum(s["on_path"] for s in stats) / len(stats)
        walked = sum(s["cells"] for s in stats) / len(stats)
        console.print(f"wrote {episodes} path {'DAgger ' if driver else ''}episodes to {out}; {share:.0%} of steps on pathways, "
                      f"{walked:.0f} cells walked on average")
    else:
        deg = sum(s["degrees"] for s in stats) / len(stats)
        seen = sum(s["on_screen"] for s in stats) / len(stats)
        console.print(f"wrote {episodes} inspect {'DAgger ' if driver else ''}episodes to {out}; circled {deg:.0f}° on average, "
                      f"OOI on screen {seen:.0%} of circling steps")
