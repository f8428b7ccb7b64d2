"""A Doom level's part of the report: its doors and what became of each, the sectors reachable in
its geometry that no one reached, the deaths (under `--rules play`), and the softlocks (the
softlock oracle's findings: the sectors of each trap filled in red on the coverage map, the
player's place crossed).

Every door (`LevelGraph.doors`) is in one of five states, drawn on the coverage map in its colour:

- `opened`: the player got into its sector (it opened, by hand, a switch or a walk-over line);
- `no effect`: used, then walked into without opening (the door oracle's finding);
- `pressed`: used, not got into (the player went elsewhere);
- `reached`: the player came within `NEAR` map units of it and did not use it;
- `never reached`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

NEAR = 96.0
"""Map units within which a door counts as reached."""


@dataclass(frozen=True)
class DoorState:
    key: str
    label: str
    colour: tuple[int, int, int]


DOOR_STATES = (
    DoorState("no effect", "door used, then walked into, and it did not open (a finding)", (220, 30, 30)),
    DoorState("opened", "door opened (the player went through)", (40, 190, 60)),
    DoorState("pressed", "door used, not gone through", (245, 170, 20)),
    DoorState("reached", "door reached, not used", (60, 120, 220)),
    DoorState("never reached", "door never reached", (150, 150, 150)),
)
DOOR_STATE = {s.key: s for s in DOOR_STATES}
UNREACHED = (200, 40, 160)
"""Outline of a sector reachable in the geometry that no one reached."""
TRAP = (225, 30, 30)
"""Fill (half seen through) of a softlock's sectors, and the cross where the player was."""


def positions(trajectory: list[dict[str, Any]]) -> np.ndarray:
    """`N × 2` of every placed step."""
    pts = [r["position"][:2] for r in trajectory if r.get("position")]
    return np.array(pts, dtype=float).reshape(-1, 2)


