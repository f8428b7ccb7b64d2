"""Small Doom levels drawn as text, written as a UDMF PWAD: test levels with doors, lifts,
teleporters, steps, pits and deliberate bugs, for the level tools' own tests.

A plan is rows of characters, north at the top, each a square cell of `cell` map units. `#` (or
a space) is solid rock; any other character is a cell of the sector of that name (`Room`: its
floor and ceiling heights, textures, light, tag). Lines are drawn where two sectors meet and
around the rock, joined along straight runs as the park's are. What a line between two sectors
does is a `Join`: a special (a door worked by hand, a lift, a teleporter, an exit), how the
player sets it off, whether it blocks, and which of its textures are left out (a missing lower
texture on a step is a hall of mirrors in the engine's renderer). The line is turned so that
its front faces the first sector named in the join: a door's special is used from the room
into the door sector behind.

    plan = LevelPlan(cell=64, rows=[
        "#########",
        "#aaaDbbb#",
        "#aaa#bbb#",
        "#########"],
        rooms={"a": Room(), "b": Room(), "D": Room(ceiling=0)},
        joins={("a", "D"): Join(special=DOOR_RAISE, args=(0, 32, 100)), ("b", "D"): Join(special=DOOR_RAISE, args=(0, 32, 100))},
        start="a")
    write_bytes(path, level_wad(plan))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playtester.errors import UserError
from playtester.capture.park.wad import merged_lines, pwad

DOOR_RAISE, PLAT_DOWN_WAIT_UP_STAY, TELEPORT, EXIT_NORMAL = 12, 62, 70, 243
"""ZDoom action specials the test levels use: `Door_Raise(tag, speed, delay)` (tag 0: the door
behind the line), `Plat_DownWaitUpStay(tag, speed, delay)`, `Teleport(tid, tag)`, `Exit_Normal`."""
WALL_TEXTURE, FLOOR_TEXTURE, CEILING_TEXTURE, DOOR_TEXTURE = "STARTAN2", "FLOOR4_8", "CEIL3_5", "BIGDOOR2"
SOLID = "# "


@dataclass(frozen=True)
class Room:
    """One sector: every cell of its character."""

    floor: int = 0
    ceiling: int = 128
    floor_texture: str = FLOOR_TEXTURE
    ceiling_texture: str = CEILING_TEXTURE
    light: int = 192
    tag: int = 0
    """Its sector tag (UDMF `id`), by which tagged specials find it."""
    special: int = 0


@dataclass(frozen=True)
class Join:
    """The line between two sectors (or a sector and the rock, with `"#"` as the second)."""

    special: int = 0
    args: tuple[int, ...] = ()
    use: bool = True
    """Set off by pressing USE on its front (else by walking over it)."""
    repeat: bool = True
    blocking: bool = False
    missing: tuple[str, ...] = ()
    """Textures left out: `lower`, `upper` or `middle`."""
    texture: str = WALL_TEXTURE


@dataclass(frozen=True)
class _Edge:
    front: str
    back: str | None
    join: Join


@dataclass
class LevelPlan:
    """A level as text; see the module's docstring."""

    rows: list[str]
    rooms: dict[str, Room]
    start: str | None
    """The room whose first cell (from the north-west) holds the player's start (None: no start,
    a broken level)."""
    cell: int = 64
    joins: dict[tuple[str, str], Join] = field(default_factory=dict)
    things: list[tuple[int, str, dict[str, int]]] = field(default_factory=list)
    """More things: `(doomednum, room, fields)`, placed at the room's last cell (from the north-west)
    unless `fields` gives `x` and `y`; other fields (`id`, `angle`) are written as they are."""
    start_angle: int = 0

    def __post_init__(self) -> None:
        if not self.rows or len({len(r) for r in self.rows}) != 1:
            raise UserError("level plan: give rows of one length")
        unknown = sorted({ch for row in self.rows for ch in row if ch not in SOLID} - set(self.rooms))
        if unknown:
            raise UserError(f"level plan: no room for {', '.join(map(repr, unknown))}; name it in rooms")
        if self.start is not None and self.start not in self.rooms:
            raise UserError(f"level plan: the start room {self.start!r} is not in rooms")

    def key(self, col: int, row: int) -> str | None:
        """The room at cell `(col, row)`, row 0 at the south; None for rock and outside."""
        rows = len(self.rows)
        if not (0 <= row < rows and 0 <= col < len(self.rows[0])):
            return None
        ch = self.rows[rows - 1 - row][col]
        return None if ch in SOLID else ch

    def cells(self, room: str) -> list[tuple[int, int]]:
        """The cells of a room, from the north-west, row by row."""
        rows = len(self.rows)
        return [(c, rows - 1 - r) for r, line in enumerate(self.rows) for c, ch in enumerate(line) if ch == room]

    def centre(self, col: int, row: int) -> tuple[float, float]:
        return (col + 0.5) * self.cell, (row + 0.5) * self.cell

    def join(self, a: str, b: str | None) -> tuple[Join, bool]:
        """The join between two rooms and whether it is named the other way round."""
        other = b if b is not None else "#"
        if (a, other) in self.joins:
            return self.joins[a, other], False
        if (other, a) in self.joins:
            return self.joins[other, a], True
        return Join(), False


