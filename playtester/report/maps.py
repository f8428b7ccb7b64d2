"""The report's maps: what a run is drawn on, its coverage, and the state of every object.

A run is drawn on the built-in park's own map, on any Doom level's geometry read from its WAD
(`playtester.capture.level_map`), or on a window game's studio map (`--map`, `--map-bounds`,
`--oois`). Coverage is the share of walkable cells (of `MapSource.cell` map units) visited, per
episode and over the run. Every object of interest is in one of four states, each drawn with
its own colour and shape and named in the report's legend:

- `bug`: an oracle found a bug on it (the texture oracle, or a finding that names it);
- `failed`: tested, but the test policy did not perform the behaviour (its JSD over the
  threshold): the game may be fine, the test did not happen as asked;
- `passed`: tested, no bug found;
- `untested`: never tested.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from playtester.errors import UserError
from playtester.capture.park.birdseye import BirdsEye, render_birdseye
from playtester.report.coverage import OccupancyGrid

GREEN, RED, GREY, AMBER, TRACE = (40, 190, 60), (220, 30, 30), (150, 150, 150), (245, 170, 20), (230, 20, 20)
VISITED, THING = (250, 215, 80), (40, 70, 160)
LEVEL_CELL = 64.0
"""Coverage cell of a Doom level, in map units (two player widths; the level walker's `CELL`)."""


@dataclass(frozen=True)
class ObjectState:
    key: str
    label: str
    colour: tuple[int, int, int]
    shape: str
    """`square`, `triangle` or `circle`, drawn filled with a black outline."""


STATES = (
    ObjectState("bug", "bug found by an oracle", RED, "square"),
    ObjectState("failed", "behaviour test failed (no bug known)", AMBER, "triangle"),
    ObjectState("passed", "tested, no bug found", GREEN, "circle"),
    ObjectState("untested", "not tested", GREY, "circle"),
)
STATE_BY_KEY = {s.key: s for s in STATES}


@dataclass
class MapSource:
    """The picture to draw on, and what it knows of the game."""

    view: BirdsEye
    oois: list[dict[str, Any]]
    """The objects under test: `id`, `kind`, `x`, `y` (and on the park `bug`, `reachable`)."""
    pathway_mask: np.ndarray | None
    """Preferred cells of the coverage grid (row 0 south), when known."""
    cell: float
    grid_bounds: tuple[float, float, float, float] | None = None
    """World bounds of the coverage grid; default: the picture's."""
    walkable_mask: np.ndarray | None = None
    """Walkable cells of the coverage grid, when known."""
    reachable_mask: np.ndarray | None = None
    """Walkable cells reachable from the start (a Doom level's geometry: doors open, lifts move; under
    `immortal`, not past a monster standing in the only way), when known."""
    past_monsters: np.ndarray | None = None
    """A Doom level's cells that its geometry reaches but a monster standing in the way keeps
    everyone from under `immortal` (not in `reachable_mask`)."""
    graph: Any = None
    """A Doom level's `LevelGraph`, for its doors and sectors."""
    things: list[dict[str, Any]] = field(default_factory=list)
    """Every object placed on the level (drawn small on the coverage map)."""
    note: str = ""
    """What the report should say about the objects (e.g. what the detector knows of this level)."""

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        return self.grid_bounds or self.view.bounds


def enlarged(view: BirdsEye, min_side: int = 640) -> BirdsEye:
    """The same map scaled up by a whole factor (nearest pixel) until its longer side reaches
    `min_side`, so that marks and ids drawn on it stay legible."""
    factor = int(np.ceil(min_side / max(view.image.shape[:2])))
    if factor <= 1:
        return view
    h, w = view.image.shape[:2]
    return BirdsEye(cv2.resize(view.image, (w * factor, h * factor), interpolation=cv2.INTER_NEAREST), view.bounds)


def detector_classes(config: dict[str, Any]) -> list[str] | None:
    """The classes of the run's detector checkpoint, or None without one (or when it cannot be read)."""
    path = config.get("detector")
    if not path or path == "ground-truth" or not Path(path).is_file():
        return None
    from playtester.perception.training import read_checkpoint

    try:
        return list(read_checkpoint(path, "detector")[0]["classes"])
    except (UserError, KeyError, TypeError):
        return None


def map_source(run: Path, config: dict[str, Any]) -> tuple[MapSource | None, str]:
    """What the run is drawn on, or None and the reason there is no map."""
    game = str(config["game"])
    if game.startswith("doom:park"):
        from playtester.capture.games import park_config_from_spec
        from playtester.capture.park.build import build_park

        layout = build_park(park_config_from_spec(game)).layout()
        oois = [{"id": o.id, "kind": o.kind, "x": o.x, "y": o.y, "bug": o.bug, "reachable": o.reachable} for o in layout.oois]
        return MapSource(enlarged(render_birdseye(layout, oois=False)), oois, layout.pathway_mask, float(layout.config.cell),
                         walkable_mask=layout.walkable()), ""
    if game.startswith("doom:"):
        return level_source(game, config)
    if config.get("map") and config.get("map_bounds"):
        path = Path(config["map"])
        image = cv2.imread(str(path if path.is_absolute() else run / path))
        if image is None:
            raise UserError(f"run config: map image {config['map']} is missing or unreadable")
        bounds = tuple(float(v) for v in config["map_bounds"])
        oois = json.loads(Path(config["oois"]).read_text()) if config.get("oois") else []
        cell = (bounds[2] - bounds[0]) / 40
        return MapSource(enlarged(BirdsEye(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), bounds)), oois, None, cell), ""
    return None, "this game gives no map: a window game's run draws one with --map and --map-bounds"


