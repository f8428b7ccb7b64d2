"""Where a player can go on a Doom level: the level's sectors as a directed graph, read from its
geometry, and the cells reachable from the start.

Each sector is a node. A `Passage` leads from one sector to a neighbour across a two-sided line
that does not block the player outright, when the player fits: the floor ahead is at most
`MAX_STEP` (24) units higher, and there is `PLAYER_HEIGHT` (56) of room between the higher floor
and the lower ceiling. A passage down more than a step is a one-way `DROP` (no passage leads
back up it). What the level's specials move is taken into account (`capture/level_specials.py`):
a door's sector opens to its lowest neighbour's ceiling less 4; a lift's floor stands at its own
height or its lowest neighbour's; a floor mover's at its own or the one it moves to; a
teleporter's line leads to its destination's sector. A special only counts once the player can
set it off: a door worked by hand from a sector already reached, a switch or a walk-over line in
a reached sector, a locked one only with its key, which is picked up where it lies once its
sector is reached. `reachable()` grows the reached sectors to a fixed point over all of these.

So the same graph answers "which cells can a tester reach from the start, doors opened and lifts
ridden" (`reachable_cells`, the share coverage is measured against), "which sectors did no one
reach" (the report), and, for the softlock oracle (`playtester/bugs/softlock.py`), which
sectors can still be reached from where the player is once some lines of one use are spent and
some doors shut for good (`reachable` with a `LevelState`), and whether an exit lies among them
(`exit_within`).

`NavGrid` is the same knowledge at 16 map units a cell, for the scripted level-walk expert: free
cells, and moves between neighbouring cells that the graph allows (walls drawn as barriers).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from playtester.errors import UserError
from playtester.capture.level_map import MAX_STEP, PLAYER_HEIGHT, PLAYER_RADIUS, LevelMap
from playtester.capture.level_specials import (CLOSE, DOOR, EXIT, FLOOR, KEY_THINGS, LIFT, SHOOT, TELEPORT, USE,
                                                LineAction, describe)

WALK, DROP, DOOR_PASSAGE, LIFT_PASSAGE = "walk", "drop", "door", "lift"
"""Kinds of `Passage`: level ground or a step, a drop down more than a step (one way), through a
door's sector, onto or off a lift or a moved floor; teleports are `TELEPORT`."""
RASTER_UNITS = 8.0
"""Map units per pixel of the sector raster that places points in sectors."""
STAND_UNITS = 4.0
"""Map units between the points tried for where the player's centre can stand (`standable`), on
a grid from the level's south-west corner: a passage 32 units wide on an 8-unit grid has its
middle on it."""
KEY_RADIUS = 20.0
"""A key's radius: the player picks it up where their boxes overlap."""
MONSTER_RADII = {3004: 20, 9: 20, 65: 20, 3001: 20, 3002: 30, 58: 30, 3006: 16, 3005: 31, 69: 24, 3003: 24, 68: 64, 71: 31,
                 66: 20, 67: 48, 64: 20, 16: 40, 7: 128, 84: 20, 72: 16}
"""Doom's monsters by editor number, with their radius in map units."""
ENTER_REACH = PLAYER_RADIUS + 3 * STAND_UNITS
"""Map units from a passage's line within which a standable point is beside it (`LevelGraph.entered`):
the foot of a drop keeps `PLAYER_RADIUS` from the ledge's line."""
USE_RANGE = 64.0
"""How far from the player's centre a line can be pressed (Doom's `USERANGE`)."""
DOOR_GAP = 4.0
"""A door opens to this far below its lowest neighbouring ceiling."""
PLAYER_START = 1


@dataclass(frozen=True)
class Passage:
    """A way from sector `source` to sector `target`: across `line`, or through its teleporter."""

    source: int
    target: int
    kind: str
    line: int


@dataclass(frozen=True)
class Door:
    """A door: its sector, the lines that open it (its own faces, or switches and walk-over lines
    elsewhere), and the key it needs."""

    sector: int
    lines: tuple[int, ...]
    manual: bool
    """Opened by hand on its own faces (USE), not from a switch elsewhere."""
    key: str | None


@dataclass
class SectorState:
    """The heights a sector can have once the specials reached so far have been set off."""

    floors: set[float]
    ceiling: float