def raster_cells(graph, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(rows, cols)` of points in the graph's sector raster, clipped to it."""
    from playtester.capture.level_graph import RASTER_UNITS

    x0, _, _, y1 = graph.level.bounds
    h, w = graph.raster.shape
    rows = ((y1 - xy[:, 1]) // RASTER_UNITS).astype(int).clip(0, h - 1)
    cols = ((xy[:, 0] - x0) // RASTER_UNITS).astype(int).clip(0, w - 1)
    return rows, cols


def door_states(graph, trajectory: list[dict[str, Any]], findings: list[dict[str, Any]]) -> dict[int, str]:
    """Each door sector's state (`DOOR_STATES` key)."""
    import cv2

    from playtester.capture.level_graph import RASTER_UNITS

    xy = positions(trajectory)
    rows, cols = raster_cells(graph, xy)
    visited = set(np.unique(graph.raster[rows, cols]).tolist()) if len(xy) else set()
    near = np.zeros(graph.raster.shape, dtype=np.uint8)
    near[rows, cols] = 1
    near = cv2.dilate(near, np.ones((2 * int(NEAR // RASTER_UNITS) + 1,) * 2, np.uint8)) > 0
    used_lines = {int(r["used"]) for r in trajectory if r.get("used") is not None}
    no_effect = {int(f["details"]["sector"]) for f in findings if f.get("kind") == "door" and "sector" in (f.get("details") or {})}
    states = {}
    for door in graph.doors:
        if door.sector in visited:
            states[door.sector] = "opened"
        elif door.sector in no_effect:
            states[door.sector] = "no effect"
        elif used_lines & set(door.lines):
            states[door.sector] = "pressed"
        elif near[graph.raster == door.sector].any():
            states[door.sector] = "reached"
        else:
            states[door.sector] = "never reached"
    return states


def unreached_sectors(graph, trajectory: list[dict[str, Any]], limit: int = 50,
                      past_monsters: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Sectors reachable from the start in the geometry, where the player can stand, that no step
    was in: biggest first (their area in 64-unit cells), at most `limit`. `why` says "past a
    standing monster" for one mostly in `past_monsters` (64-unit cells, row 0 south: under
    `immortal` a monster stands in the only way there), else nothing."""
    from playtester.capture.level_graph import RASTER_UNITS

    xy = positions(trajectory)
    rows, cols = raster_cells(graph, xy)
    visited = set(np.unique(graph.raster[rows, cols]).tolist()) if len(xy) else set()
    try:
        reachable = graph.reachable()
    except Exception:  # no player start: nothing is reachable from it  # noqa: BLE001
        return []
    stand = graph.walkable_sectors()
    areas = np.bincount(graph.raster[graph.raster >= 0].ravel(), minlength=len(graph.level.sectors))
    x0, y0, _, y1 = graph.level.bounds
    out = []
    for s in sorted(reachable - visited, key=lambda s: -areas[s]):
        if not stand[s] or areas[s] == 0:
            continue
        r, c = np.nonzero(graph.raster == s)
        sector = graph.level.sectors[s]
        behind = past_monsters is not None and bool(past_monsters[
            ((y1 - (r + 0.5) * RASTER_UNITS - y0) // 64.0).astype(int).clip(0, past_monsters.shape[0] - 1),
            ((c + 0.5) * RASTER_UNITS // 64.0).astype(int).clip(0, past_monsters.shape[1] - 1)].mean() > 0.5)
        out.append({"sector": int(s), "cells": round(float(areas[s]) * RASTER_UNITS**2 / 64.0**2, 1),
                    "x": round(float(x0 + (c.mean() + 0.5) * RASTER_UNITS)), "y": round(float(y1 - (r.mean() + 0.5) * RASTER_UNITS)),
                    "floor": sector.floor, "ceiling": sector.ceiling, "why": "past a standing monster" if behind else ""})
    return out[:limit]


def level_summary(graph, trajectory: list[dict[str, Any]], findings: list[dict[str, Any]],
                  past_monsters: np.ndarray | None = None) -> dict[str, Any]:
    """`doors` (counts by state and each door), `unreached_sectors` (`past_monsters`: see there),
    `deaths`, `level_exits`."""
    states = door_states(graph, trajectory, findings)
    doors = [{"sector": d.sector, "lines": list(d.lines), "manual": d.manual, "key": d.key, "state": states[d.sector]}
             for d in graph.doors]
    deaths = [{"episode": r["episode"], "t": r["t"], **r["death"]} for r in trajectory if r.get("death")]
    return {"doors": {"total": len(doors), **{s.key: sum(d["state"] == s.key for d in doors) for s in DOOR_STATES},
                      "each": doors},
            "unreached_sectors": unreached_sectors(graph, trajectory, past_monsters=past_monsters),
            "deaths": deaths, "level_exits": sum(1 for r in trajectory if r.get("level_exit")),
            "softlocks": softlocks(findings)}


def softlocks(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The softlock oracle's findings: where (position, the trap's sectors), why, the finding's folder
    and its replay command (a start inside a trap is listed with no position)."""
    out = []
    for f in findings:
        if f.get("kind") != "softlock":
            continue
        d = f.get("details") or {}
        out.append({"episode": f["episode"], "step": f["step"], "position": d.get("position"), "region": d.get("region", []),
                    "cause": d.get("cause", f["message"]), "at_start": bool(d.get("at_start")), "folder": f.get("folder"),
                    "replay": f.get("replay")})
    return out


def draw_level(image: np.ndarray, view, graph, level: dict[str, Any]) -> np.ndarray:
    """The coverage map with every door's lines in its state's colour, the unreached sectors outlined and
    each softlock's sectors filled, the player's place crossed."""
    import cv2

    img = image.copy()
    x0, _, _, y1 = graph.level.bounds
    from playtester.capture.level_graph import RASTER_UNITS

    for item in level["unreached_sectors"]:
        mask = (graph.raster == item["sector"]).astype(np.uint8)
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        for contour in contours:
            xs = x0 + (contour[:, 0, 0] + 0.5) * RASTER_UNITS
            ys = y1 - (contour[:, 0, 1] + 0.5) * RASTER_UNITS
            px, py = view.to_pixel(xs, ys)
            cv2.polylines(img, [np.stack([px, py], 1).astype(np.int32).reshape(-1, 1, 2)], True, UNREACHED, 2)
    for trap in level.get("softlocks", []):
        if trap["at_start"] or not trap["region"]:
            continue
        mask = np.isin(graph.raster, trap["region"]).astype(np.uint8)
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        shapes = []
        for contour in contours:
            xs = x0 + (contour[:, 0, 0] + 0.5) * RASTER_UNITS
            ys = y1 - (contour[:, 0, 1] + 0.5) * RASTER_UNITS
            px, py = view.to_pixel(xs, ys)
            shapes.append(np.stack([px, py], 1).astype(np.int32).reshape(-1, 1, 2))
        filled = img.copy()
        cv2.fillPoly(filled, shapes, TRAP)
        img = cv2.addWeighted(filled, 0.45, img, 0.55, 0)
        cv2.polylines(img, shapes, True, TRAP, 2)
        if trap["position"]:
            (px,), (py,) = view.to_pixel(np.array([trap["position"][0]]), np.array([trap["position"][1]]))
            cv2.drawMarker(img, (int(px), int(py)), (0, 0, 0), cv2.MARKER_TILTED_CROSS, 14, 3)
    for door in level["doors"]["each"]:
        colour = DOOR_STATE[door["state"]].colour
        for i, ld in enumerate(graph.level.linedefs):
            if door["sector"] in (ld.front, ld.back) and ld.front != ld.back:
                (px1, px2), (py1, py2) = view.to_pixel(graph.line_ends[i][[0, 2]], graph.line_ends[i][[1, 3]])
                cv2.line(img, (int(px1), int(py1)), (int(px2), int(py2)), colour, 3)
    return img
