"""Level geometry of any Doom map, read from its WAD: walls, walkable area, doors, things.

Both map formats the engine plays are read: the classic Doom format (the lumps `THINGS`,
`LINEDEFS`, `SIDEDEFS`, `VERTEXES`, `SECTORS` after the map's marker, as in the stock Freedoom
levels) and UDMF (one `TEXTMAP` lump, as the park's PWAD). A scenario's PWAD is searched before
its IWAD, the way the engine loads them.

Sectors are rasterised by the even–odd rule over their own boundary lines (a line with the same
sector on both sides is no boundary), so nested sectors and holes come out right whatever order
the lines are in. A sector is walkable when the player fits under its ceiling, or it is a door
(closed until used); a line is a wall when it is one-sided, flagged impassable, or the step or
the gap between its two sectors stops the player. Coverage counts cells of `cell` map units of
which at least a quarter is walkable.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from playtester.errors import UserError

PLAYER_HEIGHT = 56.0
"""Map units the player needs under a ceiling."""
MAX_STEP = 24.0
"""The highest floor step the player walks up."""
PLAYER_RADIUS = 16.0
"""The player's radius: its centre keeps this far from a wall."""
JUMP_CLIMB = 60.0
"""The highest ledge a player with a jump key gets onto, jumping as it walks at it (measured in the
engine on built ledges: 60 units climbed, 64 not; docs/benchmarks/softlock.md)."""
SKILL_FLAG = 0x0002
"""THINGS flag of the engine's default skill (3, "hurt me plenty"); things without it are absent."""
MULTIPLAYER_FLAG = 0x0010
DOOR_SPECIALS = frozenset({1, 2, 3, 4, 16, 26, 27, 28, 29, 31, 32, 33, 34, 42, 46, 50, 61, 63, 75, 76, 86, 90, 103,
                           105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 133, 134, 135, 136, 137})
"""Doom-format line specials that open or close a door."""
UDMF_DOOR_SPECIALS = frozenset({10, 11, 12, 13, 14, 202, 249})
"""Hexen/UDMF action specials of doors (Door_Close, Door_Open, Door_Raise, Door_LockedRaise, …)."""
NOT_OBJECTS = frozenset({1, 2, 3, 4, 11, 14, 87, 88, 89})
"""Things that are no objects on the map: player and deathmatch starts, teleport destinations, boss spots."""

THING_CLASSES: dict[int, str] = {
    # monsters
    3004: "Zombieman", 9: "ShotgunGuy", 65: "ChaingunGuy", 3001: "DoomImp", 3002: "Demon", 58: "Spectre",
    3006: "LostSoul", 3005: "Cacodemon", 69: "HellKnight", 3003: "BaronOfHell", 68: "Arachnotron",
    71: "PainElemental", 66: "Revenant", 67: "Fatso", 64: "Archvile", 16: "Cyberdemon", 7: "SpiderMastermind",
    84: "WolfensteinSS", 72: "CommanderKeen",
    # weapons and ammunition
    2001: "Shotgun", 82: "SuperShotgun", 2002: "Chaingun", 2003: "RocketLauncher", 2004: "PlasmaRifle",
    2005: "Chainsaw", 2006: "BFG9000", 2007: "Clip", 2048: "ClipBox", 2008: "Shell", 2049: "ShellBox",
    2010: "RocketAmmo", 2046: "RocketBox", 2047: "Cell", 17: "CellPack", 8: "Backpack",
    # health, armour, power-ups, keys
    2011: "Stimpack", 2012: "Medikit", 2014: "HealthBonus", 2015: "ArmorBonus", 2018: "GreenArmor",
    2019: "BlueArmor", 2013: "Soulsphere", 83: "Megasphere", 2022: "InvulnerabilitySphere", 2023: "Berserk",
    2024: "BlurSphere", 2025: "RadSuit", 2026: "Allmap", 2045: "Infrared", 5: "BlueCard", 6: "YellowCard",
    13: "RedCard", 38: "RedSkull", 39: "YellowSkull", 40: "BlueSkull",
    # decorations
    2035: "ExplosiveBarrel", 70: "BurningBarrel", 2028: "Column", 30: "TallGreenColumn", 31: "ShortGreenColumn",
    32: "TallRedColumn", 33: "ShortRedColumn", 36: "HeartColumn", 37: "SkullColumn", 41: "EvilEye",
    42: "FloatingSkull", 43: "TorchTree", 44: "BlueTorch", 45: "GreenTorch", 46: "RedTorch", 55: "ShortBlueTorch",
    56: "ShortGreenTorch", 57: "ShortRedTorch", 47: "Stalagtite", 48: "TechPillar", 34: "Candlestick",
    35: "Candelabra", 54: "BigTree", 85: "TechLamp", 86: "TechLamp2", 10: "GibbedMarine", 12: "GibbedMarineExtra",
    15: "DeadMarine", 18: "DeadZombieMan", 19: "DeadShotgunGuy", 20: "DeadDoomImp", 21: "DeadDemon",
    22: "DeadCacodemon", 23: "DeadLostSoul", 24: "Gibs", 25: "DeadStick", 26: "LiveStick", 27: "HeadOnAStick",
    28: "HeadsOnAStick", 29: "HeadCandles", 49: "BloodyTwitch", 50: "Meat2", 51: "Meat3", 52: "Meat4",
    53: "Meat5", 59: "NonsolidMeat2", 60: "NonsolidMeat4", 61: "NonsolidMeat3", 62: "NonsolidMeat5",
    63: "NonsolidTwitch", 73: "HangNoGuts", 74: "HangBNoBrain", 75: "HangTLookingDown", 76: "HangTSkull",
    77: "HangTLookingUp", 78: "HangTNoBrain", 79: "ColonGibs", 80: "SmallBloodPool", 81: "BrainStem",
}
"""Doom editor numbers to the engine's class names (the names its labels buffer reports)."""