def _edges(plan: LevelPlan) -> dict[tuple[int, int, int, int], _Edge]:
    """Every unit grid edge that needs a line, turned so that its front is on its right."""
    rows, cols = len(plan.rows), len(plan.rows[0])
    edges: dict[tuple[int, int, int, int], _Edge] = {}

    def add(key: tuple[int, int, int, int], right: str | None, left: str | None) -> None:
        if right == left:
            return
        if right is None:
            right, left, key = left, None, (key[2], key[3], key[0], key[1])
        if left is None:
            edges[key] = _Edge(right, None, plan.join(right, None)[0])
            return
        join, reverse = plan.join(right, left)
        if reverse:  # the join names `left` first: its front faces `left`
            right, left, key = left, right, (key[2], key[3], key[0], key[1])
        edges[key] = _Edge(right, left, join)

    for r in range(rows + 1):  # horizontal edges going east have the cell below on their right
        for c in range(cols):
            add((c, r, c + 1, r), plan.key(c, r - 1), plan.key(c, r))
    for c in range(cols + 1):  # vertical edges going north have the cell to the east on their right
        for r in range(rows):
            add((c, r, c, r + 1), plan.key(c, r), plan.key(c - 1, r))
    return edges


def level_textmap(plan: LevelPlan) -> str:
    """The UDMF TEXTMAP of a plan."""
    order = [k for k in plan.rooms if plan.cells(k)]
    index = {k: i for i, k in enumerate(order)}
    out = ['namespace = "zdoom";']
    for k in order:
        r = plan.rooms[k]
        tag = f" id = {r.tag};" if r.tag else ""
        special = f" special = {r.special};" if r.special else ""
        out.append(f'sector {{ heightfloor = {r.floor}; heightceiling = {r.ceiling}; texturefloor = "{r.floor_texture}"; '
                   f'textureceiling = "{r.ceiling_texture}"; lightlevel = {r.light};{tag}{special} }}')
    vertices: dict[tuple[int, int], int] = {}
    vertex_lines, side_lines, line_lines = [], [], []

    def vertex(p: tuple[int, int]) -> int:
        if p not in vertices:
            vertices[p] = len(vertices)
            vertex_lines.append(f"vertex {{ x = {p[0] * plan.cell}.0; y = {p[1] * plan.cell}.0; }}")
        return vertices[p]

    def sidedef(room: str, join: Join, *, one_sided: bool, door_face: bool) -> int:
        texture = DOOR_TEXTURE if door_face else join.texture
        parts = {"middle": texture if one_sided else "-", "upper": texture, "lower": texture}
        for name in join.missing:
            parts[name] = "-"
        side_lines.append(f'sidedef {{ sector = {index[room]}; texturemiddle = "{parts["middle"]}"; '
                          f'texturetop = "{parts["upper"]}"; texturebottom = "{parts["lower"]}"; }}')
        return len(side_lines) - 1

    for a, b, edge in merged_lines(_edges(plan)):
        v1, v2, join = vertex(a), vertex(b), edge.join
        door_face = join.special == DOOR_RAISE
        fields = [f"v1 = {v1}; v2 = {v2};", f"sidefront = {sidedef(edge.front, join, one_sided=edge.back is None, door_face=door_face)};"]
        if edge.back is not None:
            fields.append(f"sideback = {sidedef(edge.back, join, one_sided=False, door_face=False)}; twosided = true;")
        if edge.back is None or join.blocking:
            fields.append("blocking = true;")
        if join.special:
            fields.append(f"special = {join.special};")
            fields += [f"arg{i} = {v};" for i, v in enumerate(join.args) if v]
            fields.append("playeruse = true;" if join.use else "playercross = true;")
            if join.repeat:
                fields.append("repeatspecial = true;")
        line_lines.append(f"linedef {{ {' '.join(fields)} }}")
    out += vertex_lines + side_lines + line_lines
    everyone = "skill1 = true; skill2 = true; skill3 = true; skill4 = true; skill5 = true; single = true; coop = true; dm = true;"
    if plan.start is not None:
        sx, sy = plan.centre(*plan.cells(plan.start)[0])
        out.append(f"thing {{ x = {sx:.1f}; y = {sy:.1f}; type = 1; angle = {plan.start_angle}; {everyone} }}")
    for doomednum, room, extra in plan.things:
        x, y = plan.centre(*plan.cells(room)[-1])
        extra = dict(extra)
        x, y = float(extra.pop("x", x)), float(extra.pop("y", y))
        more = " ".join(f"{k} = {v};" for k, v in extra.items())
        out.append(f"thing {{ x = {x:.1f}; y = {y:.1f}; type = {doomednum}; {more} {everyone} }}")
    return "\n".join(out) + "\n"