def level_source(game: str, config: dict[str, Any]) -> tuple[MapSource | None, str]:
    """A Doom level's own geometry; its objects under test are the things of the detector's classes."""
    from playtester.capture.games import level_of_game
    from playtester.capture.level_map import render_level

    try:
        level = level_of_game(game)
        view = render_level(level)
    except UserError as e:
        return None, str(e)
    things = [{"id": t.id, "kind": t.kind, "x": t.x, "y": t.y} for t in level.objects()]
    classes = detector_classes(config) if config.get("tester") else None
    oois = [t for t in things if classes is not None and t["kind"] in classes]
    if not config.get("tester"):
        note = "no test policy: the run tested no object"
    elif classes is None:
        note = "the run's detector could not be read: its objects cannot be placed on the map"
    elif not oois:
        note = (f"the detector knows {', '.join(classes)}; this level has none of them, so nothing could be tested. "
                f"Train one on this level's objects: playtester shots --game {game} --classes …")
    else:
        present = sorted({o["kind"] for o in oois})
        note = f"objects under test: the {len(oois)} things of this level the detector knows ({', '.join(present)})"
    from playtester.capture.level_graph import LevelGraph
    from playtester.capture.level_walk import past_monsters

    rules = config.get("rules") or "immortal"
    graph = LevelGraph(level, guards=rules == "immortal")  # monsters stand still: a key under one is out of reach
    try:
        reachable = graph.reachable_cells(LEVEL_CELL)
        behind = past_monsters(graph, rules)  # and so are the cells past one that stands in the only way
    except UserError:  # no player start: nothing is reachable from it
        reachable = behind = None
    return MapSource(view, oois, None, LEVEL_CELL, grid_bounds=level.bounds, walkable_mask=level.walkable_cells(LEVEL_CELL),
                     reachable_mask=None if reachable is None else reachable & ~behind, past_monsters=behind, graph=graph,
                     things=things, note=note), ""


# -- coverage ------------------------------------------------------------------------------------

def positions_by_episode(trajectory: list[dict[str, Any]]) -> dict[int, list[tuple[float, float]]]:
    out: dict[int, list[tuple[float, float]]] = {}
    for r in trajectory:
        if r.get("position"):
            out.setdefault(int(r["episode"]), []).append((float(r["position"][0]), float(r["position"][1])))
    return out


def grid_of(src: MapSource, points: list[tuple[float, float]]) -> OccupancyGrid:
    grid = OccupancyGrid(src.bounds, src.cell)
    for x, y in points:
        grid.visit(x, y)
    return grid


def coverage_summary(src: MapSource, trajectory: list[dict[str, Any]], episodes: int) -> dict[str, Any]:
    """Shares of the map visited: the whole grid, the pathways, the walkable cells and (on a Doom
    level) the walkable cells reachable from the start, per episode and cumulated over the episodes."""
    by_episode = positions_by_episode(trajectory)
    grid = grid_of(src, [p for pts in by_episode.values() for p in pts])
    out: dict[str, Any] = {"cell_size": src.cell, "area_share": grid.share()}
    if src.pathway_mask is not None:
        out["pathway_share"] = grid.share(src.pathway_mask)
    # per episode and over the run: of the walkable cells (and of those reachable from the start)
    # where the map knows them, else (a studio's map) of the whole map
    visits = [grid_of(src, by_episode.get(e, [])).visited for e in range(episodes)]
    masks = ((("walkable", src.walkable_mask), ("reachable", src.reachable_mask)) if src.walkable_mask is not None
             else (("area", np.ones_like(grid.visited)),))
    for name, mask in masks:
        if mask is None:
            continue
        if name != "area":
            out[f"{name}_cells"] = int(mask.sum())
            out[f"{name}_share"] = grid.share(mask)
        seen = np.zeros_like(mask)
        per, cumulative = [], []
        for visited in visits:
            per.append(float((visited & mask).sum() / max(1, mask.sum())))
            seen |= visited
            cumulative.append(float((seen & mask).sum() / max(1, mask.sum())))
        out[f"{name}_share_per_episode"] = per
        out[f"{name}_share_cumulative"] = cumulative
    return out