@dataclass(frozen=True)
class Line:
    """A linedef between two points; `wall` stops the player, `door` opens a door."""

    x1: float
    y1: float
    x2: float
    y2: float
    wall: bool
    door: bool


@dataclass(frozen=True)
class Thing:
    """An object placed on the level: `id` is its index in the map's thing list."""

    id: int
    kind: str
    x: float
    y: float
    type: int
    angle: float = 0.0
    tid: int = 0
    """A UDMF thing's own id (what a `Teleport(tid)` aims at); 0 when it has none."""


@dataclass
class Sector:
    floor: float
    ceiling: float
    door: bool = False
    special: int = 0
    """The sector's special (damaging floors, secrets, lights)."""
    tag: int = 0
    """The tag its line specials find it by."""


@dataclass(frozen=True)
class LineDef:
    """A linedef as the WAD gives it: its vertices, the sectors on its two sides (a missing side is
    None), whether it blocks the player outright, and its special."""

    v1: int
    v2: int
    front: int | None
    back: int | None
    blocking: bool
    special: int = 0
    tag: int = 0
    """Doom format: the tag of the sectors its special moves; UDMF: the special's first argument."""
    args: tuple[int, ...] = ()
    """UDMF: the special's arguments."""
    flags: frozenset[str] = frozenset()
    """UDMF: the flags set true (`playeruse`, `playercross`, `repeatspecial`, …)."""


