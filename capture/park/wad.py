"""The park as a playable PWAD: a UDMF `TEXTMAP` (the engine builds the nodes), DECORATE, sprites.

One sector per terrain type; lines only where two terrains meet, along the park's edge, and for
invisible walls. Colinear unit edges are merged into long lines wherever no other line meets the
vertex between them, which keeps the map small and the node build quick.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass

from playtester.capture.park.layout import BRIDGE, GRASS, PATH, WATER, ParkLayout
from playtester.capture.park.sprites import decorate_text, doomednum, sprite_lumps

MAP_NAME = "MAP01"

SECTORS = {
    GRASS: dict(heightfloor=0, texturefloor="GRASS1"),
    PATH: dict(heightfloor=0, texturefloor="FLAT5_4"),
    WATER: dict(heightfloor=-16, texturefloor="FWATER1"),
    BRIDGE: dict(heightfloor=0, texturefloor="FLAT5_2"),
}
CEILING = 256
EDGE_WALL = "ZIMMER8"
WATER_BANK = "ROCK1"


@dataclass(frozen=True)
class _Side:
    """What is on each side of a unit edge: front terrain, back terrain (None = outside), wall."""

    front: int
    back: int | None
    blocking: bool


def unit_edges(layout: ParkLayout) -> dict[tuple[int, int, int, int], _Side]:
    """Every unit grid edge that needs a line, oriented so that its front side is on its right."""
    grid = layout.grid
    rows, cols = grid.shape
    walls = layout.wall_set()
    edges: dict[tuple[int, int, int, int], _Side] = {}

    def terrain(c: int, r: int) -> int | None:
        return int(grid[r, c]) if 0 <= c < cols and 0 <= r < rows else None

    # horizontal edges at y = r, between cell (c, r-1) below and (c, r) above; direction +x has
    # its right side below
    for r in range(rows + 1):
        for c in range(cols):
            below, above = terrain(c, r - 1), terrain(c, r)
            key = (c, r, c + 1, r)
            edges_add(edges, key, below, above, key in walls)
    # vertical edges at x = c, between (c-1, r) left and (c, r) right; direction +y has its
    # right side to the right
    for c in range(cols + 1):
        for r in range(rows):
            left, right = terrain(c - 1, r), terrain(c, r)
            key = (c, r, c, r + 1)
            edges_add(edges, key, right, left, key in walls)
    return edges


def edges_add(edges: dict, key: tuple[int, int, int, int], right: int | None, left: int | None, wall: bool) -> None:
    """Record the line on one edge, if it needs one; `right`/`left` as seen along `key`."""
    if right is None and left is None:
        return
    if right is None:  # outside on the right: flip so the inside is the front
        x0, y0, x1, y1 = key
        edges[(x1, y1, x0, y0)] = _Side(front=left, back=None, blocking=True)
        return
    if left is None:
        edges[key] = _Side(front=right, back=None, blocking=True)
        return
    water_edge = (right == WATER) != (left == WATER)
    if right == left and not wall:
        return
    edges[key] = _Side(front=right, back=left, blocking=wall or water_edge)


def merged_lines(edges: dict[tuple[int, int, int, int], _Side]) -> list[tuple[tuple[int, int], tuple[int, int], _Side]]:
    """Join colinear unit edges with the same sides through vertices where nothing else meets."""
    degree: dict[tuple[int, int], int] = defaultdict(int)
    for x0, y0, x1, y1 in edges:
        degree[(x0, y0)] += 1
        degree[(x1, y1)] += 1
    by_start = {(k[0], k[1], k[2] - k[0], k[3] - k[1]): (k, s) for k, s in edges.items()}
    used: set[tuple[int, int, int, int]] = set()
    lines = []
    for key, side in edges.items():
        if key in used:
            continue
        x0, y0, x1, y1 = key
        dx, dy = x1 - x0, y1 - y0
        # walk backwards to the start of the run
        while degree[(x0, y0)] == 2:
            prev = by_start.get((x0 - dx, y0 - dy, dx, dy))
            if prev is None or prev[1] != side or prev[0] in used:
                break
            x0, y0 = x0 - dx, y0 - dy
        start = (x0, y0)
        cx, cy = x0, y0
        while True:
            nxt = by_start.get((cx, cy, dx, dy))
            if nxt is None or nxt[1] != side or nxt[0] in used:
                break
            used.add(nxt[0])
            cx, cy = cx + dx, cy + dy
            if degree[(cx, cy)] != 2:
                break
        lines.append((start, (cx, cy), side))
    return lines


def textmap(layout: ParkLayout) -> str:
    """The UDMF TEXTMAP of a park."""
    cell = layout.config.cell
    out = ['namespace = "zdoom";']
    sector_index = {}
    for terrain, props in SECTORS.items():
        sector_index[terrain] = len(sector_index)
        out.append(
            f'sector {{ heightfloor = {props["heightfloor"]}; heightceiling = {CEILING}; '
            f'texturefloor = "{props["texturefloor"]}"; textureceiling = "F_SKY1"; lightlevel = 208; }}'
        )
    vertices: dict[tuple[int, int], int] = {}
    vertex_lines, side_lines, line_lines = [], [], []

    def vertex(p: tuple[int, int]) -> int:
        if p not in vertices:
            vertices[p] = len(vertices)
            vertex_lines.append(f"vertex {{ x = {p[0] * cell}.0; y = {p[1] * cell}.0; }}")
        return vertices[p]

    def sidedef(terrain: int, middle: str = "-", bottom: str = "-") -> int:
        side_lines.append(
            f'sidedef {{ sector = {sector_index[terrain]}; texturemiddle = "{middle}"; texturebottom = "{bottom}"; }}'
        )
        return len(side_lines) - 1

    for a, b, side in merged_lines(unit_edges(layout)):
        v1, v2 = vertex(a), vertex(b)
        if side.back is None:
            front = sidedef(side.front, middle=EDGE_WALL)
            line_lines.append(f"linedef {{ v1 = {v1}; v2 = {v2}; sidefront = {front}; blocking = true; }}")
            continue
        bank = WATER_BANK if WATER in (side.front, side.back) else "-"
        front = sidedef(side.front, bottom=bank)
        back = sidedef(side.back, bottom=bank)
        flags = "twosided = true;" + (" blocking = true;" if side.blocking else "")
        line_lines.append(f"linedef {{ v1 = {v1}; v2 = {v2}; sidefront = {front}; sideback = {back}; {flags} }}")

    out += vertex_lines + side_lines + line_lines
    start = layout.starts[0]
    everyone = "skill1 = true; skill2 = true; skill3 = true; skill4 = true; skill5 = true; single = true; coop = true; dm = true;"
    out.append(f"thing {{ x = {start.x:.1f}; y = {start.y:.1f}; type = 1; angle = 0; {everyone} }}")
    for o in layout.oois:
        out.append(f"thing {{ x = {o.x:.1f}; y = {o.y:.1f}; type = {doomednum(o.kind, o.bug)}; angle = 90; {everyone} }}")
    return "\n".join(out) + "\n"


def pwad(lumps: list[tuple[str, bytes]]) -> bytes:
    """A PWAD file from `(name, data)` lumps, in order."""
    directory, body, offset = [], [], 12
    for name, data in lumps:
        if len(name) > 8:
            raise ValueError(f"lump name {name!r} is longer than 8 characters")
        directory.append(struct.pack("<ii8s", offset, len(data), name.encode("ascii")))
        body.append(data)
        offset += len(data)
    return b"PWAD" + struct.pack("<ii", len(lumps), offset) + b"".join(body) + b"".join(directory)


def park_wad(layout: ParkLayout) -> bytes:
    """The whole scenario: map, actors and sprites in one PWAD."""
    lumps = [(MAP_NAME, b""), ("TEXTMAP", textmap(layout).encode("ascii")), ("ENDMAP", b"")]
    lumps.append(("DECORATE", decorate_text().encode("ascii")))
    lumps += [("S_START", b"")] + sprite_lumps() + [("S_END", b"")]
    return pwad(lumps)
