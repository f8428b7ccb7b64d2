"""Commands over games and scenarios: `games`, `shots`, `demos`."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.errors import UserError
from playtester.options import (
    DETECTOR_CHECKPOINT,
    MANY, RULES_HELP, Choice, Count, FrameSize, InFile, InFolder, NameOrFile, Number, OutFolder, Seed, Text, about, check_free_disk,
    frame_size, inputs_checked, option,
)
from playtester.files import new_folder

console = Console()


def progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False,
    )


def games(
    wad: Optional[Path] = option(InFile("WAD file"), None, "--wad", help="List the maps of this WAD file instead, each with its game spec."),
) -> None:
    """List the game specs that --game accepts, with examples (and ViZDoom's scenarios); with
    --wad, the maps of a WAD file."""
    from playtester.capture.games import BACKENDS

    if wad is not None:
        return _wad_games(wad)

    table = Table(title="Game specs (--game)", show_lines=False)
    table.add_column("spec")
    table.add_column("what it plays")
    table.add_column("example")
    for b in BACKENDS.values():
        table.add_row(b.usage.replace(" | ", "\n"), b.description, b.example)
    console.print(table)
    from playtester.capture.wads import shipped_scenarios

    console.print(f"ViZDoom's scenarios (doom:scenario:NAME): {', '.join(shipped_scenarios())}", soft_wrap=True)


def _wad_games(wad: Path) -> None:
    """The maps of a WAD, each with the spec that plays it."""
    from playtester.capture.level_map import wad_kind
    from playtester.capture.wads import wad_maps

    maps = wad_maps(wad)
    kind = wad_kind(wad)
    if not maps:
        raise UserError(f"--wad {wad}: it holds no map (a WAD of textures or sounds only?); give a WAD with levels")
    table = Table(title=f"{wad} ({kind}, {len(maps)} map{'' if len(maps) == 1 else 's'})")
    table.add_column("map")
    table.add_column("game spec (--game)")
    for name in maps:
        table.add_row(name, f"doom:wad:{wad}:{name}")
    console.print(table)


def shots(
    out: Path = option(OutFolder(), ..., "--out", help="Folder for images/ and labels.json (COCO)."),
    game: Optional[str] = option(Text(), None, "--game", help="Auto-label shots in a Doom game: the park, or a stock level with --classes."),
    classes: Optional[str] = option(
        Text(), None, "--classes", help="With --game: the object classes to label, comma-separated (a stock level's thing classes, "
                                "e.g. Zombieman,ExplosiveBarrel,Stimpack; on the park a subset of its OOI kinds)."),
    n: int = option(Count(1, MANY), 2000, "--n", help="With --game: how many shots."),
    background: int = option(
        Count(0, MANY), 0, "--background",
        help="With --game: this many more shots from free play (random moves, turns and looks from places near the "
             "objects) in which no object of the classes is in view, as background images: they teach the detector "
             "what scenery is not an object (docs/benchmarks/real-tests.md)."),
    demos: Optional[Path] = option(InFolder("folder of demo episodes"), None, "--demos", help="Take frames from demo episodes instead (for labelling)."),
    every: int = option(Count(1, MANY), 20, "--every", help="With --demos: keep one frame in this many."),
    prelabel: Optional[Path] = option(
        DETECTOR_CHECKPOINT, None, "--prelabel", metavar="DETECTOR.ckpt",
        help="With --demos: a trained detector drafts the labels: its boxes are written as pre-labels (each marked a "
             "prediction, with its score) for CVAT or Label Studio to import and a person to correct, and the frames come "
             "most uncertain first (label the start of the file first); then train detector on the corrected file."),
    min_box: int = option(
        Count(1, 4096), 15, "--min-box",
        help="Smallest box size, sqrt(width·height) in pixels of the shot, to ask a detector for: smaller objects are "
             "marked crowd (iscrowd), neither trained on nor scored. 15 at 320×240 is 6 px at a 128-px detector's input."),
    seed: int = option(Seed(), 0, "--seed", help="Seed of the shot positions."),
    resolution: str = option(FrameSize(), "320x240", "--resolution", help="Engine resolution with --game."),
    rules: Optional[str] = option(Choice("immortal", "no-monsters", "play"), None, "--rules", help=RULES_HELP),
) -> None:
    """Detection shots as COCO (images/ + labels.json), what CVAT and Label Studio read and write.

    With --game the engine labels every shot: the player is placed around objects of the classes
    asked for (the park's OOIs, or a stock level's things read from its map), balanced over the
    classes. With --demos, every N-th frame of the episodes is kept, labelled when the episode
    carries ground-truth boxes, otherwise ready to label by hand; with --prelabel, a detector's
    boxes are the first draft (docs/labelling.md).
    """
    _check_shot_sources(game, demos, classes, background, prelabel)
    labelled = (out / "labels.json").exists  # until then shots are no use: a refusal leaves no folder
    if game is not None:
        from playtester.capture.rules import check_rules

        wanted = [c.strip() for c in classes.split(",") if c.strip()] if classes is not None else None
        rules = check_rules(rules, game)
        with new_folder(out, kept=labelled):
            path, counts = _shots_from_game(game, out, n, min_box, seed, resolution, wanted, rules, background)
    elif rules is not None:
        raise UserError(f"--rules {rules}: it says how --game is played; frames from --demos were played already")
    elif prelabel is not None:
        from playtester.commands.prelabel import prelabelled_shots

        with new_folder(out, kept=labelled):
            path, counts = prelabelled_shots(demos, out, every, min_box, prelabel, progress)
    else:
        with new_folder(out, kept=labelled):
            path, counts = _shots_from_demos(demos, out, every, min_box)
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    kind = "pre-labels to correct, frames most uncertain first" if prelabel is not None else "boxes"
    console.print(f"wrote {path} and images in {path.parent / 'images'} ({kind}: {summary})")


def _check_shot_sources(game: str | None, demos: Path | None, classes: str | None, background: int,
                        prelabel: Path | None) -> None:
    """Refuse the options of one source of shots given with the other."""
    if (game is None) == (demos is None):
        raise UserError("shots: give exactly one of --game (auto-labelled) or --demos (frames from episodes)")
    if classes is not None and game is None:
        raise UserError("shots --classes: it picks what --game labels; frames from --demos keep the labels they carry")
    if background and game is None:
        raise UserError("shots --background: the engine tells which free-play frames are empty only with --game; "
                        "with --demos, leave the empty frames unlabelled in the labelling tool")
    if prelabel is not None and demos is None:
        raise UserError("shots --prelabel: it drafts labels for frames from --demos; --game labels its shots itself")


@dataclass
class ShotTarget:
    """An object to frame: its class, its place, and how to tell it among the labels of a frame."""

    kind: str
    x: float
    y: float
    key: Any
    """The park's OOI id, or the thing's map position (the engine labels a stock level's things by class and place)."""


def _on_screen(objects: list[dict[str, Any]], target: ShotTarget) -> dict[str, Any] | None:
    """The target among a frame's labelled objects, or None when it is not in view."""
    for o in objects:
        if isinstance(target.key, tuple):
            if o["class"] == target.kind and abs(o["position"][0] - target.x) < 1 and abs(o["position"][1] - target.y) < 1:
                return o
        elif o.get("ooi") == target.key:
            return o
    return None


class Framing:
    """How far from an object of one class to stand for a shot. An object's size on screen falls
    as 1/distance, so the product size × distance of the shots seen so far says how far away the
    class is still `min_box` pixels; shots are taken from `near` up to that distance (within
    `far`), and small classes (the park's tires) are shot from closer than big ones, not framed
    at sizes that would only be marked crowd."""

    def __init__(self, near: float, far: float, min_box: float) -> None:
        self.near, self.far, self.min_box = near, far, min_box
        self.products: list[float] = []

    def saw(self, obj: dict[str, Any], distance: float, width: int) -> None:
        from playtester.datasets.coco import box_size

        x0, _, x1, _ = obj["box"]
        if x0 > 0 and x1 < width:  # cut by the screen's edge, it would understate the size
            self.products.append(box_size(obj["box"]) * distance)

    def distance(self, rng) -> float:
        far = self.far
        if len(self.products) >= 5:
            far = min(self.far, max(self.near * 1.5, statistics.median(self.products) / self.min_box))
        return float(rng.uniform(self.near, far))


def shot_targets(spec: str, layout: Any, classes: list[str] | None):
    """`(categories, targets, walkable(x, y), distance range, bounds)` of a game: the park's OOIs,
    or a stock level's things of `classes` (refused in one line when the level has none of a
    class); `bounds` (x0, y0, x1, y1) holds every walkable place."""
    from playtester.datasets.coco import PARK_CATEGORIES

    if layout is not None:
        kinds = [c["name"] for c in PARK_CATEGORIES]
        unknown = sorted(set(classes or ()) - set(kinds))
        if unknown:
            raise UserError(f"shots --classes {','.join(unknown)}: the park has no such OOI kind; it has {', '.join(kinds)}")
        kinds = [k for k in kinds if classes is None or k in classes]
        categories = [{"id": i + 1, "name": k, "supercategory": "ooi"} for i, k in enumerate(kinds)]
        targets = [ShotTarget(o.kind, o.x, o.y, o.id) for o in layout.oois if o.kind in kinds]
        x0, y0, x1, y1 = layout.bounds

        def walkable(x: float, y: float) -> bool:
            return x0 + 40 < x < x1 - 40 and y0 + 40 < y < y1 - 40 and bool(layout.walkable()[layout.cell_of(x, y)[::-1]])

        return categories, targets, walkable, (90.0, 520.0), layout.bounds
    from playtester.capture.games import level_of_game

    level = level_of_game(spec)
    present = sorted({t.kind for t in level.objects()})
    if not classes:
        raise UserError(f"shots --game {spec}: name the classes to label with --classes; this level has {', '.join(present)}")
    missing = [c for c in classes if c not in present]
    if missing:
        raise UserError(f"shots --classes: {spec} has no {', '.join(missing)}; it has {', '.join(present)}")
    categories = [{"id": i + 1, "name": k, "supercategory": "object"} for i, k in enumerate(classes)]
    targets = [ShotTarget(t.kind, t.x, t.y, (t.x, t.y)) for t in level.objects() if t.kind in classes]
    step = 8.0
    raster = level.walkable_raster(step)
    bx0, _, _, by1 = level.bounds

    def walkable(x: float, y: float) -> bool:
        row, col = int((by1 - y) // step), int((x - bx0) // step)
        near = raster[max(0, row - 2):row + 3, max(0, col - 2):col + 3]  # the player's 16-unit radius fits
        return 0 <= row < raster.shape[0] and 0 <= col < raster.shape[1] and near.size == 25 and bool(near.all())

    return categories, targets, walkable, (64.0, 420.0), level.bounds


def _shots_from_game(spec: str, out: Path, n: int, min_box: int, seed: int, resolution: str, classes: list[str] | None,
                     rules: str | None = None, background: int = 0):
    import numpy as np

    from playtester.capture.games import make_game
    from playtester.datasets.coco import CocoWriter, box_size

    if not spec.startswith("doom:"):
        raise UserError(f"shots --game {spec}: only Doom games label their own objects; use --demos and label the frames")
    env = make_game(spec, resolution=resolution, **({"rules": rules} if rules else {}))
    try:
        layout = env.unwrapped.scenario.layout
        categories, targets, walkable, (near, far), bounds = shot_targets(spec, layout, classes)
        inputs_checked()
        rng = np.random.default_rng(seed)
        writer = CocoWriter(out, categories)
        by_kind = {k: [t for t in targets if t.kind == k] for k in writer.counts}
        by_kind = {k: v for k, v in by_kind.items() if v}
        framing = {k: Framing(near, far, min_box) for k in by_kind}
        with progress() as bar:
            task = bar.add_task("shots", total=n + background)
            tries = 0
            while len(writer.images) < n:
                tries += 1
                if tries > 20 * n + 100:
                    raise UserError(f"shots --game {spec}: could not frame enough objects in {tries} tries; "
                                    "name classes that stand in the open, or a larger park")
                kind = min(by_kind, key=lambda k: (writer.counts[k], rng.random()))
                target = by_kind[kind][int(rng.integers(len(by_kind[kind])))]
                dist = framing[kind].distance(rng)
                around = float(rng.uniform(0, 2 * math.pi))
                x, y = target.x + dist * math.cos(around), target.y + dist * math.sin(around)
                if not walkable(x, y):
                    continue
                facing = math.degrees(math.atan2(target.y - y, target.x - x)) + float(rng.uniform(-30, 30))
                frame, info = env.reset(seed=int(rng.integers(2**31 - 1)), options={"start": (x, y, facing)})
                objects = info.get("objects", [])
                seen = _on_screen(objects, target)
                if seen is None:
                    continue
                framing[kind].saw(seen, dist, frame.shape[1])
                if box_size(seen["box"]) < min_box:
                    continue
                writer.add(frame, objects, min_box=min_box, game=spec, position=list(info["position"]), angle=info["angle"])
                bar.advance(task)
            if background:
                _background_shots(env, writer, background, targets, walkable, far, bounds, rng, spec, lambda: bar.advance(task))
        return writer.close(game=spec, seed=seed, background=background), writer.counts
    finally:
        env.close()


FREE_PLAY_STEPS = 40
"""A background shot is taken after up to this many random actions from its start."""

START_DRAWS = 1000
"""Random places drawn for a background shot's start before a level is said to have no walkable one."""


def background_start(targets: list[ShotTarget], far: float, bounds: tuple[float, float, float, float], rng,
                     anywhere: bool) -> tuple[float, float]:
    """Where a background shot's free play starts: anywhere within `bounds`, or within `far` of a
    random one of `targets` (not yet checked as walkable)."""
    if anywhere:
        x0, y0, x1, y1 = bounds
        return float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1))
    target = targets[int(rng.integers(len(targets)))]
    dist, around = float(rng.uniform(0, far)), float(rng.uniform(0, 2 * math.pi))
    return target.x + dist * math.cos(around), target.y + dist * math.sin(around)


def _background_shots(env, writer, count: int, targets: list[ShotTarget], walkable, far: float,
                      bounds: tuple[float, float, float, float], rng, spec: str, advance) -> None:
    """`count` free-play frames in which the engine labels no object of the writer's classes (none
    at all, however small), as images without boxes: the player starts facing anywhere, every
    other time within `far` of a random object (the scenery beside the objects) and otherwise
    anywhere on the level (the rooms a run walks through with no object in them: a level's
    start room, its corridors), plays up to `FREE_PLAY_STEPS` uniform random actions (it turns,
    walks, looks up and down as the random explorer does), and the last frame is kept if it is
    empty."""
    kinds = set(writer.counts)
    added = tries = 0
    while added < count:
        anywhere = added % 2 == 1
        for _ in range(START_DRAWS):
            x, y = background_start(targets, far, bounds, rng, anywhere)
            if walkable(x, y):
                break
        else:
            raise UserError(f"shots --game {spec} --background {count}: no walkable place to start free play "
                            f"{'on the level' if anywhere else 'near its objects'} in {START_DRAWS} draws; leave --background out")
        tries += 1
        if tries > 20 * count + 100:
            raise UserError(f"shots --game {spec} --background {count}: objects were in view in nearly every free-play frame "
                            f"({added} empty in {tries} tries); ask for fewer")
        frame, info = env.reset(seed=int(rng.integers(2**31 - 1)), options={"start": (x, y, float(rng.uniform(0, 360)))})
        for _ in range(int(rng.integers(FREE_PLAY_STEPS + 1))):
            frame, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                break
        if any(o["class"] in kinds for o in info.get("objects", [])) or "position" not in info:
            continue
        writer.add(frame, (), game=spec, position=list(info["position"]), angle=info["angle"], background=True)
        added += 1
        advance()


def _shots_from_demos(demos: Path, out: Path, every: int, min_box: int):
    from playtester.datasets.coco import CocoWriter
    from playtester.datasets.episodes import load_episodes

    with about("--demos"):
        episodes = load_episodes(demos)
    inputs_checked()
    writer = CocoWriter(out)
    total = sum(len(range(0, len(ep), every)) for ep in episodes)
    with progress() as bar:
        task = bar.add_task("frames", total=total)
        for ep in episodes:
            for t in range(0, len(ep), every):
                writer.add(ep.frames[t], ep.steps[t].get("objects", []), min_box=min_box, episode=ep.name, t=t)
                bar.advance(task)
    return writer.close(source=str(demos)), writer.counts


def demo_step_bytes(resolution: str) -> int:
    """An upper bound of the disk one demo step takes: its RGB frame and its steps.jsonl line."""
    width, height = frame_size(resolution)  # checked by --resolution's type already
    return 3 * width * height + 2000


def _first_new_seed(out: Path, seed: int) -> int:
    """`seed`, or after the last seed of the demos already in `out` when this run would repeat
    them (each episode's seed is in its meta.json), saying so."""
    import json

    from playtester.datasets.episodes import episode_folders

    if not out.is_dir():
        return seed
    seeds = []
    for folder in episode_folders(out):
        try:
            seeds.append(int(json.loads((folder / "meta.json").read_text())["reset"]["seed"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if not seeds or max(seeds) < seed:
        return seed
    console.print(f"{out} holds {len(seeds)} episodes with seeds up to {max(seeds)}; the new ones go on from seed "
                  f"{max(seeds) + 1}", soft_wrap=True)
    return max(seeds) + 1


def demos(
    out: Path = option(OutFolder(), ..., "--out", help="Folder to write episodes into (created; its parent must exist)."),
    game: str = option(Text(), "doom:park", "--game", help="A game with ground truth, e.g. doom:park or doom:park:7; or a Doom "
                                                           "level (doom:wad:PATH[:MAP], doom:freedoom2:MAP07, …), or several "
                                                           "levels separated by commas, the episodes shared between them."),
    behavior: str = option(Text(), ..., "--behavior", help="path (on the park: follow the pathways; on a level: walk it all, "
                                                           "frontier first, opening doors) or inspect (circle an OOI 360°); "
                                                           "with --from-video, any tag."),
    episodes: int = option(Count(1, MANY), 10, "--episodes", help="How many episodes."),
    steps: int = option(Count(1, MANY), 300, "--steps", help="Most steps per episode (inspect stops when the circle is done)."),
    seed: int = option(Seed(), 0, "--seed", help="Seed of starts and expert choices; episode i uses seed+i (after the last seed already in --out)."),
    resolution: str = option(FrameSize(), "320x240", "--resolution", help="Engine resolution."),
    dagger: Optional[Path] = option(
        InFile("policy checkpoint"), None, "--dagger", metavar="POLICY.ckpt",
        help="DAgger: this trained policy drives (from its own training starts) and the expert labels each "
             "state with what it would have done. Write them to a folder of their own, then train on the demos and it "
             "(train policy --demos DEMOS --demos THIS --init POLICY.ckpt).",
    ),
    beta: float = option(Number(0.0, 1.0), 0.0, "--beta", help="--dagger: the share of steps the expert drives instead of the policy."),
    video: bool = typer.Option(False, "--video", help="Also render each episode to NAME.mp4 beside it: footage whose actions are known."),
    from_video: Optional[Path] = option(
        InFile("video file or folder of videos", folder_ok=True), None, "--from-video",         help="Label gameplay video instead of playing: each video becomes demo episodes whose actions the --idm model "
             "infers (--behavior tags them, --steps cuts long ones, --resolution is the stored frame size).",
    ),
    idm: Optional[Path] = option(InFile("encoder checkpoint"), None, "--idm", help="--from-video: the encoder checkpoint whose inverse-dynamics head labels the frames."),
    fps: float = option(Number(0.0, 1000.0, above=True), 35 / 4, "--fps", help="--from-video: the control rate to resample to (the encoder's demos': 8.75 on ViZDoom)."),
    key_map: Optional[str] = option(NameOrFile(("default",), "key map YAML"), None, "--key-map", help="--from-video: the key map YAML of the encoder's actions (default: the default map)."),
    flag_below: float = option(Number(0.0, 1.0), 0.5, "--flag-below", help="--from-video: flag steps whose label's probability is below this (low_confidence)."),
    cluster: Optional[str] = option(Text(), None, "--cluster", help="Record the episodes in Ray tasks: ray (a local Ray), auto (this machine's Ray cluster) or ray://HOST:PORT; this process alone writes --out (needs pip install -e \".\\[cluster]\")."),
    rules: Optional[str] = option(Choice("immortal", "no-monsters", "play"), None, "--rules", help=RULES_HELP),
) -> None:
    """Record scripted-expert demos: ordinary demo episodes, as if a tester had played them.

    With --dagger, the policy drives and the expert labels: episodes that teach the policy to
    come back to the path or the object after its own mistakes (training uses the labels).
    With --from-video, recorded gameplay becomes demos: the encoder's inverse-dynamics model
    labels each step with the action it infers, its probability, and `label_source: idm`.
    """
    if cluster is not None:
        from playtester.tester.cluster import check_cluster

        check_cluster(cluster)
        if dagger is not None or from_video is not None:
            raise UserError(f"--cluster {cluster}: --dagger and --from-video run on this machine only; leave out --cluster")
    if from_video is not None:
        from playtester.commands.video import demos_from_video

        return demos_from_video(from_video, idm, out, behavior=behavior, fps=fps, key_map=key_map, size=resolution,
                                steps=steps, flag_below=flag_below)
    if idm is not None:
        raise UserError("--idm labels video: pass --from-video FILE|FOLDER too")
    _expert_demos(out, game, behavior=behavior, episodes=episodes, steps=steps, seed=seed, resolution=resolution,
                  dagger=dagger, beta=beta, video=video, cluster=cluster, rules=rules)


def _expert_demos(out: Path, game: str, *, behavior: str, episodes: int, steps: int, seed: int, resolution: str,
                  dagger: Path | None, beta: float, video: bool, cluster: str | None, rules: str | None) -> None:
    """`demos` by the scripted experts (`imitation/demos.py`), here or in Ray tasks."""
    from playtester.capture.rules import check_rules
    from playtester.datasets.episodes import episode_folders
    from playtester.imitation.demos import record_demos

    levels = [g.strip() for g in game.split(",") if g.strip()]
    for level in levels:
        check_rules(rules, level)
    rules = check_rules(rules, levels[0]) if levels else None
    _check_demo_options(out, behavior, episodes, steps, resolution, dagger, beta)
    seed = _first_new_seed(out, seed)

    def recorded() -> bool:  # until an episode is written, a refusal leaves no folder
        return out.is_dir() and bool(episode_folders(out))

    if cluster is not None:
        options = {"game": game, "behavior": behavior, "steps": steps, "resolution": resolution, "video": video,
                   "rules": rules}
        inputs_checked()
        with new_folder(out, kept=recorded):
            return _demos_on_cluster(cluster, out, episodes, seed, options)
    with new_folder(out, kept=recorded), progress() as bar:
        stats = record_demos(out, game, behavior=behavior, episodes=episodes, steps=steps, seed=seed,
                             resolution=resolution, rules=rules, video=video, dagger=dagger, beta=beta,
                             checked=inputs_checked,
                             progress=lambda title: functools.partial(bar.advance, bar.add_task(title, total=episodes)))
    _say_demo_stats(behavior, episodes, out, stats, dagger=dagger is not None)


def _check_demo_options(out: Path, behavior: str, episodes: int, steps: int, resolution: str, dagger: Path | None,
                        beta: float) -> None:
    if behavior not in ("path", "inspect"):
        raise UserError(f"--behavior {behavior!r}: use path or inspect (any tag with --from-video)")
    if beta and dagger is None:
        raise UserError(f"--beta {beta}: it is the expert's share of the driving in DAgger episodes; pass --dagger POLICY.ckpt too")
    check_free_disk(out, episodes * steps * demo_step_bytes(resolution), f"--episodes {episodes} × --steps {steps} at {resolution}")
    if dagger is not None:
        from playtester.perception.training import read_checkpoint

        with about("--dagger"):  # a bad checkpoint is refused before the game starts
            read_checkpoint(dagger, "policy")


def _demos_on_cluster(cluster: str, out: Path, episodes: int, seed: int, options: dict[str, Any]) -> None:
    from playtester.tester.cluster import demos_on_cluster

    with progress() as bar:
        task = bar.add_task(f"{options['behavior']} demos (Ray)", total=episodes)
        written = demos_on_cluster(cluster, out, episodes, seed, options, advance=lambda: bar.advance(task))
    console.print(f"wrote {len(written)} {options['behavior']} episodes to {out} (recorded by Ray tasks, "
                  f"seeds {seed}..{seed + episodes - 1})")


def _say_demo_stats(behavior: str, episodes: int, out: Path, stats: list[dict[str, float]], *, dagger: bool) -> None:
    kind = f"{behavior} {'DAgger ' if dagger else ''}episodes"
    if behavior == "path" and "on_path" not in stats[0]:
        walked = sum(s["cells"] for s in stats) / len(stats)
        console.print(f"wrote {episodes} {kind} to {out}; {walked:.0f} cells of 64 map units walked on average")
    elif behavior == "path":
        share = sum(s["on_path"] for s in stats) / len(stats)
        walked = sum(s["cells"] for s in stats) / len(stats)
        console.print(f"wrote {episodes} {kind} to {out}; {share:.0%} of steps on pathways, {walked:.0f} cells walked on average")
    else:
        deg = sum(s["degrees"] for s in stats) / len(stats)
        seen = sum(s["on_screen"] for s in stats) / len(stats)
        console.print(f"wrote {episodes} {kind} to {out}; circled {deg:.0f}° on average, OOI on screen {seen:.0%} of circling steps")
