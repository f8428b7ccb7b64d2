"""The park's layout: a grid of terrain cells, pathways, lakes, bridges, invisible walls, OOIs.

Everything here is plain data computed from a seed, with no engine involved, so the layout is
also the scenario's ground truth (`park.json`). The WAD writer turns it into a UDMF map.

Coordinates are Doom map units: cell `(col, row)` spans `x ∈ [col·cell, (col+1)·cell)` and
`y ∈ [row·cell, (row+1)·cell)`; `y` grows to the north, angles are degrees counter-clockwise
from east (as ViZDoom reports `ANGLE`).
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from playtester.errors import UserError

GRASS, PATH, WATER, BRIDGE = 0, 1, 2, 3
TERRAIN_NAMES = {GRASS: "grass", PATH: "path", WATER: "water", BRIDGE: "bridge"}
TERRAIN_CHARS = {GRASS: "g", PATH: "p", WATER: "w", BRIDGE: "b"}
OOI_KINDS = ("pillar", "barrel", "tire", "chair")
BUG_KINDS = ("stretched", "lowres")
LAYOUT_VERSION = 3


@dataclass(frozen=True)
class ParkConfig:
    """What a park is generated from."""

    seed: int = 0
    """Seed of every random choice: the same seed gives the same park."""
    cols: int = 40
    """Width in cells."""
    rows: int = 40
    """Height in cells."""
    cell: int = 128
    """Cell size in map units (the player is 32 units wide)."""
    path_spacing: int = 6
    """Mean distance in cells between pathway junctions."""
    lake_density: float = 1 / 180
    """Lakes per cell."""
    ooi_density: float = 1 / 7
    """OOIs per pathway cell."""
    enclosed_share: float = 0.05
    """Share of OOIs boxed in by invisible walls (unreachable, as the paper found)."""
    n_starts: int = 48
    """Number of start points spread over the park."""

    def __post_init__(self) -> None:
        if self.cols < 8 or self.rows < 8:
            raise UserError(f"park size {self.cols}x{self.rows}: a park needs at least 8x8 cells")
        if self.cols * self.rows > 128 * 128:
            raise UserError(f"park size {self.cols}x{self.rows}: at most 128x128 cells")
        if self.cell < 64:
            raise UserError(f"park cell size {self.cell}: use at least 64 map units")

    @property
    def slug(self) -> str:
        return f"park-v{LAYOUT_VERSION}-s{self.seed}-{self.cols}x{self.rows}-c{self.cell}"


@dataclass
class OOI:
    """An object of interest: its kind, its bug (None, `stretched` or `lowres`), where it stands."""

    id: int
    kind: str
    bug: str | None
    x: float
    y: float
    reachable: bool = True

    @property
    def actor(self) -> str:
        """The engine's actor name; it encodes kind and bug so they can be read back."""
        return actor_name(self.kind, self.bug)


_BUG_SUFFIX = {None: "", "stretched": "Stretched", "lowres": "Lowres"}


def actor_name(kind: str, bug: str | None) -> str:
    """The engine actor of an OOI kind and bug, such as `OOIBarrelLowres`."""
    return f"OOI{kind.capitalize()}{_BUG_SUFFIX[bug]}"


_ACTORS = {actor_name(kind, bug): (kind, bug) for kind in OOI_KINDS for bug in (None, *BUG_KINDS)}


def parse_actor(name: str) -> tuple[str, str | None] | None:
    """`(kind, bug)` from an actor name such as `OOIBarrelLowres`; None for other actors."""
    return _ACTORS.get(name)


@dataclass
class Start:
    x: float
    y: float
    on_path: bool