def level_wad(plan: LevelPlan, map_name: str = "MAP01") -> bytes:
    """A PWAD holding the plan as map `map_name` (the engine builds its nodes)."""
    return pwad([(map_name, b""), ("TEXTMAP", level_textmap(plan).encode("ascii")), ("ENDMAP", b"")])


def door_lift_hom_level() -> LevelPlan:
    """A test level: a closet `a` (the start, facing east) with a door `D` to a hall `b`; in the
    hall's east wall a niche `m` whose walls have no texture (a hall of mirrors), a barrel in the
    hall, and a lift `L` (tag 1, raised) up to a gallery `c`, which only the lift reaches. Every
    room is reachable: through the door, then up the lift."""
    door = Join(special=DOOR_RAISE, args=(0, 32, 120))
    lift = Join(special=PLAT_DOWN_WAIT_UP_STAY, args=(1, 32, 105))
    return LevelPlan(
        rows=["###############",
              "#aDbbbbbbbbbbbm",
              "##Dbbbbbbbbbbbm",
              "##bbbbbbbbbbbb#",
              "##bbbbbbLLcccc#",
              "##bbbbbbLLcccc#",
              "###############"],
        rooms={"a": Room(), "D": Room(ceiling=0), "b": Room(ceiling=160), "m": Room(ceiling=160, floor_texture="FLAT14"),
               "L": Room(floor=64, ceiling=160, tag=1, floor_texture="FLAT20"), "c": Room(floor=64, ceiling=160)},
        joins={("a", "D"): door, ("b", "D"): door, ("b", "L"): lift, ("m", "#"): Join(missing=("middle",))},
        start="a", things=[(2035, "b", {"x": 352, "y": 160})])  # a barrel in the hall, to inspect


def guarded_corridor_level(width: int = 1) -> LevelPlan:
    """A test level: a start room `a`, a corridor `c` `width` cells of 64 units wide with an imp
    standing in its middle, and a room `b` beyond. In a corridor 64 units wide the imp (40 units
    across) leaves the player (32) no way past: under `immortal` (no monster moves, nothing fires)
    `b` is out of everyone's reach though the geometry joins it; 128 units wide, the player walks past."""
    rows = ["##########", "#aaa######"] + ["#aaacccbb#"] * width + ["#aaa###bb#", "##########"]
    return LevelPlan(rows=rows, rooms={"a": Room(), "c": Room(), "b": Room()}, start="a",
                     things=[(3001, "c", {"x": 5 * 64 + 32, "y": (len(rows) - 2 - width / 2) * 64})])


@dataclass(frozen=True)
class TrapLevel:
    """A test level of the softlock oracle: its plan, the rooms that trap the player (none: no trap),
    what it is, and a scripted walk into it (`capture/level_walk.py`'s `WaypointWalk` steps) that
    goes where the trap is, or where it seems to be, and then tries to get away."""

    plan: LevelPlan
    trap_rooms: tuple[str, ...]
    what: str
    walk: tuple[tuple, ...]

    @property
    def trap(self) -> bool:
        return bool(self.trap_rooms)


def _tour(x0: float, y0: float, x1: float, y1: float, times: int = 2) -> tuple[tuple, ...]:
    """Walk the corners of a rectangle `times` times: a player looking for a way out."""
    return tuple(("go", x, y) for _ in range(times) for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)))


def softlock_levels() -> dict[str, TrapLevel]:
    """The softlock oracle's test levels, each a room of 64-unit cells the player starts in (facing
    east), with one thing that may trap it:

    - `pit`: a pit 96 units deep and 3 cells wide (a running player leaps 2) with no way up (a trap);
    - `door`: a door to a closet, opened for 8 s by a switch of one use (any wall of the room) that
      closes behind the player (a trap);
    - `teleport`: a teleporter pad that sends the player into a sealed room (a trap);
    - `drop`: a ledge down 96 units to a lower hall that goes on to the exit switch (no trap);
    - `lift`: the pit, with a lift on one side that brings the player back up (no trap).

    Each one's walk looks around the room, goes in and walks the corners of where it landed, round
    and round (the traps: a player looking for a way out), or leaves by the exit or the lift and
    walks the room above (the others).
    """
    return {"pit": _pit_level(), "door": _door_level(), "teleport": _teleport_level(), "drop": _drop_level(),
            "lift": _lift_level()}


