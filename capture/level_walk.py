"""The level-walk expert: a scripted tester that walks a whole Doom level, frontier first.

`NavGrid` is a level's `LevelGraph` at `NAV_UNITS` (16) map units a cell: the cells a player can
stand in among the sectors reachable from the start, walls drawn between them as barriers, and
moves between neighbouring cells where every line the move crosses is a passage of the graph
that way (a step up of at most 24 units, a drop, a door's sector, a lift; a door 8 units thick has
no cell of its own and is crossed in one move), and across a teleporter to its destination. A
locked door's face is a wall while its key is not held; a monster (which stands still under
`immortal`) makes its cells dear. Cells the grid reaches only through a monster (`past_monsters`:
with the monsters as walls, they are out of reach) are out of everyone's reach under `immortal`:
no monster moves and nothing fires (E1M2: two imps behind door 266). Shortest routes come from
Dijkstra over it (SciPy), cells beside a wall costing more, so that routes keep off the walls.

`LevelWalker` plays from telemetry and the level's geometry, as a human tester would walk a
level they know the map of: it goes to the nearest coverage cell (`CELL`, 64 units, the report's)
it has not been in yet, to a switch within reach of the route that it has not pressed, or, while
cells are left that a lock keeps from it, to a key; it presses USE facing a door on its way and
walks through, waits at a lift, and when it is stuck it turns to face a door ahead (USE works
what the player faces), then (a door that needs a switch elsewhere, a lift that does not come)
leaves that sector aside until it next presses a switch; stuck with nothing ahead to open,
it routes round and gives up the cell it was after, and a switch it gets no nearer to counts as
tried. Having set off a door that closes again by itself, it makes for that door first. It walks on with
a strafe or a step back while it turns round, keeps out of a pit the graph finds no way back from
(the softlock oracle ends the episode there) and off one-way drops while other cells are left,
and counts a walk through cells it has been in
as progress while it gets nearer its goal. It remembers where it has been across episodes
(`remember`) or per episode. Like the park's experts it adds a little jitter and labels jittered
steps with the action meant, so that its demos teach a policy to walk a level like a tester.

It uses geometry and telemetry: a stand-in for a human tester making training data, never the
agent under test (which sees only pixels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import cv2
import numpy as np

from playtester.capture.doom import wrap_angle
from playtester.capture.experts import _Actions, _Expert, _Steering, bearing
from playtester.capture.keymap import KeyMap
from playtester.capture.level_graph import MONSTER_RADII, RASTER_UNITS, LevelGraph
from playtester.capture.level_specials import CROSS, DOOR, EXIT, FLOOR, KEY_THINGS, LIFT, TELEPORT, USE
from playtester.errors import UserError

NAV_UNITS = 16.0
CELL = 64.0
"""Coverage cells, in map units (the report's `LEVEL_CELL`)."""
STUCK_PATIENCE = 30
"""Steps stuck (USE pressed after 4, and whenever a door, lift or switch is in reach) before the
walker leaves the sector ahead aside: a door opens and a lift comes down within it."""
BLOCKED_PATIENCE = 8
"""Steps stuck with no door or lift ahead (a monster in the way, a corner) before the walker routes around."""
DROP_AFTER = 2
"""Episodes in which a cell was given up after which a walker that remembers (`remember`) leaves it
for last in later ones: a cell it cannot get into (a ledge that looks walkable) would otherwise
cost it the same steps every episode."""
GIVE_UP_STEPS = 40
"""Steps without getting nearer after which the walker gives up a cell it has not got into (a lift that needs a switch
it cannot find, a ledge that looks walkable)."""
NO_PROGRESS = 30
"""Steps without a new coverage cell or a step nearer the goal after which the walker routes
around the way it was taking."""
TURN_COST = 10.0
"""Degrees of turning that cost as much as walking one nav cell when choosing where to go next."""
DOOR_REACH = 96.0
"""Within this far of a door's sector on its route the walker presses USE."""
ROOMY = 28.0
SWITCH_TRIES = 2
"""Times the walker goes to a switch that did not work before it leaves it (its face out of reach)."""
UNLOCK_BONUS = 400.0
"""Nav cells nearer than it lies a key counts while cells are left that the grid cannot reach yet
(the door it opens may lead there). A switch counts 12 nearer: going out of the way to every
switch first walked the walker into a pit on MAP10 (a walk-over line past a drop)."""
KEY_TOUCH = 34.0
"""Map units (along each axis) within which the player has picked a key up (Doom: 16 + 20 apart)."""
DRIFT = 24.0
"""Map units a step: at least this, the player's momentum carries it on while the walker turns."""
LOOKAHEAD = 72.0
"""The walker heads for the first node of its route at least this far away."""
PLAYER_RADIUS = 16.0
CLEARANCE = 10.0
"""Map units a free nav cell's centre keeps from a wall: less than the player's radius, so that a
passage of 32 units still has cells (the player slides along the walls to them)."""
SOLID_THINGS = {2035: 10, 70: 16, 2028: 16, 30: 16, 31: 16, 32: 16, 33: 16, 36: 16, 37: 16, 41: 16, 42: 16, 43: 16, 44: 16,
                45: 16, 46: 16, 55: 16, 56: 16, 57: 16, 47: 16, 48: 16, 35: 16, 54: 32, 85: 16, 86: 16, 25: 16, 26: 16,
                27: 16, 28: 16, 29: 16, 49: 16, 50: 16, 51: 16, 52: 16, 53: 16, 73: 16, 74: 16, 75: 16, 76: 16, 77: 16,
                78: 16}
"""Doom's solid decorations by editor number, with their radius in map units."""
HURRY_STEPS = 40
"""Steps after setting off a door that closes again by itself (a switch or walk-over line far
from it: open, wait, close) during which the walker makes for the door before anything else."""
MONSTERS = MONSTER_RADII
"""Doom's monsters by editor number, with their radius: under `immortal` (notarget) they stand
where the level puts them, and the walker, which cannot fire, walks round them where it can."""
MONSTER_COST = 50.0
"""Extra cost of a nav cell a monster stands on (not a wall: one on a lift rides it, and where it
blocks the only way the walker's stuck handling routes round it)."""


@dataclass
class NavGrid:
    """Free cells of a level at `NAV_UNITS` and the moves between them; see the module's docstring."""

    graph: LevelGraph
    blocked: frozenset[int] = frozenset()
    """Sectors left aside (stuck there)."""
    active: frozenset[int] | None = None
    """The lines set off so far (None: every line): what they move is where it moved to."""
    monsters: bool = True
    """Whether the level's monsters stand in the way (`MONSTERS`; not under `no-monsters`)."""
    shut: frozenset[int] = frozenset()
    """Lines that stand as walls whatever their sides allow (a locked door's face, its key not held)."""
    opened: frozenset[int] = frozenset()
    """Doors worked by hand that the walker has opened: entered across any of their lines. One
    not yet opened is entered only across a face that opens it, from the face's front (Doom works
    a line from its front only): bars in a corridor opened from one end are a wall from the other."""
    monster_walls: bool = False
    """Whether the monsters stand as walls rather than dear cells (not one on a lift or a moving
    floor: it rides it): the grid of `LevelWalker.behind_monsters`."""
    crossings: dict | None = field(default=None, repr=False, compare=False)
    """`_line_crossings()`, computed once and handed on to the level's later grids (`replace`)."""

    def __post_init__(self) -> None:
        level = self.graph.level
        step = int(NAV_UNITS // RASTER_UNITS)
        self.sectors = self.graph.raster[step // 2::step, step // 2::step]  # row 0 north
        h, w = self.sectors.shape
        x0, _, _, y1 = level.bounds
        self.origin = (x0, y1)
        if self.crossings is None:
            self.crossings = self._line_crossings()
        reached = self.graph.reachable()
        self._door_entries()
        passages = self.graph.passages(None if self.active is None else set(self.active))
        stand = self.graph.walkable_sectors()
        ok = np.zeros(len(level.sectors) + 1, dtype=bool)
        for s in reached:
            ok[s] = stand[s] and s not in self.blocked
        free = ok[self.sectors]
        direct = self._direct_moves(passages)
        clearance, things, crowd = self._obstacles(direct)
        free &= (clearance >= CLEARANCE)[step // 2::step, step // 2::step][:h, :w]
        free &= (things == 0)[step // 2::step, step // 2::step][:h, :w]
        self.free = free
        roomy = (clearance >= ROOMY)[step // 2::step, step // 2::step][:h, :w]
        near_wall = cv2.distanceTransform(free.astype(np.uint8), cv2.DIST_L2, 3) < 2.0
        crowded = (crowd > 0)[step // 2::step, step // 2::step][:h, :w]
        ids = -np.ones((h, w), dtype=np.int64)
        ids[free] = np.arange(int(free.sum()))
        self.ids, self.cells = ids, np.argwhere(free)  # cells: (row, col) of each node
        self.roomy = roomy[free]
        """Per node: at least `ROOMY` units from a wall (a better place to head for than a wall's foot)."""
        rows, cols, costs = self._grid_edges(free, near_wall, crowded, direct)
        self.teleports: dict[tuple[int, int], int] = {}
        """`(node before the teleporter line, node of its destination)` → the line."""
        self._teleport_edges(passages, rows, cols, costs)
        self.edges = (np.concatenate(rows), np.concatenate(cols), np.concatenate(costs))
        self.matrix = self._matrix(set())
        from scipy.sparse.csgraph import connected_components

        self.component = connected_components(self.matrix, directed=True, connection="strong")[1]
        """Per node: its strongly connected component (nodes that reach each other: a one-way drop
        leads out of one)."""

    def _door_entries(self) -> None:
        """`_shut_door` (per sector, -1 last: a door worked by hand, not `opened` and not opened by
        an `active` switch elsewhere) and
        `_door_face` (per line: the door sector it opens by hand from its front, its back; -2
        for a line that is no such face)."""
        graph = self.graph
        self._shut_door = np.zeros(len(graph.level.sectors) + 1, dtype=bool)
        for door in graph.doors:
            remote = [i for i in door.lines if not graph.actions[i].manual and (self.active is None or i in self.active)]
            by_hand = any(graph.actions[i].manual for i in door.lines)
            self._shut_door[door.sector] = by_hand and not remote and door.sector not in self.opened
        self._door_face = np.full(len(graph.level.linedefs), -2, dtype=np.int64)
        self._fronts: dict[int, set[int]] = {}
        """Per door sector: the sectors before its faces."""
        for i, action in enumerate(graph.actions):
            ld = graph.level.linedefs[i]
            if action is not None and action.kind == DOOR and action.manual and ld.back is not None:
                self._door_face[i] = ld.back
                self._fronts.setdefault(ld.back, set()).add(ld.front)

    def _door_side(self, line: int, ld) -> bool:
        """Whether a line is a side of a door not yet opened that does not open it, toward a sector
        that also lies before one of its faces (E1M2's bars stand in one corridor sector, opened from
        its east end only): a wall there, or the walker slips past the door along its lines."""
        for door, other in ((ld.back, ld.front), (ld.front, ld.back)):
            if self._shut_door[door] and self._door_face[line] != door and other in self._fronts.get(door, ()):
                return True
        return False

    def _direct_moves(self, passages) -> np.ndarray:
        """`[a, b]`: the graph lets the player walk from sector a into sector b (not by teleporter)."""
        n = len(self.graph.level.sectors) + 1
        allowed = np.zeros((n, n), dtype=bool)
        for p in passages:
            if p.kind != TELEPORT:
                allowed[p.source, p.target] = True
        for sector in range(n):
            allowed[sector, sector] = True
        return allowed

    def _obstacles(self, direct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At the raster's 8 units: each pixel's distance in map units from a wall (a line passable
        neither way, or `_door_side`), the solid things grown by the player's radius, and the monsters so grown
        (where `monsters`): the player's centre keeps its radius (16 units) from a wall, and a
        thing's radius more from a thing."""
        level = self.graph.level
        x0, _, _, y1 = level.bounds
        barrier = np.zeros(self.graph.raster.shape, dtype=np.uint8)
        things = np.zeros_like(barrier)
        to_raster = lambda x, y: (int((x - x0) // RASTER_UNITS), int((y1 - y) // RASTER_UNITS))  # noqa: E731
        for i, ld in enumerate(level.linedefs):
            open_line = ld.front is not None and ld.back is not None and not ld.blocking and i not in self.shut and (
                ld.front == ld.back or direct[ld.front, ld.back] or direct[ld.back, ld.front]) and not self._door_side(i, ld)
            if not open_line:
                cv2.line(barrier, to_raster(*self.graph.line_ends[i][:2]), to_raster(*self.graph.line_ends[i][2:]), 1, 1)
        crowd = np.zeros_like(barrier)
        risers = self._risers() if self.monster_walls else set()
        for t in level.things:
            radius = SOLID_THINGS.get(t.type)
            if radius is not None:
                cv2.circle(things, to_raster(t.x, t.y), int(math.ceil((radius + PLAYER_RADIUS) / RASTER_UNITS)), 1, -1)
            elif self.monsters and t.type in MONSTERS:
                wall = self.monster_walls and self.graph.sector_at(t.x, t.y) not in risers
                cv2.circle(things if wall else crowd, to_raster(t.x, t.y), int(math.ceil((MONSTERS[t.type] + PLAYER_RADIUS) / RASTER_UNITS)),
                           1, -1)
        clearance = cv2.distanceTransform((barrier == 0).astype(np.uint8), cv2.DIST_L2, 3) * RASTER_UNITS
        return clearance, things, crowd

    def _risers(self) -> set[int]:
        """The sectors a lift or a moving floor carries up and down (a monster on one rides it)."""
        return {s for i, a in enumerate(self.graph.actions) if a is not None and a.kind in (LIFT, FLOOR)
                for s in self.graph.targets(i)}

    def _grid_edges(self, free: np.ndarray, near_wall: np.ndarray, crowded: np.ndarray, direct: np.ndarray):
        """The moves between neighbouring free cells (sources, targets, costs: lists of arrays, one
        pair a direction): no cutting a wall's corner, dearer by a wall and through monsters."""
        h, w = free.shape
        ids = self.ids
        rows, cols, costs = [], [], []
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            a = free[max(0, -dr):h - max(0, dr), max(0, -dc):w - max(0, dc)]
            r0, c0 = np.nonzero(a)
            r0, c0 = r0 + max(0, -dr), c0 + max(0, -dc)
            r1, c1 = r0 + dr, c0 + dc
            inside = (r1 >= 0) & (r1 < h) & (c1 >= 0) & (c1 < w)
            r0, c0, r1, c1 = r0[inside], c0[inside], r1[inside], c1[inside]
            keep = free[r1, c1]
            if dr and dc:  # no cutting a wall's corner
                keep &= free[r0, c1] & free[r1, c0]
            r0, c0, r1, c1 = r0[keep], c0[keep], r1[keep], c1[keep]
            length = math.hypot(dr, dc)
            cost = length * (1.0 + 2.0 * (near_wall[r0, c0] | near_wall[r1, c1]) + MONSTER_COST * crowded[r1, c1])
            moves = self._moves(r0, c0, r1, c1, direct)
            for fwd in (0, 1):
                ok_move = moves[fwd]
                src = (ids[r0, c0], ids[r1, c1])[fwd]
                dst = (ids[r1, c1], ids[r0, c0])[fwd]
                rows.append(src[ok_move])
                cols.append(dst[ok_move])
                costs.append(cost[ok_move])
        return rows, cols, costs

    def _teleport_edges(self, passages, rows: list, cols: list, costs: list) -> None:
        """A move from before each teleporter line to its destination, added to the lists and to
        `teleports`."""
        level = self.graph.level
        for p in passages:
            if p.kind == TELEPORT and p.source not in self.blocked:
                line = self.graph.line_ends[p.line]
                before = self._node_near(*self._in_front(line, 20.0))
                dest = next((t for t in level.things if t.type == 14 and self.graph.sector_at(t.x, t.y) == p.target), None)
                after = None if dest is None else self._node_near(dest.x, dest.y)
                if before is not None and after is not None:
                    self.teleports[before, after] = p.line
                    rows.append(np.array([before]))
                    cols.append(np.array([after]))
                    costs.append(np.array([4.0]))

    def _moves(self, r0: np.ndarray, c0: np.ndarray, r1: np.ndarray, c1: np.ndarray, direct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether the player walks from each cell `(r0, c0)` to its neighbour `(r1, c1)` (forward)
        and back: every line the straight move between their centres crosses is a passage that way
        (a step up it climbs, a drop, an open door; a thin sector between the two cells too). A
        move that crosses no line stays in its sector, or goes where the 8-unit raster put a cell
        a pixel off its line: where a passage leads straight there."""
        h, w = self.sectors.shape
        s0, s1 = self.sectors[r0, c0], self.sectors[r1, c1]
        fwd, bwd = direct[s0, s1].copy(), direct[s1, s0].copy()
        keys, owner, frm, to, line = self.crossings[(int(r1[0] - r0[0]), int(c1[0] - c0[0]))] if len(r0) else ((),) * 5
        if not len(keys):
            return fwd, bwd
        where = np.searchsorted(keys, r0 * w + c0).clip(0, len(keys) - 1)
        crossing = keys[where] == r0 * w + c0
        wall = (frm < 0) | (to < 0) | np.isin(line, list(self.shut))
        face = self._door_face[line]
        ok_f = np.ones(len(keys), dtype=bool)
        ok_b = np.ones(len(keys), dtype=bool)
        ok_f[owner[wall | ~direct[frm, to] | (self._shut_door[to] & (face != to))]] = False  # a -1 side indexes the outside row
        ok_b[owner[wall | ~direct[to, frm] | (self._shut_door[frm] & (face != frm))]] = False
        fwd[crossing], bwd[crossing] = ok_f[where[crossing]], ok_b[where[crossing]]
        return fwd, bwd

    def _line_crossings(self) -> dict[tuple[int, int], tuple[np.ndarray, ...]]:
        """Per move direction `(dr, dc)`: the moves between neighbouring cell centres that cross a
        line (`keys`: their first cell, `row * width + col`, sorted) and each line crossed
        (`owner`: an index into `keys`; `frm`, `to`: the sectors it leads from and into, -1 for a
        wall's missing side or a blocking line; `line`: the line). Geometry only: the same for every grid of a level."""
        level, ends = self.graph.level, self.graph.line_ends
        h, w = self.sectors.shape
        x0, y1 = self.origin
        moves = ((0, 1), (1, 0), (1, 1), (1, -1))
        found: dict[tuple[int, int], list[tuple[np.ndarray, ...]]] = {m: [] for m in moves}
        for i, (lx1, ly1, lx2, ly2) in enumerate(ends):
            ld = level.linedefs[i]
            cmin, rmin = self.pixel(min(lx1, lx2), max(ly1, ly2))
            cmax, rmax = self.pixel(max(lx1, lx2), min(ly1, ly2))
            rr, cc = np.mgrid[max(0, rmin - 1):min(h, rmax + 2), max(0, cmin - 1):min(w, cmax + 2)]
            r0, c0 = rr.ravel(), cc.ravel()
            ax, ay = x0 + (c0 + 0.5) * NAV_UNITS, y1 - (r0 + 0.5) * NAV_UNITS
            ex, ey = lx2 - lx1, ly2 - ly1
            d1 = ex * (ay - ly1) - ey * (ax - lx1)
            front, back = (-1, -1) if ld.blocking or ld.front is None or ld.back is None else (ld.front, ld.back)
            for dr, dc in moves:
                mx, my = dc * NAV_UNITS, -dr * NAV_UNITS
                d2 = d1 + ex * my - ey * mx
                d3 = mx * (ly1 - ay) - my * (lx1 - ax)
                d4 = mx * (ly2 - ay) - my * (lx2 - ax)
                hit = ((d1 < 0) != (d2 < 0)) & (d3 * d4 <= 0)
                if hit.any():  # the line's front lies on its right: a move from the right goes front to back
                    right = d1[hit] < 0
                    found[dr, dc].append((r0[hit] * w + c0[hit], np.where(right, front, back), np.where(right, back, front),
                                          np.full(int(hit.sum()), i)))
        out = {}
        for m, parts in found.items():
            key = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            keys, owner = np.unique(key, return_inverse=True)
            frm = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            to = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            line = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            out[m] = (keys, owner.ravel(), frm.astype(np.int64), to.astype(np.int64), line)
        return out

    def _matrix(self, without: set[int]):
        from scipy.sparse import csr_matrix

        src, dst, cost = self.edges
        keep = ~np.isin(dst, list(without)) if without else np.ones(len(dst), dtype=bool)
        n = len(self.cells)
        return csr_matrix((cost[keep], (src[keep], dst[keep])), shape=(n, n))

    def avoid(self, nodes: set[int]) -> None:
        """Route around `nodes` from now on (the walker got stuck there)."""
        self.matrix = self._matrix(nodes)

    # -- places --------------------------------------------------------------------------------
    def pixel(self, x: float, y: float) -> tuple[int, int]:
        """`(col, row)` of a point."""
        return int((x - self.origin[0]) // NAV_UNITS), int((self.origin[1] - y) // NAV_UNITS)

    def centre(self, node: int) -> tuple[float, float]:
        row, col = self.cells[node]
        return self.origin[0] + (col + 0.5) * NAV_UNITS, self.origin[1] - (row + 0.5) * NAV_UNITS

    def node_at(self, x: float, y: float) -> int | None:
        col, row = self.pixel(x, y)
        h, w = self.ids.shape
        return int(self.ids[row, col]) if 0 <= row < h and 0 <= col < w and self.ids[row, col] >= 0 else None

    def _node_near(self, x: float, y: float, radius: int = 3) -> int | None:
        """The free node nearest a point, within `radius` cells."""
        col, row = self.pixel(x, y)
        h, w = self.ids.shape
        best, best_d = None, None
        for r in range(max(0, row - radius), min(h, row + radius + 1)):
            for c in range(max(0, col - radius), min(w, col + radius + 1)):
                if self.ids[r, c] >= 0 and (best_d is None or (r - row) ** 2 + (c - col) ** 2 < best_d):
                    best, best_d = int(self.ids[r, c]), (r - row) ** 2 + (c - col) ** 2
        return best

    @staticmethod
    def _in_front(line: np.ndarray, distance: float) -> tuple[float, float]:
        """The point `distance` units in front of a line's middle (its front is on its right)."""
        x1, y1, x2, y2 = line
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        return (x1 + x2) / 2 + (y2 - y1) / length * distance, (y1 + y2) / 2 - (x2 - x1) / length * distance

    def routes(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Distances (in cells) and predecessors from node `start` to every node."""
        from scipy.sparse.csgraph import dijkstra

        dist, pred = dijkstra(self.matrix, directed=True, indices=start, return_predecessors=True)
        return dist, pred

    @staticmethod
    def path(pred: np.ndarray, goal: int) -> list[int]:
        out = [goal]
        while pred[out[-1]] >= 0:
            out.append(int(pred[out[-1]]))
        return out[::-1]


def crossing(ax: float, ay: float, bx: float, by: float, ends: np.ndarray, *, touch: bool = True) -> np.ndarray:
    """Per line of `ends` (`N × 4`: `x1, y1, x2, y2`): whether the segment from `(ax, ay)` to
    `(bx, by)` crosses it (`touch`: an end on the line counts too)."""
    x1, y1, x2, y2 = np.asarray(ends, dtype=float).reshape(-1, 4).T
    d1 = (x2 - x1) * (ay - y1) - (y2 - y1) * (ax - x1)
    d2 = (x2 - x1) * (by - y1) - (y2 - y1) * (bx - x1)
    d3 = (bx - ax) * (y1 - ay) - (by - ay) * (x1 - ax)
    d4 = (bx - ax) * (y2 - ay) - (by - ay) * (x2 - ax)
    if touch:
        return (d1 * d2 <= 0) & (d3 * d4 <= 0) & ((d1 != 0) | (d2 != 0))
    return (d1 * d2 < 0) & (d3 * d4 < 0)


def coverage_cell(bounds: tuple[float, float, float, float], x: float, y: float) -> tuple[int, int]:
    """`(row, col)` of a point in the report's coverage grid over a level's bounds (row 0 south)."""
    return int((y - bounds[1]) // CELL), int((x - bounds[0]) // CELL)


class LevelWalker(_Expert):
    """Walks a level frontier first, opening doors and pressing switches; see the module's docstring."""

    behavior = "path"

    def __init__(self, graph: LevelGraph, keymap: KeyMap, rng: np.random.Generator, *, jitter: float = 0.05,
                 remember: bool = False, replan_every: int = 24, monsters: bool = True, standing: bool = True) -> None:
        """`monsters`: the level's monsters are there (not under `no-monsters`); `standing`: they
        never move (`immortal`: notarget), so cells past one standing in the only way are no targets."""
        if "use" not in keymap.names:
            raise UserError(f"key map {keymap.name!r}: the level-walk expert presses USE; play the level with the level key map")
        if monsters and not graph.guards:  # a key a monster stands over is out of reach
            graph = LevelGraph(graph.level, guards=True)
        self.graph = graph
        self.actions = _Actions(keymap)
        self.use = keymap.index("use")
        self.rng = rng
        self.steer = _Steering(self.actions, rng, jitter, turn_tolerance=30.0)
        a = self.actions
        self.pushes = {a.forward, a.backward, a.strafe_left, a.strafe_right, self.use}
        """Actions that move the player (or open what it faces): not moving after them is being stuck."""
        self.remember = remember
        self.replan_every = replan_every
        self.bounds = graph.level.bounds
        self.targets_mask = graph.reachable_cells(CELL)
        """Coverage cells to visit: the reachable ones."""
        self._find_work(graph)
        self.keys: set[str] = set()
        self.pressed: set[int] = set()
        self.traps: dict[int, bool] = {}
        """Per sector asked about: whether it is a pit with no way back (`_trap`)."""
        self.nav = NavGrid(graph, active=self._active(), shut=self._shut(), monsters=monsters)
        self.moving = {s for i in range(len(graph.actions)) for s in graph.targets(i)}
        self.lifts = {s for i, a in enumerate(graph.actions) if a is not None and a.kind == LIFT for s in graph.targets(i)}
        """Sectors a special moves (doors, lifts, floors): the ones set aside when stuck at them."""
        self.doors = graph.door_sectors()
        """Door sectors: stuck at one, the walker turns to face it (not at a lift: it waits at its foot)."""
        lines = graph.level.linedefs
        movers = [i for i, ld in enumerate(lines) if ld.front is not None and ld.back is not None
                  and (ld.front in self.moving or ld.back in self.moving)]
        self.mover_lines = (graph.line_ends[movers].reshape(-1, 4), np.array([[lines[i].front, lines[i].back] for i in movers],
                                                                          dtype=np.int64).reshape(-1, 2))
        """The lines between a moving sector and another: `(ends, (front, back))`."""
        self.behind_monsters = self._past_monsters() if monsters and standing else np.zeros_like(self.targets_mask)
        """Coverage cells the graph counts reachable that lie past a monster standing in the only
        way: under `immortal` (notarget) no monster moves and the key map cannot fire, so no player
        gets there (E1M2: two imps stand behind door 266, the way to the switch that opens the bars
        before 212 cells). Not targets."""
        self.targets_mask &= ~self.behind_monsters
        self.visited = np.zeros_like(self.targets_mask)
        self.give_ups = np.zeros(self.targets_mask.shape, dtype=np.int64)
        """Per coverage cell: the episodes in which the walker gave it up (`remember`)."""
        self.done = False
        self.t = 0
        self.episode_start_visited = 0
        self.outside_gain: int | None = None
        """Coverage cells the last episode spent outside pits gained (None before one ends)."""
        self.pit_gain: int | None = None
        """Coverage cells the last episode spent in pits gained (None: none so far)."""
        self.into_pits = False
        self.reset({})

    def _find_work(self, graph: LevelGraph) -> None:
        """What the walker must work or fetch: lines at hand, switches elsewhere, keys lying in reach."""
        lines = graph.level.linedefs
        self.at_hand = frozenset(
            i for i, a in enumerate(graph.actions) if a is not None and a.kind != EXIT and (
                a.manual or a.kind == TELEPORT or (a.kind == LIFT and {lines[i].front, lines[i].back} & set(graph.targets(i)))))
        """Lines the walker works where it meets them: doors by hand, lifts on their own faces, teleporters."""
        reached = graph.reachable()
        self.switches = [i for i, a in enumerate(graph.actions) if a is not None and i not in self.at_hand
                         and a.trigger in (USE, CROSS) and a.kind in (DOOR, LIFT, FLOOR)
                         and any(s in reached for s in graph.trigger_sectors(i))]
        """Switches and walk-over lines that move something elsewhere: places to go and set off; a
        switch in a recess too shallow to enter counts where it is pressed from (E1M2's switch
        1854, 8 units deep, pressed from sector 117, opens the bars before 212 of the level's cells)."""
        self.key_spots = [(KEY_THINGS[t.type], t.x, t.y) for t in graph.keys_lying() if graph.sector_at(t.x, t.y) in reached]
        """Keys lying in reach: `(lock, x, y)`; the walker fetches one when what it opens is still to walk."""

    def reset(self, info: dict[str, Any]) -> None:
        if self.remember and self.t:  # an episode was walked
            gain = int(self.visited.sum()) - self.episode_start_visited
            if self.into_pits:
                self.pit_gain = gain
            else:
                self.outside_gain = gain
        self.into_pits = self._pits_pay()
        if not self.remember:
            self.visited = np.zeros_like(self.targets_mask)
        self.episode_start_visited = int(self.visited.sum())
        self.pressed: set[int] = set()
        """Switches and walk-over lines set off in this episode."""
        self.keys = set()
        """The keys picked up in this episode (where the player touched one)."""
        self.opened: set[int] = set()
        """The doors worked by hand that the walker opened in this episode (`NavGrid.opened`)."""
        self.tries: dict[int, int] = {}
        """Switches and walk-over lines gone to in this episode, and how often."""
        self.goal_key: str | None = None
        self.route: list[int] = []
        self.goal_switch: int | None = None
        self.hurry: frozenset[int] = frozenset()
        self.hurry_until = 0
        """The sectors of a door set off that closes again by itself, and the step until which the walker makes for it."""
        self.since_plan = 0
        self.last_use = -100
        self.t = 0
        self.track: list[tuple[float, float]] = []
        self.stuck_steps = 0
        self.last_action = -1
        self.avoided: set[int] = set()
        self.given_up = self.give_ups >= DROP_AFTER if self.remember else np.zeros_like(self.targets_mask)
        """Coverage cells the walker tried for `GIVE_UP_STEPS` without getting in (this episode),
        and those it gave up in `DROP_AFTER` episodes before (`remember`): they wait until
        nothing else is left to walk or set off."""
        self.goal_cell: tuple[int, int] | None = None
        self.goal_since = 0
        self.last_new = 0
        self.last_closer = 0
        """The step at which the route to the goal was last shorter than ever (the walker getting there)."""
        self.closing_on: int | None = None
        self.fewest = 0
        if self.nav.blocked or self.nav.active != self._active() or self.nav.shut != self._shut() or self.nav.opened:
            self._regrid()
        else:
            self.nav.avoid(self.avoided)

    def _pits_pay(self) -> bool:
        """Whether this episode goes into pits first (`remember`): when more cells are left to walk
        in pits with no way back than the last episode outside them gained. A pit otherwise waits
        until nothing else is left, which on a level with corners the walker keeps trying (MAP07's
        red-key pit, about 240 cells) is never; an episode ends there anyway, and the next starts
        outside again. An episode in pits that gained fewer cells than the last one outside is not
        tried again (a pit it cannot get into does not take every episode)."""
        if not self.remember or self.outside_gain is None or (self.pit_gain is not None and self.pit_gain < self.outside_gain):
            return False
        return int((self.targets_mask & ~self.visited & self._pit_cells).sum()) > self.outside_gain

    @cached_property
    def _pit_cells(self) -> np.ndarray:
        """Coverage cells whose centre lies in a pit with no way back (`_trap`)."""
        x0, y0 = self.bounds[:2]
        out = np.zeros_like(self.targets_mask)
        for r, c in zip(*np.nonzero(self.targets_mask)):
            sector = self.graph.sector_at(x0 + (c + 0.5) * CELL, y0 + (r + 0.5) * CELL)
            out[r, c] = sector is not None and self._trap(sector)
        return out

    def grid_reach(self, x: float, y: float) -> np.ndarray:
        """The reachable coverage cells this walker's grid routes to from `(x, y)` with every switch
        and walk-over line it can get to set off and every key it can get to taken (to a fixed
        point): what a walker on this grid could walk at best. Leaves its keys and lines as they were."""
        keys, pressed = set(self.keys), set(self.pressed)
        while True:
            nav = self.nav
            start = nav.node_at(x, y) or nav._node_near(x, y, radius=4)
            ok = np.isfinite(nav.routes(start)[0]) if start is not None else np.zeros(len(nav.cells), dtype=bool)
            before = (set(self.keys), set(self.pressed))
            self.keys |= {lock for lock, kx, ky in self.key_spots if (n := nav._node_near(kx, ky)) is not None and ok[n]}
            self.pressed |= {line for line in self.switches if self._unlocked(line)
                             and (n := self._switch_node(line)) is not None and ok[n]}
            if (self.keys, self.pressed) == before:
                break
            self._regrid()
        cx = nav.origin[0] + (nav.cells[ok, 1] + 0.5) * NAV_UNITS
        cy = nav.origin[1] - (nav.cells[ok, 0] + 0.5) * NAV_UNITS
        out = np.zeros_like(self.targets_mask)
        out[((cy - self.bounds[1]) // CELL).astype(int).clip(0, out.shape[0] - 1),
            ((cx - self.bounds[0]) // CELL).astype(int).clip(0, out.shape[1] - 1)] = True
        self.keys, self.pressed = keys, pressed
        self._regrid()
        self.nav.avoid(self.avoided)
        return out & self.targets_mask

    def _past_monsters(self) -> np.ndarray:
        """Coverage cells the grid reaches from the start (`grid_reach`) only through a monster:
        those it reaches with the monsters as dear cells and not with them as walls. At
        construction only: it clears the episode's keys, lines and set-aside cells."""
        x, y = self.graph.start()[:2]
        self.keys, self.pressed, self.opened, self.avoided = set(), set(), set(), set()
        free = self.grid_reach(x, y)
        nav, self.nav = self.nav, replace(self.nav, monster_walls=True)
        walled = self.grid_reach(x, y)
        self.nav = nav
        return free & ~walled

    # -- choosing ------------------------------------------------------------------------------
    def _choose(self, info: dict[str, Any]) -> int:
        x, y, _ = info["position"]
        self.t += 1
        self._visit(x, y)
        self._pick_up(x, y)
        self.track.append((x, y))
        self._crossed()
        if self._stuck():
            return self._unstick(info, x, y)
        if self.t - max(self.last_new, self.last_closer) > NO_PROGRESS and self.route:  # sliding along a wall the grid thinks open
            self.avoided |= set(self.route[:6])
            self.nav.avoid(self.avoided)
            if self.goal_cell is not None:
                self._give_up(self.goal_cell)
            self.last_new, self.route = self.t, []
        self.since_plan += 1
        if not self.route or self.since_plan >= self.replan_every:
            self._plan(x, y, float(info["angle"]))
        if self.goal_switch is not None and len(self.route) <= 1:
            return self._press_switch(info, x, y)
        self._advance(x, y)
        self._closer()
        if self.route and self.goal_switch is None and self.goal_key is None and self._reached_goal():
            self._plan(x, y, float(info["angle"]))
        if not self.route:
            if self.goal_switch is not None:
                return self._press_switch(info, x, y)
            # nothing to walk to from this cell (walled in, as far as the grid knows): wander a little
            return int(self.rng.choice([self.actions.forward, self.actions.forward, self.actions.turn_left,
                                        self.actions.strafe_left, self.actions.strafe_right, self.actions.backward]))
        heading = self._heading(x, y)
        if self._riding_lift(x, y, float(info["position"][2])):  # wait for it to take the player up
            return self.actions.turn_left if self.t % 2 else self.actions.turn_right
        if self._movers_ahead(x, y) and self._facing_usable(x, y, info) and self.t - self.last_use > 16:
            self.last_use = self.t
            return self.use
        return self._toward(info, heading)

    def _toward(self, info: dict[str, Any], heading: float) -> int:
        """Walk toward a heading without stopping to turn: forward when facing it (within the
        steering's tolerance); else turn while the last step's momentum still carries the player
        its way, and otherwise step with the key that moves it nearest that way (a strafe or a
        step back), so that a walker turning round to a cell behind it is on its way meanwhile."""
        angle = float(info["angle"])
        err = wrap_angle(heading - angle)
        if abs(err) <= self.steer.turn_tolerance:
            return self.steer.toward(info, heading)
        if len(self.track) >= 2:
            (x0, y0), (x1, y1) = self.track[-2], self.track[-1]
            drift = math.hypot(x1 - x0, y1 - y0)
            if drift >= DRIFT and abs(wrap_angle(bearing(x0, y0, x1, y1) - heading)) <= 60.0:
                return self.steer.toward(info, heading)
        offset, key = min(((90.0, self.actions.strafe_left), (-90.0, self.actions.strafe_right), (180.0, self.actions.backward)),
                          key=lambda k: abs(wrap_angle(err - k[0])))
        return self.steer.toward(info, angle, walk=key)

    def _riding_lift(self, x: float, y: float, z: float) -> bool:
        """On a lift, with the route going on to a floor more than a step above the player."""
        here = self.graph.sector_at(x, y)
        if here not in self.lifts:
            return False
        for node in self.route[:6]:
            s = int(self.nav.sectors[tuple(self.nav.cells[node])])
            if s != here:
                return self.graph.level.sectors[s].floor > z + 24.0
        return False

    def _facing_usable(self, x: float, y: float, info: dict[str, Any]) -> bool:
        """Whether USE now would work a door, lift or switch (the engine's own reach and rule)."""
        from playtester.capture.level_play import used_line

        line = used_line(self.graph, x, y, float(info["angle"]))
        return line is not None and self.graph.actions[line].kind in (DOOR, LIFT, FLOOR)

    def _heading(self, x: float, y: float) -> float:
        """Toward the next waypoint a few cells on (through a teleporter: over its line)."""
        route = self.route
        for a, b in zip(route, route[1:4]):
            line = self.nav.teleports.get((a, b))
            if line is not None:
                tx, ty = NavGrid._in_front(self.graph.line_ends[line], -24.0)
                return bearing(x, y, tx, ty)
        target = next((n for n in route[:10] if math.hypot(*np.subtract(self.nav.centre(n), (x, y))) >= LOOKAHEAD), route[min(9, len(route) - 1)])
        return bearing(x, y, *self.nav.centre(target))

    def _advance(self, x: float, y: float) -> None:
        """Drop the route's nodes up to the one nearest the player (a running player passes nodes
        wide of them; they are behind it)."""
        ahead = self.route[:12]
        if len(ahead) > 1:
            gaps = [math.hypot(*np.subtract(self.nav.centre(n), (x, y))) for n in ahead]
            near = int(np.argmin(gaps))
            passed = near + 1 if gaps[near] < 48.0 else near  # the nearest is reached too when close
            del self.route[:min(passed, len(self.route) - 1)]

    def _closer(self) -> None:
        """Note the step when the route to its goal is shorter than it has been: a long walk
        through cells walked before toward a far goal is progress too."""
        if not self.route:
            return
        if self.route[-1] != self.closing_on:
            self.closing_on, self.fewest = self.route[-1], len(self.route)
        elif len(self.route) < self.fewest:
            self.fewest, self.last_closer = len(self.route), self.t

    def _reached_goal(self) -> bool:
        """Whether the coverage cell the route leads to has been visited already (on the way)."""
        row, col = coverage_cell(self.bounds, *self.nav.centre(self.route[-1]))
        return bool(self.visited[min(row, self.visited.shape[0] - 1), min(col, self.visited.shape[1] - 1)])

    def _visit(self, x: float, y: float) -> None:
        row, col = coverage_cell(self.bounds, x, y)
        if 0 <= row < self.visited.shape[0] and 0 <= col < self.visited.shape[1]:
            if not self.visited[row, col]:
                self.last_new = self.t
            self.visited[row, col] = True

    def _plan(self, x: float, y: float, angle: float | None = None) -> None:
        """Route to the nearest unvisited reachable cell, or to a switch not far beyond it; a
        target that needs turning counts as farther (a turn of `TURN_COST` degrees as one cell)."""
        self.since_plan = 0
        start = self.nav.node_at(x, y) or self.nav._node_near(x, y, radius=4)
        self.route, self.goal_switch, self.goal_key = [], None, None
        if start is None:
            return
        dist, pred = self.nav.routes(start)
        best, best_d, dist, home, node_sector, beyond = self._nearest_unwalked(x, y, angle, start, dist)
        best, best_d = self._errand(best, best_d, dist, home, node_sector, beyond)
        if self.t < self.hurry_until:  # a door set off that will close again: through it first
            if int(self.nav.sectors[tuple(self.nav.cells[start])]) in self.hurry:
                self.hurry_until = 0
            else:
                door = np.isin(node_sector, list(self.hurry)) & np.isfinite(dist)
                if door.any():
                    best = int(np.flatnonzero(door)[np.argmin(dist[door])])
                    self.goal_switch = self.goal_key = None
        if best is None:
            if self.avoided or self.given_up.any():  # walled in by what it set aside: forget it and look again
                self.avoided.clear()
                self.given_up[:] = False
                self.nav.avoid(self.avoided)
                return self._plan(x, y, angle)
            self.done = not self.remember
            return
        self._head_for(best, pred, x, y, angle)

    def _nearest_unwalked(self, x: float, y: float, angle: float | None, start: int, dist: np.ndarray):
        """The nearest node of an unvisited reachable cell (`best`, its distance `best_d`, None and
        inf when none), with `dist` counting turns, the nodes the walker can come back from
        (`home`), each node's sector, and whether cells are left that the grid cannot reach yet."""
        rows, cols = self.nav.cells[:, 0], self.nav.cells[:, 1]
        cx = self.nav.origin[0] + (cols + 0.5) * NAV_UNITS
        cy = self.nav.origin[1] - (rows + 0.5) * NAV_UNITS
        crow = ((cy - self.bounds[1]) // CELL).astype(int).clip(0, self.visited.shape[0] - 1)
        ccol = ((cx - self.bounds[0]) // CELL).astype(int).clip(0, self.visited.shape[1] - 1)
        wanted = self.targets_mask[crow, ccol] & ~(self.visited | self.given_up)[crow, ccol] & np.isfinite(dist)
        if angle is not None:
            turn = np.abs((np.degrees(np.arctan2(cy - y, cx - x)) - angle + 180.0) % 360.0 - 180.0)
            dist = dist + turn / TURN_COST
        best, best_d = None, np.inf
        node_sector = self.nav.sectors[rows, cols]
        if self.into_pits:  # this episode goes into the pits first (`_pits_pay`)
            pits = wanted & np.isin(node_sector, [s for s in np.unique(node_sector[wanted]) if self._trap(int(s))])
            if pits.any():
                best = int(np.flatnonzero(pits)[np.argmin(dist[pits])])
                return best, dist[best], dist, np.ones_like(wanted), node_sector, False
        home = self.nav.component == self.nav.component[start]
        """Where the walker can come back from: it takes a one-way drop (into a pit, perhaps) only
        when nothing is left to walk this side of it."""
        if (wanted & home).any():
            wanted &= home
        else:
            home[:] = True
        if (wanted & self.nav.roomy).any():
            wanted &= self.nav.roomy
        safe = wanted.copy()
        while safe.any():  # a pit with no way back (the engine's own rules) waits until nothing else is left
            best = int(np.flatnonzero(safe)[np.argmin(dist[safe])])
            if not self._trap(int(node_sector[best])):
                break
            safe &= node_sector != node_sector[best]
        if safe.any():
            wanted = safe
        best = None
        if wanted.any():
            best = int(np.flatnonzero(wanted)[np.argmin(dist[wanted])])
            best_d = dist[best]
        seen = np.zeros_like(self.visited)
        seen[crow[np.isfinite(dist)], ccol[np.isfinite(dist)]] = True
        beyond = bool((self.targets_mask & ~(self.visited | self.given_up | seen)).any())
        """Cells are left to walk that the grid cannot reach yet: a switch or a key may open them."""
        return best, best_d, dist, home, node_sector, beyond

    def _errand(self, best: int | None, best_d: float, dist: np.ndarray, home: np.ndarray, node_sector: np.ndarray,
                beyond: bool) -> tuple[int | None, float]:
        """A switch not far beyond the nearest unwalked cell, or a key while cells are out of reach,
        in its place where it is nearer (bonuses counted); sets `goal_switch` and `goal_key`. None
        on the way into a pit (`into_pits`)."""
        if self.into_pits and best is not None and self._trap(int(node_sector[best])):
            return best, best_d
        for line in self.switches:
            if line in self.pressed or not self._unlocked(line) or self.tries.get(line, 0) >= SWITCH_TRIES:
                continue
            bonus = 12.0
            node = self._switch_node(line)
            if node is not None and home[node] and np.isfinite(dist[node]) and dist[node] - bonus < best_d \
                    and not self._trap(int(node_sector[node])):
                best, best_d, self.goal_switch = node, dist[node] - bonus, line
        if beyond:  # a key counts as near when cells it may open are still to walk and out of reach now
            for lock, kx, ky in self.key_spots:
                node = self.nav._node_near(kx, ky)
                krow, kcol = coverage_cell(self.bounds, kx, ky)
                if lock in self.keys or node is None or not home[node] or not np.isfinite(dist[node]) or self.given_up[krow, kcol] \
                        or self._trap(int(node_sector[node])):
                    continue
                cost = dist[node] - UNLOCK_BONUS
                if cost < best_d:
                    best, best_d, self.goal_switch, self.goal_key = node, cost, None, lock
        return best, best_d

    def _head_for(self, best: int, pred: np.ndarray, x: float, y: float, angle: float | None) -> None:
        """The route to node `best`; a goal cell chased for longer than `GIVE_UP_STEPS` without
        getting closer is given up, and another planned."""
        if self.goal_switch is not None and best != self._switch_node(self.goal_switch):
            self.goal_switch = None
        self.route = NavGrid.path(pred, best)[1:]
        goal = coverage_cell(self.bounds, *self.nav.centre(best))
        if goal == self.goal_cell:  # still after the same cell: give it up after a while
            if self.t - max(self.goal_since, self.last_closer) > GIVE_UP_STEPS:
                self._give_up(goal)
                if self.goal_switch is not None:  # a switch it gets no nearer to counts as tried
                    self.tries[self.goal_switch] = SWITCH_TRIES
                self.goal_cell = None
                self._plan(x, y, angle)
        else:
            self.goal_cell, self.goal_since = goal, self.t

    def _give_up(self, cell: tuple[int, int]) -> None:
        """Set a coverage cell aside for this episode (and count it, for later ones)."""
        row, col = min(cell[0], self.given_up.shape[0] - 1), min(cell[1], self.given_up.shape[1] - 1)
        if not self.given_up[row, col]:
            self.give_ups[row, col] += 1
        self.given_up[row, col] = True

    def _trap(self, sector: int) -> bool:
        """Whether the level's graph finds no way back to the start from a sector (a pit whose lift
        is worked only from outside); doors and lifts themselves are ways, not traps."""
        if sector < 0 or sector in self.moving:
            return False
        if sector not in self.traps:
            self.traps[sector] = self.graph.start_sector() not in self.graph.reachable(start=sector)
        return self.traps[sector]

    def _unlocked(self, line: int) -> bool:
        """Whether a line's lock (if any) opens to the keys held."""
        key = self.graph.actions[line].key
        return key is None or key in self.keys

    def _active(self) -> frozenset[int]:
        """The lines the walker can work now: those at hand and those set off, their keys held."""
        return frozenset(i for i in self.at_hand | self.pressed if self._unlocked(i))

    def _shut(self) -> frozenset[int]:
        """Locked doors' faces whose key is not held: walls to the walker (a door opened from its
        other side, or by a face with no lock, still opens)."""
        return frozenset(i for i in self.at_hand if self.graph.actions[i].kind == DOOR and not self._unlocked(i))

    def _regrid(self, blocked: frozenset[int] = frozenset()) -> None:
        """The grid again, for the lines set off and the keys held now."""
        self.nav = replace(self.nav, blocked=blocked, active=self._active(), shut=self._shut(), opened=frozenset(self.opened))

    def _pick_up(self, x: float, y: float) -> None:
        """Keys touched (the player's box and the key's overlap: 16 + 20 units less a margin):
        what they open opens to the walker's grid."""
        for lock, kx, ky in self.key_spots:
            if lock not in self.keys and abs(kx - x) < KEY_TOUCH and abs(ky - y) < KEY_TOUCH:
                self.keys.add(lock)
                self._regrid()
                self.nav.avoid(self.avoided)
                self.route, self.goal_key = [], None

    def _switch_node(self, line: int) -> int | None:
        """Where to go to set a line off: in front of a switch, just past a walk-over line."""
        ends = self.graph.line_ends[line]
        if self.graph.actions[line].trigger == CROSS:
            return self.nav._node_near(*NavGrid._in_front(ends, -20.0), radius=1) or self.nav._node_near(*NavGrid._in_front(ends, 20.0))
        return self.nav._node_near(*NavGrid._in_front(ends, 24.0))

    def _set_off(self, line: int) -> None:
        """A switch or walk-over line worked: what it moves has moved; look at the level again."""
        action, tag = self.graph.actions[line], self.graph.level.linedefs[line].tag
        self.pressed |= {i for i in self.switches if i == line or (tag and self.graph.level.linedefs[i].tag == tag and (
            self.graph.actions[i].kind, self.graph.actions[i].floor) == (action.kind, action.floor))}  # its twins move the same
        self._regrid()
        self.nav.avoid(self.avoided)
        self.route, self.goal_switch = [], None
        if action.kind == DOOR and not action.lasts and HURRY_STEPS:  # open, wait, close
            self.hurry, self.hurry_until = frozenset(self.graph.targets(line)), self.t + HURRY_STEPS

    def _crossed(self) -> None:
        """Walk-over lines crossed by the last step."""
        if len(self.track) < 2:
            return
        lines = [i for i in self.switches if i not in self.pressed and self.graph.actions[i].trigger == CROSS]
        if not lines:
            return
        for line in np.array(lines)[crossing(*self.track[-2], *self.track[-1], self.graph.line_ends[lines], touch=False)]:
            if line not in self.pressed:
                self._set_off(int(line))

    def _press_switch(self, info: dict[str, Any], x: float, y: float) -> int:
        self.tries[self.goal_switch] = self.tries.get(self.goal_switch, 0) + 1
        if self.graph.actions[self.goal_switch].trigger == CROSS:  # on its far side already, or about to be
            x1, y1, x2, y2 = self.graph.line_ends[self.goal_switch]
            tx, ty = NavGrid._in_front(self.graph.line_ends[self.goal_switch], -24.0)
            self.goal_switch = None
            return self.steer.toward(info, bearing(x, y, tx, ty))
        x1, y1, x2, y2 = self.graph.line_ends[self.goal_switch]
        heading = bearing(x, y, (x1 + x2) / 2, (y1 + y2) / 2)
        if abs(wrap_angle(heading - float(info["angle"]))) > 12:
            return self.actions.turn_left if wrap_angle(heading - float(info["angle"])) > 0 else self.actions.turn_right
        self.goal_switch = None
        self.last_use = self.t
        return self.use

    def _movers_ahead(self, x: float, y: float, reach: float = DOOR_REACH) -> set[int]:
        """The doors' and lifts' sectors (any a special moves) that the route enters within `reach`
        of the player: those its cells lie in, and those whose lines it crosses (a door 8 units
        thick has no cell of its own)."""
        here = self.graph.sector_at(x, y)
        points, out = [(x, y)], set()
        for node in self.route[:8]:
            if math.hypot(*np.subtract(self.nav.centre(node), (x, y))) > reach:
                break
            points.append(self.nav.centre(node))
            out.add(int(self.nav.sectors[tuple(self.nav.cells[node])]))
        ends, sides = self.mover_lines
        for (ax, ay), (bx, by) in zip(points, points[1:]):
            for pair in sides[crossing(ax, ay, bx, by, ends)]:
                out |= set(pair.tolist())
        return {s for s in out if s in self.moving and s != here}

    # -- stuck ---------------------------------------------------------------------------------
    def _stuck(self) -> bool:
        """Walking forward and not moving for a few steps (turning on the spot is not being stuck)."""
        if len(self.track) >= 2:
            (x0, y0), (x1, y1) = self.track[-2], self.track[-1]
            if math.hypot(x1 - x0, y1 - y0) >= 4.0:
                self.stuck_steps = 0
            elif self.last_action in self.pushes or self.stuck_steps:
                self.stuck_steps += 1
        return self.stuck_steps >= 4

    def _unstick(self, info: dict[str, Any], x: float, y: float) -> int:
        """Press USE ahead (a lift's or a door's face), wait for a lift, then leave the sector aside."""
        if (self.stuck_steps == 4 or self._facing_usable(x, y, info)) and self.t - self.last_use > 16:
            self.last_use = self.t
            return self.use
        aside = self._movers_ahead(x, y)  # a door or a lift that did not open or come
        if self.stuck_steps < (STUCK_PATIENCE if aside else BLOCKED_PATIENCE):
            if aside & self.doors and self.route:  # face the door (not a strafe along it): USE works what the player faces
                return self.steer.toward(info, self._heading(x, y))
            return self._toward(info, self._heading(x, y)) if self.route else self.actions.turn_left
        if aside:
            self._regrid(frozenset(self.nav.blocked | aside))
            self.nav.avoid(self.avoided)
        else:  # stuck in its own sector (a thing, a corner): route around the cells ahead
            self.avoided |= set(self.route[:4])
            self.nav.avoid(self.avoided)
            if self.goal_cell is not None:  # and whatever it was after there
                self._give_up(self.goal_cell)
        self.route, self.stuck_steps, self.track = [], 0, []
        return int(self.rng.choice([self.actions.backward, self.actions.strafe_left, self.actions.strafe_right]))

    def act(self, info: dict[str, Any]) -> int:
        action = super().act(info)
        self.last_action = self.intended
        if action == self.use and "position" in info:
            from playtester.capture.level_play import used_line

            line = used_line(self.graph, info["position"][0], info["position"][1], float(info["angle"]))
            if line is not None and self.graph.actions[line].kind == EXIT:  # a tester walking the level does not leave it
                return self.actions.turn_left
            if line is not None and line in self.switches and line not in self.pressed:
                self._set_off(line)
            elif line is not None and self._opens_door(line, info["position"][0], info["position"][1]):
                self.opened |= {self.graph.level.linedefs[line].back}
                self._regrid(self.nav.blocked)
                self.nav.avoid(self.avoided)
        return action

    def _opens_door(self, line: int, x: float, y: float) -> bool:
        """Whether USE on `line` from `(x, y)` opens a door by hand not yet opened: a door face,
        its lock open to the keys held, the player on its front (right) side."""
        action = self.graph.actions[line]
        if action.kind != DOOR or not action.manual or not self._unlocked(line) or self.graph.level.linedefs[line].back in self.opened:
            return False
        x1, y1, x2, y2 = self.graph.line_ends[line]
        return (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1) < 0

    def annotations(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"cells_visited": int(self.visited.sum())}


def past_monsters(graph: LevelGraph, rules: str) -> np.ndarray:
    """The coverage cells (`CELL`) the level's graph counts reachable from the start that no player
    gets to under `rules`: under `immortal`, those past a monster standing in the only way (no
    monster moves, nothing fires: `LevelWalker.behind_monsters`); none under the other rules."""
    reachable = graph.reachable_cells(CELL)
    if rules != "immortal":
        return np.zeros_like(reachable)
    from playtester.capture.keymap import load_keymap

    return LevelWalker(graph, load_keymap("level"), np.random.default_rng(0), jitter=0.0).behind_monsters


class WaypointWalk:
    """A scripted walk on a test level, by telemetry: `("go", x, y)` walks to a point (within 24
    units), `("face", degrees)` turns on the spot, `("use",)` presses USE, `("wait", n)` turns in
    place for `n` steps (the view keeps changing, as a trapped player's does), `("forward", n)`
    walks straight on for `n` steps. `act(info)` gives the next action, None once the walk is over.
    For the level tools' tests and benchmarks (`scripts/bench_softlock.py`), never the agent under test."""

    def __init__(self, keymap: KeyMap, plan: list[tuple], *, reach: float = 24.0, patience: int = 120) -> None:
        self.keymap = keymap
        self.plan = list(plan)
        self.reach = reach
        self.patience = patience
        """Steps a `go` may take before the walk gives it up (a point it cannot get to)."""
        self.reset()

    def reset(self) -> None:
        self.index = 0
        self.spent = 0

    def _next(self) -> None:
        self.index += 1
        self.spent = 0

    def act(self, info: dict[str, Any]) -> int | None:
        k = self.keymap.index
        while self.index < len(self.plan):
            what, *args = self.plan[self.index]
            self.spent += 1
            if what == "go":
                x, y = info["position"][0], info["position"][1]
                if math.hypot(args[0] - x, args[1] - y) <= self.reach or self.spent > self.patience:
                    self._next()
                    continue
                err = wrap_angle(bearing(x, y, args[0], args[1]) - float(info["angle"]))
                return k("forward") if abs(err) <= 15.0 else k("turn_left" if err > 0 else "turn_right")
            if what == "face":
                err = wrap_angle(args[0] - float(info["angle"]))
                if abs(err) <= 20.0 or self.spent > self.patience:  # a running turn step turns up to 28°
                    self._next()
                    continue
                return k("turn_left" if err > 0 else "turn_right")
            if what == "use":
                self._next()
                return k("use")
            if what in ("wait", "forward"):
                if self.spent > args[0]:
                    self._next()
                    continue
                return k("turn_left" if what == "wait" else "forward")
            raise UserError(f"waypoint walk: unknown step {what!r}; use go, face, use, wait or forward")
        return None