@dataclass
class LevelMap:
    """A level's geometry in map units (`y` grows north), ready to draw and to measure coverage on."""

    name: str
    vertices: np.ndarray
    """`N × 2` vertex positions."""
    linedefs: list[LineDef]
    sectors: list[Sector]
    things: list[Thing]
    udmf: bool = False
    lines: list[Line] = field(init=False)

    def __post_init__(self) -> None:
        door_specials = UDMF_DOOR_SPECIALS if self.udmf else DOOR_SPECIALS
        for ld in self.linedefs:
            if ld.special in door_specials and ld.back is not None:
                self.sectors[ld.back].door = True
        self.lines = []
        for ld in self.linedefs:
            (x1, y1), (x2, y2) = self.vertices[ld.v1], self.vertices[ld.v2]
            self.lines.append(Line(float(x1), float(y1), float(x2), float(y2), self._blocks(ld.front, ld.back, ld.blocking),
                                   ld.special in door_specials))

    def _blocks(self, front: int | None, back: int | None, blocking: bool) -> bool:
        if front is None or back is None or blocking:
            return True
        a, b = self.sectors[front], self.sectors[back]
        if a.door or b.door:
            return False
        gap = min(a.ceiling, b.ceiling) - max(a.floor, b.floor)
        return gap < PLAYER_HEIGHT or abs(a.floor - b.floor) > MAX_STEP

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """`(x0, y0, x1, y1)` of the vertices, with a margin of 64 units."""
        lo, hi = self.vertices.min(0), self.vertices.max(0)
        return float(lo[0] - 64), float(lo[1] - 64), float(hi[0] + 64), float(hi[1] + 64)

    def walkable_sector(self, index: int) -> bool:
        s = self.sectors[index]
        return s.door or s.ceiling - s.floor >= PLAYER_HEIGHT

    def sector_raster(self, units_per_pixel: float) -> np.ndarray:
        """Sector index of every pixel (row 0 north), -1 outside the level."""
        x0, y0, x1, y1 = self.bounds
        w, h = int(np.ceil((x1 - x0) / units_per_pixel)), int(np.ceil((y1 - y0) / units_per_pixel))
        raster = np.full((h, w), -1, dtype=np.int32)
        boundary: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for ld in self.linedefs:
            if ld.front == ld.back:
                continue
            for s in (ld.front, ld.back):
                if s is not None:
                    boundary.setdefault(s, []).append((self.vertices[ld.v1], self.vertices[ld.v2]))
        rows_y = y1 - (np.arange(h) + 0.5) * units_per_pixel  # pixel centres, north first
        for s, edges in boundary.items():
            ends = np.array(edges, dtype=float)  # E × 2 × 2
            ya, yb = ends[:, 0, 1], ends[:, 1, 1]
            lo, hi = max(0, int((y1 - max(ya.max(), yb.max())) / units_per_pixel) - 1), \
                min(h, int((y1 - min(ya.min(), yb.min())) / units_per_pixel) + 2)
            if lo >= hi:
                continue
            ys = rows_y[lo:hi, None]
            crosses = (ya[None] > ys) != (yb[None] > ys)
            with np.errstate(divide="ignore", invalid="ignore"):
                xs = ends[None, :, 0, 0] + (ys - ya[None]) * (ends[None, :, 1, 0] - ends[None, :, 0, 0]) / (yb - ya)[None]
            cols = np.clip(np.nan_to_num(np.ceil((xs - x0) / units_per_pixel - 0.5)), 0, w).astype(int)
            toggles = np.zeros((hi - lo, w + 1), dtype=np.int32)
            r, e = np.nonzero(crosses)
            np.add.at(toggles, (r, cols[r, e]), 1)
            inside = (np.cumsum(toggles, axis=1)[:, :w] % 2).astype(bool)
            raster[lo:hi][inside] = s
        return raster

    def walkable_raster(self, units_per_pixel: float) -> np.ndarray:
        raster = self.sector_raster(units_per_pixel)
        ok = np.array([self.walkable_sector(i) for i in range(len(self.sectors))] + [False])
        return ok[raster]  # -1 picks the last entry: outside is not walkable

    def walkable_cells(self, cell: float, units_per_pixel: float = 8.0) -> np.ndarray:
        """`rows × cols` cells of an `OccupancyGrid` over `bounds` (row 0 south): at least a quarter walkable."""
        ok = np.array([self.walkable_sector(i) for i in range(len(self.sectors))] + [False])
        return self.cells_of(lambda raster: ok[raster], cell, units_per_pixel)

    def cells_of(self, select, cell: float, units_per_pixel: float = 8.0) -> np.ndarray:
        """`rows × cols` cells of an `OccupancyGrid` over `bounds` (row 0 south) of which at least a
        quarter is picked by `select`, a function from a sector raster (-1 outside) to a boolean one."""
        x0, y0, x1, y1 = self.bounds
        cols, rows = max(1, int(np.ceil((x1 - x0) / cell))), max(1, int(np.ceil((y1 - y0) / cell)))
        k = max(1, int(round(cell / units_per_pixel)))
        fine = select(self.sector_raster(cell / k))[::-1]  # row 0 south
        padded = np.zeros((rows * k, cols * k), dtype=bool)
        padded[: min(fine.shape[0], rows * k), : min(fine.shape[1], cols * k)] = fine[: rows * k, : cols * k]
        share = padded.reshape(rows, k, cols, k).mean(axis=(1, 3))
        return share >= 0.25

    def objects(self) -> list[Thing]:
        """The things drawn and tested as objects: not starts or teleport spots."""
        return [t for t in self.things if t.type not in NOT_OBJECTS]


# -- reading WADs --------------------------------------------------------------------------------