@dataclass(frozen=True)
class LevelState:
    """What has happened on a level so far, for `LevelGraph.reachable`: the special lines set off
    (`fired`), the keys held, and how high the player climbs (`MAX_STEP`; higher where it can jump)."""

    fired: frozenset[int] = frozenset()
    keys: frozenset[str] = frozenset()
    climb: float = MAX_STEP


@dataclass
class LevelGraph:
    """The sectors of a `LevelMap` as a directed graph; see the module's docstring."""

    level: LevelMap
    guards: bool = False
    """Monsters stand where the level puts them (`immortal`: notarget, and nothing to fire): a key
    one stands over cannot be picked up (MAP10's red key under its cacodemon)."""
    actions: list[LineAction | None] = field(init=False)
    """Each linedef's special, described (None: it moves nothing the graph models)."""

    def __post_init__(self) -> None:
        self._reached: frozenset[int] | None = None
        self.actions = [describe(ld.special, udmf=self.level.udmf, args=ld.args, flags=ld.flags) for ld in self.level.linedefs]
        self.neighbours: list[set[int]] = [set() for _ in self.level.sectors]
        for ld in self.level.linedefs:
            if ld.front is not None and ld.back is not None and ld.front != ld.back:
                self.neighbours[ld.front].add(ld.back)
                self.neighbours[ld.back].add(ld.front)

    # -- places --------------------------------------------------------------------------------
    @cached_property
    def line_ends(self) -> np.ndarray:
        """`N × 4`: each linedef's `x1, y1, x2, y2`."""
        v = self.level.vertices
        return np.array([[*v[ld.v1], *v[ld.v2]] for ld in self.level.linedefs], dtype=float).reshape(-1, 4)

    @cached_property
    def raster(self) -> np.ndarray:
        """Sector index of every `RASTER_UNITS` pixel over the level's bounds (row 0 north), -1 outside."""
        return self.level.sector_raster(RASTER_UNITS)

    def sector_at(self, x: float, y: float) -> int | None:
        """The sector a point lies in, or None outside every sector."""
        x0, _, _, y1 = self.level.bounds
        row, col = int((y1 - y) // RASTER_UNITS), int((x - x0) // RASTER_UNITS)
        h, w = self.raster.shape
        if not (0 <= row < h and 0 <= col < w):
            return None
        s = int(self.raster[row, col])
        return None if s < 0 else s

    def near_sector(self, x: float, y: float, slack: int = 1) -> bool:
        """Whether a point lies in a sector or within `slack` raster pixels of one (the raster's
        edges are a pixel off the lines)."""
        x0, _, _, y1 = self.level.bounds
        row, col = int((y1 - y) // RASTER_UNITS), int((x - x0) // RASTER_UNITS)
        h, w = self.raster.shape
        patch = self.raster[max(0, row - slack):max(0, row + slack + 1), max(0, col - slack):max(0, col + slack + 1)]
        return 0 <= row < h and 0 <= col < w and bool((patch >= 0).any())

    def start(self) -> tuple[float, float, float]:
        """The player's start `(x, y, angle)`; a `UserError` when the map has none."""
        for t in self.level.things:
            if t.type == PLAYER_START:
                return t.x, t.y, t.angle
        raise UserError(f"map {self.level.name}: it has no player start (a thing of type 1)")

    def start_sector(self) -> int:
        x, y, _ = self.start()
        s = self.sector_at(x, y)
        if s is None:
            raise UserError(f"map {self.level.name}: its player start ({x:.0f}, {y:.0f}) lies outside every sector")
        return s

    # -- what specials move --------------------------------------------------------------------
    def targets(self, line: int) -> list[int]:
        """The sectors line `line`'s special moves: its back sector when worked by hand, else the
        sectors tagged like it (none for a teleport or an exit)."""
        action, ld = self.actions[line], self.level.linedefs[line]
        if action is None or action.kind in (TELEPORT, EXIT):
            return []
        if action.manual:
            return [ld.back] if ld.back is not None else []
        if not ld.tag:
            return []
        return [i for i, s in enumerate(self.level.sectors) if s.tag == ld.tag]

    @cached_property
    def doors(self) -> list[Door]:
        """Every door sector, with the lines that open it."""
        by_sector: dict[int, list[int]] = {}
        for i, action in enumerate(self.actions):
            if action is not None and action.kind == DOOR:
                for s in self.targets(i):
                    by_sector.setdefault(s, []).append(i)
        out = []
        for s, lines in sorted(by_sector.items()):
            manual = all(self.actions[i].manual for i in lines)
            keys = {self.actions[i].key for i in lines}
            out.append(Door(s, tuple(lines), manual, keys.pop() if len(keys) == 1 else None))
        return out

    @cached_property
    def _door_sectors(self) -> frozenset[int]:
        return frozenset(d.sector for d in self.doors)

    def door_sectors(self) -> frozenset[int]:
        return self._door_sectors

    def trigger_sectors(self, line: int) -> list[int]:
        """Where the player stands to set a line off: its front (a switch's face, a door's face), or
        either side of a walk-over line; a line pressed (USE) also from the sectors across an open
        line within the player's reach of it (`_reaches_over`: a switch on a ledge too high to climb)."""
        ld, action = self.level.linedefs[line], self.actions[line]
        sides = [ld.front] if action is not None and action.trigger in (USE, SHOOT) else [ld.front, ld.back]
        if action is not None and action.trigger == USE:
            sides += self._reaches_over.get(line, [])
        return [s for s in sides if s is not None]

    @cached_property
    def _reaches_over(self) -> dict[int, list[int]]:
        """Per line pressed with USE: the other sectors the player presses it from. Doom's use reaches
        `USE_RANGE` from the player's centre, through any line with room between floor and ceiling:
        a neighbour of the line's front sector counts when such a line between them lies within
        `USE_RANGE - PLAYER_RADIUS` of it (the player stands against that line)."""
        lines = self.level.linedefs
        ends = self.line_ends
        out: dict[int, list[int]] = {}
        for i, action in enumerate(self.actions):
            front = lines[i].front
            if action is None or action.trigger != USE or front is None:
                continue
            near = []
            for j, ld in enumerate(lines):
                if ld.front is None or ld.back is None or front not in (ld.front, ld.back) or ld.front == ld.back:
                    continue
                other = ld.back if ld.front == front else ld.front
                a, b = self.level.sectors[front], self.level.sectors[other]
                if other in near or min(a.ceiling, b.ceiling) <= max(a.floor, b.floor):
                    continue
                if _segments_distance(ends[i], ends[j]) <= USE_RANGE - PLAYER_RADIUS:
                    near.append(other)
            if near:
                out[i] = near
        return out

    def states(self, active: set[int], shut: frozenset[int] = frozenset()) -> list[SectorState]:
        """Each sector's possible floors and highest ceiling once the lines `active` have been set
        off; the sectors `shut` (doors closed for good) start with their ceiling on their floor."""
        sectors = self.level.sectors
        out = [SectorState({s.floor}, s.floor if i in shut else s.ceiling) for i, s in enumerate(sectors)]
        for line in sorted(active):
            action = self.actions[line]
            for s in self.targets(line):
                near = [sectors[n] for n in self.neighbours[s]] or [sectors[s]]
                if action.kind == DOOR:
                    out[s].ceiling = max(out[s].ceiling, min(n.ceiling for n in near) - DOOR_GAP)
                elif action.kind == LIFT:
                    out[s].floors.add(min(n.floor for n in near))
                elif action.kind == FLOOR:
                    out[s].floors.add(_floor_target(action.floor, sectors[s], near))
        return out

    # -- passages and reach --------------------------------------------------------------------
    def passages(self, active: set[int] | None = None, *, climb: float = MAX_STEP,
                 shut: frozenset[int] = frozenset()) -> list[Passage]:
        """Every passage once the lines `active` (default: every line with a special) are set off,
        for a player who climbs `climb` units (a step; more where it can jump), the sectors `shut`
        closed unless an active door opens them. With none of them given (every special set off:
        what `standable`, `entered` and `can_return` ask) the list is worked out once a graph."""
        if active is None and climb == MAX_STEP and not shut:
            return list(self._every_passage)
        return self._passages(active, climb, shut)

    @cached_property
    def _every_passage(self) -> tuple[Passage, ...]:
        return tuple(self._passages(None, MAX_STEP, frozenset()))

    def _passages(self, active: set[int] | None, climb: float, shut: frozenset[int]) -> list[Passage]:
        active = set(i for i, a in enumerate(self.actions) if a is not None) if active is None else active
        states = self.states(active, shut)
        doors = self.door_sectors()
        moved = {s for line in active for s in self.targets(line) if self.actions[line].kind in (LIFT, FLOOR)}
        out = []
        for i, ld in enumerate(self.level.linedefs):
            if ld.front is None or ld.back is None or ld.front == ld.back or ld.blocking \
                    or self._openings[min(ld.front, ld.back), max(ld.front, ld.back)] < 2 * PLAYER_RADIUS:
                continue
            for a, b in ((ld.front, ld.back), (ld.back, ld.front)):
                kind = self._passage_kind(a, b, states, doors, moved, climb)
                if kind is not None:
                    out.append(Passage(a, b, kind, i))
        for i in sorted(active):
            if self.actions[i].kind == TELEPORT and not self.actions[i].monsters_only:
                target = self.teleport_target(i)
                if target is not None and self.level.linedefs[i].front is not None:
                    out.append(Passage(self.level.linedefs[i].front, target, TELEPORT, i))
        return out

    @cached_property
    def _openings(self) -> dict[tuple[int, int], float]:
        """Per pair of sectors `(low, high)`: the length of the open lines between them. Less than
        the player's width (a sliver's 11-unit end on MAP07) lets no player through."""
        out: dict[tuple[int, int], float] = {}
        for i, ld in enumerate(self.level.linedefs):
            if ld.front is not None and ld.back is not None and ld.front != ld.back and not ld.blocking:
                pair = (min(ld.front, ld.back), max(ld.front, ld.back))
                x1, y1, x2, y2 = self.line_ends[i]
                out[pair] = out.get(pair, 0.0) + float(np.hypot(x2 - x1, y2 - y1))
        return out

    @cached_property
    def narrow(self) -> frozenset[int]:
        """Sectors with no point `PLAYER_RADIUS` from their edges (on the raster): a player whose
        centre is over one stands on a neighbour's floor (a door's thickness, a trench's width). The
        graph still counts a drop into one as reaching it (stairs down, one tread at a time, pass
        so), and no passage over one (Doom walks the player over a trench narrower than itself,
        as Freedoom 2 MAP01's before its exit: not modelled); its cells hold no point to stand on
        (`standable`)."""
        from scipy.ndimage import distance_transform_edt, find_objects

        out = set()
        for sector, where in enumerate(find_objects(self.raster + 1)):  # each sector's bounding box, one pass
            if where is not None:
                mask = np.pad(self.raster[where] == sector, 1)
                if distance_transform_edt(mask).max() * RASTER_UNITS < PLAYER_RADIUS:
                    out.add(sector)
        return frozenset(out)

    def _passage_kind(self, a: int, b: int, states: list[SectorState], doors: set[int], moved: set[int],
                      climb: float = MAX_STEP) -> str | None:
        sa, sb = states[a], states[b]
        base_a, base_b = self.level.sectors[a].floor, self.level.sectors[b].floor
        fits = [(fa, fb) for fa in sa.floors for fb in sb.floors
                if fb - fa <= climb and min(sa.ceiling, sb.ceiling) - max(fa, fb) >= PLAYER_HEIGHT and sb.ceiling - fb >= PLAYER_HEIGHT]
        if not fits:
            return None
        if a in doors or b in doors:
            return DOOR_PASSAGE
        if (base_a, base_b) not in fits and (a in moved or b in moved):
            return LIFT_PASSAGE
        if base_b - base_a < -climb:
            return DROP
        return WALK

    def teleport_target(self, line: int) -> int | None:
        """The sector a teleporter line sends the player to (its destination thing's)."""
        dest = self.teleport_destination(line)
        return None if dest is None else self.sector_at(dest.x, dest.y)

    def teleport_destination(self, line: int):
        """The destination thing a teleporter line sends the player to, or None."""
        ld = self.level.linedefs[line]
        destinations = [t for t in self.level.things if t.type == 14]
        if self.level.udmf:
            tid, tag = (ld.args + (0, 0))[:2]
            picks = [t for t in destinations if (tid and t.tid == tid) or
                     (not tid and tag and self._tag_of(t) == tag)]
        else:
            picks = [t for t in destinations if ld.tag and self._tag_of(t) == ld.tag]
        for t in picks:
            if self.sector_at(t.x, t.y) is not None:
                return t
        return None

    def _tag_of(self, thing) -> int | None:
        s = self.sector_at(thing.x, thing.y)
        return None if s is None else self.level.sectors[s].tag

    def reachable(self, start: int | None = None, state: LevelState | None = None) -> set[int]:
        """The sectors the player can reach from `start` (default: the player start's), setting
        off every special it can reach and picking up every key it finds, to a fixed point.

        `state` is what has happened on the level already (`LevelState`): lines of one use that
        were set off cannot be set off again (what they moved for a while is back; what they moved
        for good stays, a door closed for good is shut), the keys held open their locks, and a
        player who can jump climbs higher. None: the level as it starts."""
        if start is None and state is None:
            if self._reached is None:
                self._reached = frozenset(self.reachable(self.start_sector()))
            return set(self._reached)
        start = self.start_sector() if start is None else start
        state = state or LevelState()
        fired = state.fired
        lasting = {i for i in fired if self.actions[i] is not None and self.actions[i].lasts and self.actions[i].kind != CLOSE}
        shut = frozenset(s for i in fired if self.actions[i] is not None and self.actions[i].kind == CLOSE
                         and self.actions[i].lasts for s in self.targets(i))
        reached = {start}
        keys: set[str] = set(state.keys)
        while True:
            active = lasting | {i for i, a in enumerate(self.actions) if a is not None and (a.key is None or a.key in keys)
                                and a.kind != EXIT and (a.repeat or i not in fired)
                                and any(s in reached for s in self.trigger_sectors(i))}
            grown = self._bfs(start, self.passages(active, climb=state.climb, shut=shut))
            found = keys | {KEY_THINGS[t.type] for t in self.keys_lying() if self.sector_at(t.x, t.y) in grown}
            if grown == reached and found == keys:
                return reached
            reached, keys = grown, found

    def keys_lying(self) -> list:
        """The level's keys that a player can pick up: all, but (`guards`) those a standing monster
        covers (its box grown by the player's reaches over every place the player would touch the key from)."""
        keys = [t for t in self.level.things if t.type in KEY_THINGS]
        if not self.guards:
            return keys
        touch = PLAYER_RADIUS + KEY_RADIUS
        monsters = [(t.x, t.y, PLAYER_RADIUS + MONSTER_RADII[t.type]) for t in self.level.things if t.type in MONSTER_RADII]
        return [k for k in keys if not any(abs(mx - k.x) + touch <= reach and abs(my - k.y) + touch <= reach
                                           for mx, my, reach in monsters)]

    @cached_property
    def exits(self) -> list[int]:
        """The lines that end the level (an exit switch or line, the secret exit too)."""
        return [i for i, a in enumerate(self.actions) if a is not None and a.kind == EXIT]

    def exit_within(self, sectors: set[int], keys: frozenset[str] = frozenset()) -> int | None:
        """An exit line the player can set off from `sectors` with `keys` (the keys found in
        `sectors` count), or None."""
        found = set(keys) | {KEY_THINGS[t.type] for t in self.keys_lying() if self.sector_at(t.x, t.y) in sectors}
        for i in self.exits:
            key = self.actions[i].key
            if (key is None or key in found) and any(s in sectors for s in self.trigger_sectors(i)):
                return i
        return None

    @staticmethod
    def _bfs(start: int, passages: list[Passage]) -> set[int]:
        out: dict[int, list[int]] = {}
        for p in passages:
            out.setdefault(p.source, []).append(p.target)
        seen = {start}
        queue = deque([start])
        while queue:
            for nxt in out.get(queue.popleft(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return seen

    def can_return(self, sector: int, to: int | None = None) -> bool:
        """Whether the player can get back from `sector` to `to` (default: the start's sector)
        with every special set off: False in a pit or beyond a one-way drop."""
        to = self.start_sector() if to is None else to
        return to in self._bfs(sector, self.passages())

    # -- cells -------------------------------------------------------------------------------
    def walkable_sectors(self) -> np.ndarray:
        """Per sector: whether the player can stand in it, once its specials have moved it."""
        states = self.states({i for i, a in enumerate(self.actions) if a is not None})
        return np.array([min(st.floors) <= st.ceiling - PLAYER_HEIGHT for st in states])

    def reachable_cells(self, cell: float, sectors: set[int] | None = None) -> np.ndarray:
        """Cells of an `OccupancyGrid` over the level's bounds (row 0 south) of which at least a
        quarter is walkable ground in a reachable sector (`sectors`; default: `reachable()`) and
        that hold a point where the player's centre can stand in one (`standable`): a strip along
        a wall thinner than the player's radius is no cell a player can be in."""
        sectors = self.reachable() if sectors is None else sectors
        keep = np.zeros(len(self.level.sectors) + 1, dtype=bool)
        keep[list(sectors)] = True
        keep[:-1] &= self.walkable_sectors() | np.array([self.level.walkable_sector(i) for i in range(len(self.level.sectors))])
        quarter = self.level.cells_of(lambda raster: keep[raster], cell)
        stand = self.standable(keep)
        stand &= self.entered(stand)
        k = int(round(cell / STAND_UNITS))
        stand[::k, :] = False  # a point on a cell's south or west edge is no way into it
        stand[:, ::k] = False
        rows, cols = quarter.shape
        padded = np.zeros((rows * k, cols * k), dtype=bool)
        padded[:min(stand.shape[0], rows * k), :min(stand.shape[1], cols * k)] = stand[:rows * k, :cols * k]
        return quarter & padded.reshape(rows, k, cols, k).any(axis=(1, 3))

    def standable(self, keep: np.ndarray) -> np.ndarray:
        """Points every `STAND_UNITS` over the level's bounds (row 0 south; point `(i, j)` at
        `x0 + j·STAND_UNITS, y0 + i·STAND_UNITS`) where the player's centre can stand: in a sector
        `keep` picks (indexed by sector, -1 last), `PLAYER_RADIUS` or more from every line it
        cannot cross. A wall is a one-sided or blocking line or one the graph passes neither way,
        and, for a point in a sector, that sector's line it cannot cross from there (the foot of
        a ledge, a low opening)."""
        px, py, sector = self._stand_points
        ok = keep[sector]
        crossed = {(p.line, p.source) for p in self.passages() if p.kind != TELEPORT}
        reach = PLAYER_RADIUS - 1e-6
        for i, ld in enumerate(self.level.linedefs):
            sides = [s for s in (ld.front, ld.back) if s is not None and (i, s) not in crossed]
            if ld.front == ld.back and ld.front is not None and not ld.blocking:
                continue
            if (not sides and not ld.blocking) or not keep[[-1 if s is None else s for s in (ld.front, ld.back)]].any():
                continue
            wall = ld.blocking or ld.front is None or ld.back is None or len(sides) == 2
            ax, ay, bx, by = self.line_ends[i]
            r0, r1, c0, c1 = self._points_near(min(ax, bx), max(ax, bx), min(ay, by), max(ay, by), reach)
            if c0 >= c1 or r0 >= r1:
                continue
            near = _segment_distance(px[c0:c1][None, :], py[r0:r1][:, None], ax, ay, bx, by) < reach
            if not wall:  # a wall only from its sides that cannot cross it
                near &= np.isin(sector[r0:r1, c0:c1], sides)
            ok[r0:r1, c0:c1] &= ~near
        return ok

    @cached_property
    def _stand_points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The points `standable` tries: their x (per column), y (per row, row 0 south) and sector (-1: none)."""
        x0, y0, x1, y1 = self.level.bounds
        u = STAND_UNITS
        cols, rows = int(np.ceil((x1 - x0) / u)), int(np.ceil((y1 - y0) / u))
        px, py = x0 + np.arange(cols) * u, y0 + np.arange(rows) * u
        h, w = self.raster.shape
        rr = ((y1 - py) // RASTER_UNITS).astype(int).clip(0, h - 1)
        cc = ((px - x0) // RASTER_UNITS).astype(int).clip(0, w - 1)
        return px, py, self.raster[rr[:, None], cc[None, :]]

    def _points_near(self, x0: float, x1: float, y0: float, y1: float, reach: float) -> tuple[int, int, int, int]:
        """The rows `r0:r1` and columns `c0:c1` of the standable points within `reach` of the box
        `x0..x1, y0..y1` (a box round a line or a point; the points' distances are the caller's)."""
        px, py, _ = self._stand_points
        return (int(np.searchsorted(py, y0 - reach)), int(np.searchsorted(py, y1 + reach)),
                int(np.searchsorted(px, x0 - reach)), int(np.searchsorted(px, x1 + reach)))

    def entered(self, stand: np.ndarray) -> np.ndarray:
        """The points of `stand` (`standable`'s) that the player gets to from the start: a sector
        in `reachable()` can have parts no passage enters (MAP07's monster closets are far parts of
        sectors 159 and 190 behind a strip the player never crosses). The points fall into parts
        the player walks between (joined where they touch), and each passage (every special set
        off) leads from the parts of its source sector beside its line (within `ENTER_REACH`) to
        those of its target beside it, a teleporter to the part its destination stands in; the
        parts led to from the start's are entered."""
        import cv2

        count, parts = cv2.connectedComponents(stand.astype(np.uint8), connectivity=4)
        sector = self._stand_points[2]
        edges: dict[int, set[int]] = {}
        for p in self.passages():
            sources = self._parts_beside(parts, sector, p.line, p.source)
            if p.kind == TELEPORT:
                dest = self.teleport_destination(p.line)
                targets = {self._part_at(parts, dest.x, dest.y) or -1 - p.target} if dest is not None else set()
            else:
                targets = self._parts_beside(parts, sector, p.line, p.target)
            for a in sources:
                edges.setdefault(a, set()).update(targets)
        x, y = self.start()[:2]
        seen = {self._part_at(parts, x, y)} - {0}
        if not seen:  # the start stands on no standable point: nothing to tell parts apart from
            return np.ones_like(stand)
        queue = deque(seen)
        while queue:
            for nxt in edges.get(queue.popleft(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        keep = np.zeros(count, dtype=bool)
        keep[[part for part in seen if part > 0]] = True
        return keep[parts]

    def _part_at(self, parts: np.ndarray, x: float, y: float) -> int:
        """The part (`entered`) of the standable point nearest `(x, y)` within `ENTER_REACH`; 0: none."""
        px, py, _ = self._stand_points
        r0, r1, c0, c1 = self._points_near(x, x, y, y, ENTER_REACH)
        window = parts[r0:r1, c0:c1]
        if not window.any():
            return 0
        d = np.hypot(px[c0:c1][None, :] - x, py[r0:r1][:, None] - y)
        d[window == 0] = np.inf
        return int(window.flat[int(np.argmin(d))])

    def _parts_beside(self, parts: np.ndarray, sector: np.ndarray, line: int, side: int) -> set[int]:
        """The parts (`entered`) with a point in sector `side` within `ENTER_REACH` of a line; where
        there is none (a door's thickness, a tread too thin to stand on), the sector itself as
        `-1 - side`, through which the passages into it and out of it join."""
        px, py, _ = self._stand_points
        ax, ay, bx, by = self.line_ends[line]
        r0, r1, c0, c1 = self._points_near(min(ax, bx), max(ax, bx), min(ay, by), max(ay, by), ENTER_REACH)
        window = parts[r0:r1, c0:c1]
        near = (_segment_distance(px[c0:c1][None, :], py[r0:r1][:, None], ax, ay, bx, by) < ENTER_REACH) \
            & (sector[r0:r1, c0:c1] == side) & (window > 0)
        return set(np.unique(window[near]).tolist()) or {-1 - side}


def _segments_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Least distance between the segments `p` and `q` (each `x1, y1, x2, y2`) that do not cross:
    from an end of one to the other."""
    return float(min(_segment_distance(p[0], p[1], *q), _segment_distance(p[2], p[3], *q),
                     _segment_distance(q[0], q[1], *p), _segment_distance(q[2], q[3], *p)))


def _segment_distance(x: np.ndarray, y: np.ndarray, ax: float, ay: float, bx: float, by: float) -> np.ndarray:
    """Distance from points `(x, y)` (arrays that broadcast) to the segment from `(ax, ay)` to `(bx, by)`."""
    dx, dy = bx - ax, by - ay
    t = np.clip(((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy or 1.0), 0.0, 1.0)
    return np.hypot(x - ax - t * dx, y - ay - t * dy)


def _floor_target(where: str, sector, near: list) -> float:
    """The height a floor special moves `sector`'s floor to (`LineAction.floor`)."""
    floors = [n.floor for n in near]
    if where == "lowest":
        return min(floors + [sector.floor])
    if where == "highest":
        return max(floors)
    if where == "highest+8":
        return max(floors) + 8
    if where == "+24":
        return sector.floor + 24
    if where == "ceiling":
        return min(n.ceiling for n in near)
    higher = [f for f in floors if f > sector.floor]
    return min(higher) if higher else sector.floor  # next
