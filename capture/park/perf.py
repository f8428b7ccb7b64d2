"""A performance-bugged park: the same park with a few areas that really render slowly.

Each slow zone is a dense grove of large translucent sprites (`LagFoliage`) scattered over a disc
on a pathway: standing in it, the software renderer blends hundreds of overlapping sprite
columns and the engine labels every one of them, so a step takes several times longer than in
a plain area (checked in `tests/test_load_park.py`, timed in `scripts/bench_load.py`). The
engine's dynamic lights need its OpenGL renderer, which ViZDoom does not run headless, so sprite
overdraw is the lever here.

Zones sit at the far ends of the pathway network (farthest by walking distance from its hub and
from each other), and every start point within `start_distance` cells of walking of a zone is
removed, so only an agent that travels along the paths gets there. Where the zones are is known
to the benchmark only: `perf.json` beside the scenario, never in `park.json` or `info`.

    doom:park-perf[:SEED[:COLSxROWS]]
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from playtester.files import write_bytes_atomic, write_text_atomic
from playtester.errors import UserError
from playtester.capture.park.birdseye import render_birdseye
from playtester.capture.park.build import ParkFiles, cache_root
from playtester.capture.park.layout import PATH, WATER, ParkConfig, ParkLayout, generate_park
from playtester.capture.park.sprites import decorate_text, sprite_lumps, sprite_png
from playtester.capture.park.wad import MAP_NAME, pwad, textmap

PERF_VERSION = 1
LAG_ACTOR = "LagFoliage"
LAG_SPRITE = "XLAG"
LAG_DOOMEDNUM = 20190
LAG_SIZE = 128
"""Side of the foliage sprite in pixels (map units at scale 1)."""


@dataclass(frozen=True)
class PerfParkConfig:
    """A park and the slow zones added to it."""

    park: ParkConfig = field(default_factory=ParkConfig)
    """The park underneath (same layout, OOIs and terrain as `doom:park` with this config)."""
    zones: int = 2
    """Number of slow zones."""
    sprites: int = 300
    """Translucent sprites per zone (more: slower)."""
    radius: float = 1.25
    """Zone radius in cells."""
    start_distance: int = 6
    """Start points closer than this many cells of walking to a zone are removed."""
    min_starts: int = 4
    """Refuse a park where fewer start points would remain."""

    def __post_init__(self) -> None:
        if self.zones < 1 or self.sprites < 1:
            raise UserError(f"perf park: zones={self.zones}, sprites={self.sprites}; use at least 1 of each")
        if not 0.25 <= self.radius <= 4:
            raise UserError(f"perf park: zone radius {self.radius} cells; use 0.25 to 4")
        if self.start_distance < 0 or self.min_starts < 1:
            raise UserError(f"perf park: start_distance={self.start_distance}, min_starts={self.min_starts}; use ≥ 0 and ≥ 1")

    @property
    def slug(self) -> str:
        return f"{self.park.slug}-perf{PERF_VERSION}-z{self.zones}-n{self.sprites}-r{self.radius:g}-d{self.start_distance}"


@dataclass
class SlowZone:
    """One slow area: centre and radius in map units, its sprites, how far it is from any start."""

    id: int
    x: float
    y: float
    radius: float
    sprites: int
    cell: tuple[int, int]
    walk_from_start: int
    """Cells of walking from the nearest remaining start point."""

    def contains(self, x: float, y: float, margin: float = 0.0) -> bool:
        return (x - self.x) ** 2 + (y - self.y) ** 2 <= (self.radius + margin) ** 2


def walk_distances(layout: ParkLayout, sources: list[tuple[int, int]]) -> np.ndarray:
    """Cells of walking (4-connected, no water, no invisible wall) from the nearest source; −1 unreachable."""
    dist = np.full(layout.grid.shape, -1, dtype=int)
    queue = deque()
    for c, r in sources:
        if dist[r, c] < 0:
            dist[r, c] = 0
            queue.append((c, r))
    while queue:
        c, r = queue.popleft()
        for c2, r2 in layout.neighbours(c, r):
            if dist[r2, c2] < 0:
                dist[r2, c2] = dist[r, c] + 1
                queue.append((c2, r2))
    return dist


def place_slow_zones(layout: ParkLayout, cfg: PerfParkConfig) -> list[SlowZone]:
    """Choose zone cells at the ends of the pathway network; trims `layout.starts` in place."""
    grid = layout.grid
    rows, cols = grid.shape
    paths = [(int(c), int(r)) for r, c in np.argwhere(grid == PATH)]
    cy, cx = rows / 2, cols / 2
    hub = min(paths, key=lambda p: (p[0] + 0.5 - cx) ** 2 + (p[1] + 0.5 - cy) ** 2)
    score = walk_distances(layout, [hub]).astype(float)
    candidates = [(c, r) for c, r in paths if 1 <= c < cols - 1 and 1 <= r < rows - 1
                  and not (grid[r - 1 : r + 2, c - 1 : c + 2] == WATER).any() and score[r, c] >= 0]
    chosen: list[tuple[int, int]] = []
    for _ in range(cfg.zones):
        if not candidates:
            break
        best = max(candidates, key=lambda p: (score[p[1], p[0]], p))
        if score[best[1], best[0]] < 2 * cfg.radius + 1 and chosen:
            break
        chosen.append(best)
        score = np.minimum(score, walk_distances(layout, [best]))
        candidates = [p for p in candidates if p != best]
    if len(chosen) < cfg.zones:
        raise UserError(f"perf park {cfg.slug}: room for {len(chosen)} of {cfg.zones} slow zones; use a larger park or fewer zones")
    from_zones = walk_distances(layout, chosen)
    keep = [s for s in layout.starts if not (0 <= from_zones[layout.cell_of(s.x, s.y)[::-1]] < cfg.start_distance)]
    if len(keep) < cfg.min_starts:
        raise UserError(f"perf park {cfg.slug}: only {len(keep)} start points lie {cfg.start_distance}+ cells from the slow "
                        f"zones; use a larger park or a smaller start_distance")
    layout.starts = keep
    from_starts = walk_distances(layout, [layout.cell_of(s.x, s.y) for s in keep])
    zones = []
    for i, (c, r) in enumerate(chosen):
        x, y = layout.centre(c, r)
        zones.append(SlowZone(id=i, x=x, y=y, radius=cfg.radius * layout.config.cell, sprites=cfg.sprites,
                              cell=(c, r), walk_from_start=int(from_starts[r, c])))
    return zones


def lag_sprite() -> np.ndarray:
    """A leafy translucent blob, `uint8 H×W×4`: large, so that a grove of them overdraws the screen."""
    rng = np.random.default_rng(77)
    yy, xx = np.mgrid[0:LAG_SIZE, 0:LAG_SIZE]
    r = np.hypot(xx - LAG_SIZE / 2, yy - LAG_SIZE / 2) / (LAG_SIZE / 2)
    img = np.zeros((LAG_SIZE, LAG_SIZE, 4), dtype=np.uint8)
    leaf = rng.uniform(0.6, 1.0, size=(LAG_SIZE, LAG_SIZE))
    img[..., 0] = (40 * leaf).astype(np.uint8)
    img[..., 1] = (150 * leaf).astype(np.uint8)
    img[..., 2] = (60 * leaf).astype(np.uint8)
    img[..., 3] = np.where(r + 0.15 * rng.random((LAG_SIZE, LAG_SIZE)) < 1.0, 255, 0)
    return img


def lag_decorate() -> str:
    return (f"actor {LAG_ACTOR} {LAG_DOOMEDNUM}\n{{\n  Radius 8\n  Height {LAG_SIZE}\n  +NOINTERACTION\n"
            f"  RenderStyle Translucent\n  Alpha 0.4\n  States\n  {{\n  Spawn:\n    {LAG_SPRITE} A -1\n    Stop\n  }}\n}}\n")


def lag_things(zones: list[SlowZone], seed: int) -> list[str]:
    """UDMF things: each zone's sprites scattered uniformly over its disc."""
    rng = np.random.default_rng(seed + 9001)
    everyone = "skill1 = true; skill2 = true; skill3 = true; skill4 = true; skill5 = true; single = true; coop = true; dm = true;"
    out = []
    for z in zones:
        rad = z.radius * np.sqrt(rng.random(z.sprites))
        ang = rng.uniform(0, 2 * np.pi, z.sprites)
        for px, py in zip(z.x + rad * np.cos(ang), z.y + rad * np.sin(ang)):
            out.append(f"thing {{ x = {px:.1f}; y = {py:.1f}; type = {LAG_DOOMEDNUM}; angle = 0; {everyone} }}")
    return out