def wad_lumps(path: str | Path) -> list[tuple[str, bytes]]:
    """`(name, data)` of every lump in a WAD, in order; a file that is not a whole WAD is a
    `UserError` that says what is wrong with it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot be read ({e.strerror or e}); give the path of a WAD file") from None
    if not data:
        raise UserError(f"{path}: not a WAD file (it is empty); give a Doom IWAD or PWAD")
    if len(data) < 12 or data[:4] not in (b"IWAD", b"PWAD"):
        head = data[:4].decode("ascii", "replace")
        raise UserError(f"{path}: not a WAD file (it starts with {head!r}; a WAD starts with IWAD or PWAD)")
    count, offset = struct.unpack_from("<ii", data, 4)
    if count < 0 or offset < 12 or offset + 16 * count > len(data):
        raise UserError(f"{path}: a truncated or damaged WAD (its directory of {count} lumps at byte {offset} lies past "
                        f"its end, {len(data)} bytes); copy the file again")
    lumps = []
    for i in range(count):
        pos, size, name = struct.unpack_from("<ii8s", data, offset + 16 * i)
        if pos < 0 or size < 0 or pos + size > len(data):
            raise UserError(f"{path}: a truncated or damaged WAD (lump {i} lies past its end); copy the file again")
        lumps.append((name.split(b"\0")[0].decode("ascii", "replace").upper(), data[pos:pos + size]))
    return lumps


@lru_cache(maxsize=16)
def _cached_lumps(path: str, stamp: tuple[int, int]) -> list[tuple[str, bytes]]:
    return wad_lumps(path)


def lumps_of(path: str | Path) -> list[tuple[str, bytes]]:
    """`wad_lumps`, read once per file as it is now (its size and modification time)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return wad_lumps(path)  # which says why it cannot be read
    return _cached_lumps(str(path), (st.st_size, st.st_mtime_ns))


def wad_kind(path: str | Path) -> str:
    """`IWAD` or `PWAD`, from a WAD's first bytes (checked whole by `wad_lumps` first)."""
    lumps_of(path)
    with open(path, "rb") as f:
        return f.read(4).decode("ascii")


_MAP_LUMPS = ("THINGS", "LINEDEFS", "SIDEDEFS", "VERTEXES", "SEGS", "SSECTORS", "NODES", "SECTORS", "REJECT", "BLOCKMAP",
              "BEHAVIOR", "SCRIPTS", "TEXTMAP", "ZNODES", "DIALOGUE", "ENDMAP")


def map_names(lumps: list[tuple[str, bytes]]) -> list[str]:
    """The maps of a WAD, in order: each marker followed by its THINGS or TEXTMAP lump."""
    return [name for i, (name, _) in enumerate(lumps[:-1]) if name not in _MAP_LUMPS and lumps[i + 1][0] in ("THINGS", "TEXTMAP")]


def map_lumps(lumps: list[tuple[str, bytes]], name: str) -> dict[str, bytes] | None:
    """The lumps of map `name` (its marker up to the next map), or None if the WAD lacks it."""
    names = [n for n, _ in lumps]
    if name.upper() not in map_names(lumps):
        return None
    i = names.index(name.upper()) + 1
    out: dict[str, bytes] = {}
    while i < len(lumps) and lumps[i][0] in _MAP_LUMPS:
        out.setdefault(lumps[i][0], lumps[i][1])
        i += 1
    return out


def _doom_format(name: str, lumps: dict[str, bytes]) -> LevelMap:
    for needed in ("VERTEXES", "LINEDEFS", "SIDEDEFS", "SECTORS"):
        if needed not in lumps:
            raise UserError(f"map {name}: the {needed} lump is missing")
    vertices = np.array(list(struct.iter_unpack("<hh", lumps["VERTEXES"])), dtype=float).reshape(-1, 2)
    side_sector = [s[-1] for s in struct.iter_unpack("<hh8s8s8sH", lumps["SIDEDEFS"])]
    sectors = [Sector(float(f), float(c), special=special, tag=tag)
               for f, c, _, _, _, special, tag in struct.iter_unpack("<hh8s8shhh", lumps["SECTORS"])]

    def sector_of(side: int) -> int | None:
        return None if side == 0xFFFF or side >= len(side_sector) else side_sector[side]

    linedefs = [LineDef(v1, v2, sector_of(right), sector_of(left), bool(flags & 1), special, tag)
                for v1, v2, flags, special, tag, right, left in struct.iter_unpack("<HHHHHHH", lumps["LINEDEFS"])]
    things = []
    for i, (x, y, angle, kind, flags) in enumerate(struct.iter_unpack("<hhhhh", lumps.get("THINGS", b""))):
        if flags & MULTIPLAYER_FLAG or not flags & SKILL_FLAG:
            continue
        things.append(Thing(i, THING_CLASSES.get(kind, f"thing{kind}"), float(x), float(y), kind, float(angle)))
    return LevelMap(name, vertices, linedefs, sectors, things)