_ROOM = Room(ceiling=160)
_PIT = Room(floor=-96, ceiling=160, floor_texture="FLAT20")
_LOOK = (("wait", 40),)  # a look around the room first: a tester taking in the level
_INTO_PIT = _LOOK + (("go", 416, 224),) + _tour(368, 176, 464, 272)


def _pit_rows() -> list[str]:
    """The room with a pit 3 cells wide in it (`pit` and `lift`)."""
    return ["###########",
            "#aaaaaaaaa#",
            "#aaaapppaa#",
            "#aaaapppaa#",
            "#aaaapppaa#",
            "#aaaaaaaaa#",
            "###########"]


def _pit_level() -> TrapLevel:
    """A pit too deep to climb and too wide to leap: the player who walks in is trapped."""
    out_of_pit = _tour(368, 176, 464, 272, times=20)  # trying to get out: along the walls, round and round
    return TrapLevel(LevelPlan(rows=_pit_rows(), rooms={"a": _ROOM, "p": _PIT}, start="a"), ("p",), "a pit 96 units deep",
                     _INTO_PIT + out_of_pit)


def _door_level() -> TrapLevel:
    """A closet behind a door that a one-use switch opens for 8 s: it closes behind the player."""
    once = Join(special=DOOR_RAISE, args=(5, 32, 280), repeat=False)  # Door_Raise(tag 5), open 280 tics
    return TrapLevel(LevelPlan(
        rows=["##########",
              "#aaaaaaaa#",
              "#aaaaaaaa#",
              "#aaaaaaaa#",
              "####DD####",
              "###cccc###",
              "###cccc###",
              "##########"],
        rooms={"a": _ROOM, "D": Room(ceiling=0, tag=5), "c": _ROOM}, joins={("a", "#"): once}, start="a"),
        ("c",), "a door a switch of one use opens, which closes behind the player",
        _LOOK + (("face", 90), ("forward", 6), ("use",), ("go", 320, 288), ("go", 320, 224), ("go", 320, 128))
        + _tour(240, 100, 400, 160, times=20))


def _teleport_level() -> TrapLevel:
    """A teleporter pad walked over into a sealed room: no way back."""
    teleport = Join(special=TELEPORT, args=(0, 3), use=False)  # Teleport(tid 0, sector tag 3), walked over
    return TrapLevel(LevelPlan(
        rows=["##########",
              "#aaaaaaaa#",
              "#aaaTTaaa#",
              "#aaaTTaaa#",
              "#aaaaaaaa#",
              "##########",
              "###ccc####",
              "###ccc####",
              "##########"],
        rooms={"a": _ROOM, "T": Room(ceiling=160, floor_texture="GATE1"), "c": Room(ceiling=160, tag=3)},
        joins={("a", "T"): teleport}, start="a", things=[(14, "c", {})]), ("c",), "a one-way teleporter into a sealed room",
        _LOOK + (("go", 320, 384),) + _tour(224, 96, 352, 160, times=20))


def _drop_level() -> TrapLevel:
    """A one-way drop that is no trap: the lower hall goes on to the exit switch."""
    return TrapLevel(LevelPlan(
        rows=["############",
              "#aaaabbbbbb#",
              "#aaaabbbbbb#",
              "#aaaabbbbbx#",
              "############"],
        rooms={"a": _ROOM, "b": Room(floor=-96, ceiling=160), "x": Room(floor=-96, ceiling=160)},
        joins={("x", "#"): Join(special=EXIT_NORMAL)}, start="a"), (),
        "a one-way drop to a lower hall that goes on to the exit",
        _LOOK + (("go", 480, 160),) + _tour(416, 96, 608, 224) + (("go", 672, 96), ("face", 0), ("forward", 4), ("use",))
        + _tour(96, 96, 224, 224) + (("wait", 100),))


def _lift_level() -> TrapLevel:
    """The pit again, with a lift on one side that brings the player back up: no trap."""
    lift_rows = [row.replace("aaaaaaaaa", "aaaaLLLaa", 1) if i == 1 else row for i, row in enumerate(_pit_rows())]
    room_above = (("go", 416, 416), ("go", 576, 416), ("go", 576, 96), ("go", 160, 96), ("go", 160, 416))  # round the pit
    return TrapLevel(LevelPlan(
        rows=lift_rows, rooms={"a": _ROOM, "p": _PIT, "L": Room(ceiling=160, tag=2, floor_texture="FLAT20")},
        joins={("p", "L"): Join(special=PLAT_DOWN_WAIT_UP_STAY, args=(2, 32, 105))}, start="a"), (),
        "a pit with a lift that brings the player back up",
        _INTO_PIT + (("go", 416, 288), ("face", 90), ("use",), ("forward", 12), ("wait", 36), ("go", 416, 416))
        + room_above + (("wait", 100),))