def perf_wad(layout: ParkLayout, zones: list[SlowZone]) -> bytes:
    """The park's PWAD with the slow zones' sprites added."""
    text = textmap(layout) + "\n".join(lag_things(zones, layout.config.seed)) + "\n"
    lumps = [(MAP_NAME, b""), ("TEXTMAP", text.encode("ascii")), ("ENDMAP", b"")]
    lumps.append(("DECORATE", (decorate_text() + "\n" + lag_decorate()).encode("ascii")))
    lumps += [("S_START", b"")] + sprite_lumps() + [(LAG_SPRITE + "A0", sprite_png(lag_sprite())), ("S_END", b"")]
    return pwad(lumps)


@dataclass(frozen=True)
class PerfParkFiles(ParkFiles):
    @property
    def perf_truth(self) -> Path:
        """The slow zones: ground truth for the benchmark only."""
        return self.folder / "perf.json"

    def zones(self) -> list[SlowZone]:
        return load_zones(self.perf_truth)


def load_zones(path: str | Path) -> list[SlowZone]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return [SlowZone(**(z | {"cell": tuple(z["cell"])})) for z in data["zones"]]
    except FileNotFoundError:
        raise UserError(f"perf ground truth {path}: file not found; build the perf park (doom:park-perf) first") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise UserError(f"perf ground truth {path}: malformed ({type(e).__name__}: {e}); delete the folder to regenerate it") from None


def build_perf_park(cfg: PerfParkConfig, folder: str | Path | None = None) -> PerfParkFiles:
    """Generate the perf-bugged park into `folder` (default: the cache), unless it is there."""
    files = PerfParkFiles(Path(folder) if folder else cache_root() / "scenarios" / cfg.slug)
    if all(p.exists() for p in (files.wad, files.ground_truth, files.map_png, files.perf_truth)):
        return files
    files.folder.mkdir(parents=True, exist_ok=True)
    layout = generate_park(cfg.park)
    zones = place_slow_zones(layout, cfg)
    write_bytes_atomic(files.wad, perf_wad(layout, zones))
    render_birdseye(layout).save_png(files.map_png)
    truth = {"format_version": PERF_VERSION, "config": asdict(cfg), "zones": [asdict(z) for z in zones]}
    write_text_atomic(files.perf_truth, json.dumps(truth, indent=1))
    layout.save(files.ground_truth)  # written last: its presence means the set is complete
    return files