@dataclass
class ParkLayout:
    """A generated park: terrain grid and everything placed on it."""

    config: ParkConfig
    grid: np.ndarray
    """`rows × cols` terrain codes (GRASS, PATH, WATER, BRIDGE); row 0 is the south edge."""
    walls: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Invisible walls as grid edges `(x0, y0, x1, y1)` in cell corner units (unit length)."""
    oois: list[OOI] = field(default_factory=list)
    starts: list[Start] = field(default_factory=list)

    # -- geometry --------------------------------------------------------------------------
    @property
    def bounds(self) -> tuple[float, float, float, float]:
        c = self.config.cell
        return (0.0, 0.0, float(self.config.cols * c), float(self.config.rows * c))

    def cell_of(self, x: float, y: float) -> tuple[int, int]:
        """`(col, row)` of a map position, clipped to the park."""
        c = self.config.cell
        col = int(np.clip(math.floor(x / c), 0, self.config.cols - 1))
        row = int(np.clip(math.floor(y / c), 0, self.config.rows - 1))
        return col, row

    def centre(self, col: int, row: int) -> tuple[float, float]:
        c = self.config.cell
        return ((col + 0.5) * c, (row + 0.5) * c)

    def terrain_at(self, x: float, y: float) -> int:
        col, row = self.cell_of(x, y)
        return int(self.grid[row, col])

    def on_pathway(self, x: float, y: float) -> bool:
        """Whether a position is on the preferred area (pathways and bridges)."""
        return self.terrain_at(x, y) in (PATH, BRIDGE)

    @property
    def pathway_mask(self) -> np.ndarray:
        return np.isin(self.grid, (PATH, BRIDGE))

    def walkable(self) -> np.ndarray:
        return self.grid != WATER

    def wall_set(self) -> set[tuple[int, int, int, int]]:
        return {tuple(w) for w in self.walls}

    def neighbours(self, col: int, row: int, *, only: np.ndarray | None = None):
        """4-neighbours that can be walked to from a cell (no water, no invisible wall between)."""
        walls = self._wall_lookup()
        allowed = self.walkable() if only is None else only
        for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            c2, r2 = col + dc, row + dr
            if not (0 <= c2 < self.config.cols and 0 <= r2 < self.config.rows):
                continue
            if not allowed[r2, c2] or _edge_between(col, row, c2, r2) in walls:
                continue
            yield c2, r2

    def _wall_lookup(self) -> set[tuple[int, int, int, int]]:
        cache = getattr(self, "_walls_cache", None)
        if cache is None or cache[0] != len(self.walls):
            cache = (len(self.walls), self.wall_set())
            object.__setattr__(self, "_walls_cache", cache)
        return cache[1]

    def route(self, start: tuple[int, int], goal: tuple[int, int], *, only: np.ndarray | None = None):
        """Shortest 4-connected cell route from `start` to `goal`, or None when there is none."""
        return self._search(start, lambda cell: cell == goal, only)

    def route_to_nearest(self, start: tuple[int, int], targets: np.ndarray):
        """Shortest walkable route from `start` to the nearest cell where `targets` (rows × cols)
        is true, or None when none can be reached."""
        return self._search(start, lambda cell: bool(targets[cell[1], cell[0]]), None)

    def _search(self, start: tuple[int, int], is_goal, only: np.ndarray | None):
        """Breadth-first route from `start` to the first cell for which `is_goal` holds."""
        prev = {start: None}
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            if is_goal(cur):
                path = []
                while cur is not None:
                    path.append(cur)
                    cur = prev[cur]
                return path[::-1]
            for nxt in self.neighbours(*cur, only=only):
                if nxt not in prev:
                    prev[nxt] = cur
                    queue.append(nxt)
        return None

    def straight_walk(self, x0: float, y0: float, x1: float, y1: float, *, margin: float = 20.0) -> bool:
        """Whether a player can walk the straight line from `(x0, y0)` to `(x1, y1)`: every cell
        its body sweeps (the line and two lines `margin` either side of it) is walkable, and no
        step from cell to cell crosses an invisible wall or cuts a corner between two blocked cells."""
        length = math.hypot(x1 - x0, y1 - y0)
        n = max(1, int(math.ceil(length / (self.config.cell / 8))))
        nx, ny = ((y0 - y1) / length, (x1 - x0) / length) if length else (0.0, 0.0)
        walkable = self.walkable()
        for side in (0.0, margin, -margin):
            prev = None
            for i in range(n + 1):
                t = i / n
                cell = self.cell_of(x0 + t * (x1 - x0) + side * nx, y0 + t * (y1 - y0) + side * ny)
                if not walkable[cell[1], cell[0]]:
                    return False
                if prev is not None and cell != prev and not self._step_open(prev, cell):
                    return False
                prev = cell
        return True

    def _step_open(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        """Whether a short straight step from cell `a` to cell `b` (4- or 8-adjacent) is open."""
        if max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 1:
            return False  # sampled finely enough that this does not happen; refuse rather than guess
        from_a = set(self.neighbours(*a))
        if abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1:
            return b in from_a
        corners = ((b[0], a[1]), (a[0], b[1]))  # a diagonal step passes one of the two cells beside it
        return any(m in from_a and b in set(self.neighbours(*m)) for m in corners)

    def reachable_from(self, start: tuple[int, int]) -> np.ndarray:
        seen = np.zeros_like(self.grid, dtype=bool)
        seen[start[1], start[0]] = True
        queue = deque([start])
        while queue:
            cur = queue.popleft()
            for c2, r2 in self.neighbours(*cur):
                if not seen[r2, c2]:
                    seen[r2, c2] = True
                    queue.append((c2, r2))
        return seen

    # -- ground truth file ---------------------------------------------------------------------
    def to_json(self) -> dict:
        rows = ["".join(TERRAIN_CHARS[int(v)] for v in row) for row in self.grid]
        return {
            "format_version": LAYOUT_VERSION,
            "config": asdict(self.config),
            "bounds": list(self.bounds),
            "cell": self.config.cell,
            "terrain": {"rows_south_to_north": rows, "codes": {v: TERRAIN_NAMES[k] for k, v in TERRAIN_CHARS.items()}},
            "pathways": [list(r) for r in self.pathway_rects()],
            "invisible_walls": [[v * self.config.cell for v in w] for w in self.walls],
            "oois": [asdict(o) | {"actor": o.actor} for o in self.oois],
            "starts": [asdict(s) for s in self.starts],
        }

    def pathway_rects(self) -> list[tuple[float, float, float, float]]:
        """Pathway geometry as map rectangles `(x0, y0, x1, y1)`, horizontal runs of cells."""
        c = self.config.cell
        rects = []
        mask = self.pathway_mask
        for row in range(self.config.rows):
            col = 0
            while col < self.config.cols:
                if mask[row, col]:
                    start = col
                    while col < self.config.cols and mask[row, col]:
                        col += 1
                    rects.append((start * c, row * c, col * c, (row + 1) * c))
                else:
                    col += 1
        return rects

    def save(self, path: str | Path) -> None:
        from playtester.files import write_text_atomic

        write_text_atomic(Path(path), json.dumps(self.to_json(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "ParkLayout":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
            config = ParkConfig(**data["config"])
            chars = {v: k for k, v in TERRAIN_CHARS.items()}
            rows = data["terrain"]["rows_south_to_north"]
            grid = np.array([[chars[ch] for ch in row] for row in rows], dtype=np.uint8)
            cellsz = config.cell
            walls = [tuple(int(round(v / cellsz)) for v in w) for w in data["invisible_walls"]]
            oois = [OOI(**{k: o[k] for k in ("id", "kind", "bug", "x", "y", "reachable")}) for o in data["oois"]]
            starts = [Start(**s) for s in data["starts"]]
        except FileNotFoundError:
            raise UserError(f"park ground truth {path}: file not found") from None
        except (KeyError, ValueError, TypeError) as e:
            raise UserError(f"park ground truth {path}: malformed ({e}); regenerate it") from None
        return cls(config=config, grid=grid, walls=walls, oois=oois, starts=starts)


def _edge_between(c1: int, r1: int, c2: int, r2: int) -> tuple[int, int, int, int]:
    """The grid edge between two 4-adjacent cells, in corner units, as `(x0, y0, x1, y1)`."""
    if r1 == r2:
        x = max(c1, c2)
        return (x, r1, x, r1 + 1)
    y = max(r1, r2)
    return (c1, y, c1 + 1, y)


def cell_edges(col: int, row: int) -> list[tuple[int, int, int, int]]:
    """The four edges around a cell."""
    return [
        (col, row, col + 1, row), (col, row + 1, col + 1, row + 1),
        (col, row, col, row + 1), (col + 1, row, col + 1, row + 1),
    ]


# -- generation ------------------------------------------------------------------------------

def generate_park(config: ParkConfig) -> ParkLayout:
    """Generate a park from its config; deterministic in `config.seed`."""
    rng = np.random.default_rng(config.seed)
    grid = np.full((config.rows, config.cols), GRASS, dtype=np.uint8)
    _add_lakes(grid, rng, config)
    junctions = _junctions(grid, rng, config)
    for a, b in _network_edges(junctions, rng):
        _carve(grid, a, b, rng)
    layout = ParkLayout(config=config, grid=grid)
    _keep_largest_network(layout)
    _settle_bridges(grid)
    _place_oois(layout, rng)
    _add_invisible_walls(layout, rng)
    _place_starts(layout, rng)
    return layout


def _add_lakes(grid: np.ndarray, rng: np.random.Generator, cfg: ParkConfig) -> None:
    n = max(1, int(round(cfg.rows * cfg.cols * cfg.lake_density)))
    yy, xx = np.mgrid[0 : cfg.rows, 0 : cfg.cols]
    for _ in range(n):
        cx = rng.uniform(3, cfg.cols - 3)
        cy = rng.uniform(3, cfg.rows - 3)
        rx = rng.uniform(1.5, max(2.0, cfg.cols / 10))
        ry = rng.uniform(1.5, max(2.0, cfg.rows / 10))
        wobble = rng.uniform(0.75, 1.25, size=grid.shape)
        inside = ((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2 < wobble
        inside[:2, :] = inside[-2:, :] = False
        inside[:, :2] = inside[:, -2:] = False
        grid[inside] = WATER


def _junctions(grid: np.ndarray, rng: np.random.Generator, cfg: ParkConfig) -> list[tuple[int, int]]:
    """Pathway junctions on a jittered lattice, never in water, one cell in from the edge."""
    s = cfg.path_spacing
    points = []
    for gy in range(s // 2, cfg.rows - 1, s):
        for gx in range(s // 2, cfg.cols - 1, s):
            for _ in range(8):
                x = int(np.clip(gx + rng.integers(-s // 3, s // 3 + 1), 1, cfg.cols - 2))
                y = int(np.clip(gy + rng.integers(-s // 3, s // 3 + 1), 1, cfg.rows - 2))
                if grid[y, x] != WATER:
                    points.append((x, y))
                    break
    return points


def _network_edges(points: list[tuple[int, int]], rng: np.random.Generator) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """A minimum spanning tree over the junctions plus a few extra edges that make loops."""
    n = len(points)
    if n < 2:
        return []
    p = np.array(points, dtype=float)
    dist = np.abs(p[:, None, :] - p[None, :, :]).sum(-1)
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = dist[0].copy()
    parent = np.zeros(n, dtype=int)
    edges = []
    for _ in range(n - 1):
        cand = np.where(in_tree, np.inf, best)
        j = int(np.argmin(cand))
        edges.append((points[parent[j]], points[j]))
        in_tree[j] = True
        closer = dist[j] < best
        best[closer] = dist[j][closer]
        parent[closer] = j
    tree = {frozenset(e) for e in edges}
    extra = []
    for i in range(n):
        order = np.argsort(dist[i])[1:4]
        for j in order:
            e = frozenset((points[i], points[int(j)]))
            if e not in tree and rng.random() < 0.25:
                extra.append((points[i], points[int(j)]))
                tree.add(e)
    return edges + extra


def _carve(grid: np.ndarray, a: tuple[int, int], b: tuple[int, int], rng: np.random.Generator) -> None:
    """An L-shaped pathway from a to b; where it crosses water it becomes a bridge."""
    (x0, y0), (x1, y1) = a, b
    corner = (x1, y0) if rng.random() < 0.5 else (x0, y1)
    for (xa, ya), (xb, yb) in ((a, corner), (corner, b)):
        xs = range(min(xa, xb), max(xa, xb) + 1)
        ys = range(min(ya, yb), max(ya, yb) + 1)
        for y in ys:
            for x in xs:
                grid[y, x] = BRIDGE if grid[y, x] in (WATER, BRIDGE) else PATH


def _keep_largest_network(layout: ParkLayout) -> None:
    """Turn pathway cells outside the largest connected network back into grass."""
    mask = layout.pathway_mask
    label = np.full(mask.shape, -1, dtype=int)
    sizes = []
    for row, col in zip(*np.nonzero(mask)):
        if label[row, col] >= 0:
            continue
        k = len(sizes)
        label[row, col] = k
        queue, count = deque([(col, row)]), 0
        while queue:
            c, r = queue.popleft()
            count += 1
            for c2, r2 in layout.neighbours(c, r, only=mask):
                if label[r2, c2] < 0:
                    label[r2, c2] = k
                    queue.append((c2, r2))
        sizes.append(count)
    if not sizes:
        raise UserError(f"park {layout.config.slug}: no pathways were generated; use a larger size")
    keep = int(np.argmax(sizes))
    stray = mask & (label != keep)
    layout.grid[stray & (layout.grid == PATH)] = GRASS
    layout.grid[stray & (layout.grid == BRIDGE)] = WATER


def _settle_bridges(grid: np.ndarray) -> None:
    """A bridge cell with no water beside it (its whole lake was paved over) is plain pathway."""
    water = np.pad(grid == WATER, 1)
    near_water = np.zeros(grid.shape, dtype=bool)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            near_water |= water[1 + dr : 1 + dr + grid.shape[0], 1 + dc : 1 + dc + grid.shape[1]]
    grid[(grid == BRIDGE) & ~near_water] = PATH


def _place_oois(layout: ParkLayout, rng: np.random.Generator) -> None:
    """OOIs on grass cells beside pathways, kinds balanced, half of each kind bugged."""
    cfg, grid = layout.config, layout.grid
    path_cells = int(layout.pathway_mask.sum())
    n = max(len(OOI_KINDS), int(round(path_cells * cfg.ooi_density)))
    n -= n % len(OOI_KINDS)
    candidates = []
    for row in range(1, cfg.rows - 1):
        for col in range(1, cfg.cols - 1):
            if grid[row, col] != GRASS:
                continue
            around = grid[row - 1 : row + 2, col - 1 : col + 2]
            if (around == WATER).any() or (around == BRIDGE).any():
                continue
            if any(grid[row + dr, col + dc] == PATH for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1))):
                candidates.append((col, row))
    rng.shuffle(candidates)
    chosen: list[tuple[int, int]] = []
    for col, row in candidates:
        if all(max(abs(col - c), abs(row - r)) >= 3 for c, r in chosen):
            chosen.append((col, row))
        if len(chosen) == n:
            break
    n = len(chosen) - len(chosen) % len(OOI_KINDS)
    if n == 0:
        raise UserError(f"park {cfg.slug}: no room for objects of interest; use a larger size")
    chosen = chosen[:n]
    per_kind = n // len(OOI_KINDS)
    kinds = [k for k in OOI_KINDS for _ in range(per_kind)]
    bugs: list[str | None] = []
    for _ in OOI_KINDS:
        n_bugged = per_kind // 2 + (per_kind % 2) * int(rng.integers(0, 2))
        kind_bugs = [BUG_KINDS[i % 2] for i in range(n_bugged)] + [None] * (per_kind - n_bugged)
        rng.shuffle(kind_bugs)
        bugs.extend(kind_bugs)
    order = rng.permutation(n)
    cell = cfg.cell
    for i, (col, row) in enumerate(chosen):
        j = int(order[i])
        # stand towards the pathway side of the cell so it reads as "beside the path"
        dx = dy = 0.0
        for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if grid[row + dr, col + dc] == PATH:
                dx, dy = dc * cell * 0.15, dr * cell * 0.15
                break
        x, y = layout.centre(col, row)
        # whole map units, so that the engine's positions match the ground truth exactly
        layout.oois.append(OOI(id=i, kind=kinds[j], bug=bugs[j], x=float(round(x + dx)), y=float(round(y + dy))))


def _add_invisible_walls(layout: ParkLayout, rng: np.random.Generator) -> None:
    """A few invisible wall segments on grass, and some OOIs boxed in (left unreachable)."""
    cfg, grid = layout.config, layout.grid
    walls: set[tuple[int, int, int, int]] = set()
    n_boxed = int(round(len(layout.oois) * cfg.enclosed_share))
    for o in rng.permutation(len(layout.oois))[:n_boxed]:
        ooi = layout.oois[int(o)]
        col, row = layout.cell_of(ooi.x, ooi.y)
        walls.update(cell_edges(col, row))
        ooi.reachable = False
    ooi_cells = {layout.cell_of(o.x, o.y) for o in layout.oois}
    n_segments = max(1, cfg.rows * cfg.cols // 200)
    for _ in range(n_segments):
        col, row = int(rng.integers(1, cfg.cols - 2)), int(rng.integers(1, cfg.rows - 2))
        horizontal = rng.random() < 0.5
        length = int(rng.integers(2, 5))
        for k in range(length):
            c, r = (col + k, row) if horizontal else (col, row + k)
            if c >= cfg.cols - 1 or r >= cfg.rows - 1:
                break
            # only between two grass cells well away from OOIs, so pathways stay connected
            other = (c, r - 1) if horizontal else (c - 1, r)
            cells = [(c, r), other]
            if any(grid[rr, cc] != GRASS for cc, rr in cells):
                break
            if any(max(abs(cc - oc), abs(rr - orow)) <= 1 for cc, rr in cells for oc, orow in ooi_cells):
                break
            walls.add((c, r, c + 1, r) if horizontal else (c, r, c, r + 1))
    layout.walls = sorted(walls)


def _place_starts(layout: ParkLayout, rng: np.random.Generator) -> None:
    """Start points spread over the walkable park by farthest-point sampling; half on paths."""
    cfg = layout.config
    path_cells = [tuple(p) for p in np.argwhere(layout.pathway_mask)[:, ::-1]]
    anchor = path_cells[int(rng.integers(len(path_cells)))]
    reach = layout.reachable_from(anchor)
    ooi_cells = {layout.cell_of(o.x, o.y) for o in layout.oois}
    cells = [(int(c), int(r)) for r, c in np.argwhere(reach) if (int(c), int(r)) not in ooi_cells]
    pts = np.array(cells, dtype=float)
    chosen = [int(rng.integers(len(cells)))]
    d = np.abs(pts - pts[chosen[0]]).sum(1)
    while len(chosen) < min(cfg.n_starts, len(cells)):
        j = int(np.argmax(d))
        chosen.append(j)
        d = np.minimum(d, np.abs(pts - pts[j]).sum(1))
    for j in chosen:
        col, row = cells[j]
        x, y = layout.centre(col, row)
        layout.starts.append(Start(x=x, y=y, on_path=bool(layout.pathway_mask[row, col])))