_BLOCK = re.compile(r"(\w+)\s*\{([^}]*)\}", re.S)
_FIELD = re.compile(r"(\w+)\s*=\s*(\"[^\"]*\"|[^;]+);")
_LINE_FLAGS = ("playeruse", "playercross", "impact", "repeatspecial", "monstercross", "playerpush", "blockplayers")


def parse_udmf(name: str, text: str, classes: dict[int, str] | None = None) -> LevelMap:
    """A UDMF `TEXTMAP`: vertices, linedefs, sidedefs, sectors and things."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    blocks: dict[str, list[dict[str, str]]] = {}
    for kind, body in _BLOCK.findall(text):
        blocks.setdefault(kind.lower(), []).append({k.lower(): v.strip().strip('"') for k, v in _FIELD.findall(body)})
    vertices = np.array([[float(v["x"]), float(v["y"])] for v in blocks.get("vertex", [])], dtype=float).reshape(-1, 2)
    side_sector = [int(s["sector"]) for s in blocks.get("sidedef", [])]
    sectors = [Sector(float(s.get("heightfloor", 0)), float(s.get("heightceiling", 0)), special=int(s.get("special", 0)),
                      tag=int(s.get("id", 0))) for s in blocks.get("sector", [])]
    linedefs = []
    for ld in blocks.get("linedef", []):
        back = int(ld["sideback"]) if "sideback" in ld else -1
        args = tuple(int(ld.get(f"arg{i}", 0)) for i in range(5))
        flags = frozenset(f for f in _LINE_FLAGS if ld.get(f) == "true")
        linedefs.append(LineDef(int(ld["v1"]), int(ld["v2"]), side_sector[int(ld["sidefront"])],
                                side_sector[back] if back >= 0 else None,
                                ld.get("blocking") == "true" or "blockplayers" in flags, int(ld.get("special", 0)),
                                args[0], args, flags))
    classes = {**THING_CLASSES, **(classes or {})}
    things = [Thing(i, classes.get(int(t["type"]), f"thing{t['type']}"), float(t["x"]), float(t["y"]), int(t["type"]),
                    float(t.get("angle", 0)), int(t.get("id", 0)))
              for i, t in enumerate(blocks.get("thing", [])) if "skill3" not in t or t["skill3"] == "true"]
    return LevelMap(name, vertices, linedefs, sectors, things, udmf=True)


def read_level(wads: list[str | Path], name: str) -> LevelMap:
    """Map `name` from the first of `wads` (PWAD first, then the IWAD) that holds it."""
    for wad in wads:
        lumps = map_lumps(lumps_of(wad), name)
        if lumps is None:
            continue
        if "TEXTMAP" in lumps:
            return parse_udmf(name, lumps["TEXTMAP"].decode("latin-1"))
        return _doom_format(name, lumps)
    raise UserError(f"map {name}: not found in {', '.join(str(w) for w in wads)}")


# -- the bird's-eye picture ----------------------------------------------------------------------

FLOOR, LOW, OUTSIDE = (236, 232, 220), (178, 172, 160), (40, 40, 46)
WALL, DOOR, STEP = (20, 20, 20), (230, 140, 20), (150, 146, 136)


def render_level(level: LevelMap, max_side: int = 720):
    """The level seen from above: walkable floor light, sectors the player cannot enter darker,
    walls black, doors orange, passable steps grey (a `BirdsEye` with the level's bounds)."""
    import cv2

    from playtester.capture.park.birdseye import BirdsEye

    x0, y0, x1, y1 = level.bounds
    units_per_pixel = max(x1 - x0, y1 - y0) / max_side
    raster = level.sector_raster(units_per_pixel)
    walkable = np.array([level.walkable_sector(i) for i in range(len(level.sectors))] + [False])
    image = np.empty(raster.shape + (3,), dtype=np.uint8)
    image[:] = OUTSIDE
    image[raster >= 0] = LOW
    image[walkable[raster]] = FLOOR
    h, w = raster.shape
    view = BirdsEye(image=image, bounds=(x0, y1 - h * units_per_pixel, x0 + w * units_per_pixel, y1))
    for line in sorted(level.lines, key=lambda ln: (ln.door, ln.wall)):  # doors and walls drawn last, on top
        (px1, px2), (py1, py2) = view.to_pixel([line.x1, line.x2], [line.y1, line.y2])
        colour, width = (DOOR, 2) if line.door else (WALL, 1) if line.wall else (STEP, 1)
        cv2.line(image, (int(px1), int(py1)), (int(px2), int(py2)), colour, width)
    return view