def coverage_map(src: MapSource, trajectory: list[dict[str, Any]]) -> np.ndarray:
    """The map with visited walkable cells (every visited cell on a studio's map) shaded yellow,
    every episode's trace in red and the level's objects as small blue dots."""
    img = src.view.image.copy()
    by_episode = positions_by_episode(trajectory)
    visited = grid_of(src, [p for pts in by_episode.values() for p in pts]).visited
    if src.walkable_mask is not None:
        visited &= src.walkable_mask
    if visited.any():
        overlay = img.copy()
        x0, y0 = src.bounds[:2]
        for row, col in np.argwhere(visited):
            (px0, px1), (py0, py1) = src.view.to_pixel([x0 + col * src.cell, x0 + (col + 1) * src.cell],
                                                       [y0 + (row + 1) * src.cell, y0 + row * src.cell])
            cv2.rectangle(overlay, (int(px0), int(py0)), (int(px1) - 1, int(py1) - 1), VISITED, -1)
        img = cv2.addWeighted(overlay, 0.45, img, 0.55, 0)
    for t in src.things:
        px, py = src.view.to_pixel(t["x"], t["y"])
        cv2.circle(img, (int(px), int(py)), 2, THING, -1)
    for points in by_episode.values():
        xs, ys = src.view.to_pixel([p[0] for p in points], [p[1] for p in points])
        pts = np.stack([xs, ys], 1).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(img, [pts], False, TRACE, 1, cv2.LINE_AA)
    return img


# -- objects -------------------------------------------------------------------------------------

def passed(test: dict[str, Any]) -> bool:
    """A test passes when the behaviour was executed well and the texture oracle found no bug."""
    texture = test.get("texture") or {}
    return bool(test.get("success", True)) and not texture.get("bug")


def object_states(tests: list[dict[str, Any]], findings: list[dict[str, Any]]) -> dict[Any, str]:
    """The state (`STATES` key) of every tested object known by id: a bug any oracle found wins,
    then a test that passed, else the behaviour test failed. Where the game's labels scored a
    test, it counts for the object they saw in the tested box, and a phantom test for none."""
    states: dict[Any, str] = {}
    for t in tests:
        if t.get("target") == "phantom":
            continue  # the game's labels say no object stood in the tested box
        ooi = t.get("target_ooi", t["ooi"])  # scored by the labels: the object really tested
        if isinstance(ooi, str) and ("@" in ooi or "#" in ooi):
            continue  # told apart by sight, or an object the level's list lacks: no place on the map
        if (t.get("texture") or {}).get("bug"):
            states[ooi] = "bug"
        elif states.get(ooi) != "bug":
            states[ooi] = "passed" if t.get("success", True) or states.get(ooi) == "passed" else "failed"
    for f in findings:
        details = f.get("details") or {}
        if details.get("target") == "phantom":
            continue
        ooi = details.get("target_ooi", details.get("ooi"))
        if ooi is not None and not (isinstance(ooi, str) and ("@" in ooi or "#" in ooi)):
            states[ooi] = "bug"
    return states


def draw_mark(img: np.ndarray, centre: tuple[int, int], r: int, state: ObjectState) -> None:
    x, y = centre
    if state.shape == "square":
        pts = np.array([[x - r, y - r], [x + r, y - r], [x + r, y + r], [x - r, y + r]], np.int32)
    elif state.shape == "triangle":
        pts = np.array([[x, y - r - 1], [x + r + 1, y + r], [x - r - 1, y + r]], np.int32)
    else:
        cv2.circle(img, centre, r, state.colour, -1)
        cv2.circle(img, centre, r, (0, 0, 0), 1)
        return
    cv2.fillPoly(img, [pts], state.colour)
    cv2.polylines(img, [pts], True, (0, 0, 0), 1)


def ooi_map(src: MapSource, states: dict[Any, str]) -> np.ndarray:
    """Every object under test drawn by its state (`STATES`), its id beside it."""
    img = src.view.image.copy()
    r = max(4, max(img.shape[:2]) // 110)
    order = {s.key: i for i, s in enumerate(reversed(STATES))}  # untested first, bugs drawn on top
    for o in sorted(src.oois, key=lambda o: order[states.get(o["id"], "untested")]):
        state = STATE_BY_KEY[states.get(o["id"], "untested")]
        px, py = (int(v) for v in src.view.to_pixel(o["x"], o["y"]))
        draw_mark(img, (px, py), r, state)
        for colour, thickness in (((0, 0, 0), 3), ((255, 255, 255), 1)):  # white on a black edge: legible on any ground
            cv2.putText(img, str(o["id"]), (px + r + 2, py + 5), cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, thickness, cv2.LINE_AA)
    return img
