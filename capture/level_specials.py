"""What a level's line specials do, in the two numbering schemes the engine reads.

A classic Doom-format map numbers its line specials the Doom way (1 = a door a player opens by
hand, 62 = a lift, 97 = a teleporter, 11 = the exit switch …; Boom adds generalised specials from
0x2F80 up); a UDMF map in the `zdoom` namespace uses Hexen's action specials with arguments
(12 = `Door_Raise(tag, …)`, 62 = `Plat_DownWaitUpStay(tag, …)`, 70 = `Teleport(tid, tag)` …).
`describe(special, …)` turns either into one `LineAction`: what it moves (a door's ceiling, a
lift's or a floor's height, a teleport, the exit), which sectors (the line's back sector when it
is worked by hand, else the sectors tagged like the line), how it is set off (used, crossed,
shot) and whether it needs a key. Only what the reachability graph needs is modelled: doors
open to their lowest neighbour's ceiling, lifts and floors may stand at their own height or the
one they move to, teleports lead to their destination's sector.
"""

from __future__ import annotations

from dataclasses import dataclass

DOOR, CLOSE, LIFT, FLOOR, TELEPORT, EXIT = "door", "close", "lift", "floor", "teleport", "exit"
"""What a special moves: a door that opens, a door that closes (for good, or for a while), a lift
(down, then back up), a floor (moves once, to a height of its own), a teleport, the level's exit."""

USE, CROSS, SHOOT = "use", "cross", "shoot"
"""How the player sets a line off: pressing USE facing it, walking over it, shooting it."""

KEYS = ("blue", "yellow", "red")
KEY_THINGS = {5: "blue", 40: "blue", 6: "yellow", 39: "yellow", 13: "red", 38: "red"}
"""Doom editor numbers of the keycards and skull keys, by the lock they open."""

_TRIGGERS = {"W1": (CROSS, False), "WR": (CROSS, True), "S1": (USE, False), "SR": (USE, True), "G1": (SHOOT, False),
             "GR": (SHOOT, True), "D1": (USE, False), "DR": (USE, True)}
"""Doom's trigger letters: W walk over, S switch (use), G gun (shoot), D door (use, worked by hand
on the door's own face); 1 once, R repeatable."""


@dataclass(frozen=True)
class LineAction:
    """What a line special does to the level."""

    kind: str
    """`DOOR`, `CLOSE`, `LIFT`, `FLOOR`, `TELEPORT` or `EXIT`."""
    trigger: str
    """`USE`, `CROSS` or `SHOOT`."""
    repeat: bool
    manual: bool
    """Worked by hand: it moves the line's back sector (a door's own face), not the tagged sectors."""
    key: str | None = None
    """The key it needs (`blue`, `yellow`, `red`), or None."""
    floor: str = ""
    """For `FLOOR`: where it moves the floor (`lowest`, `highest`, `highest+8`, `next`, `+24`,
    `ceiling`: the lowest neighbouring ceiling), else empty."""
    monsters_only: bool = False
    """A teleporter only monsters take."""


def _doom_table() -> dict[int, LineAction]:
    table: dict[int, LineAction] = {}

    def add(kind: str, specials: dict[int, str], *, key: dict[int, str] | None = None, floor: str = "",
            monsters_only: bool = False) -> None:
        for special, trigger in specials.items():
            how, repeat = _TRIGGERS[trigger]
            table[special] = LineAction(kind, how, repeat, trigger.startswith("D"), (key or {}).get(special), floor,
                                        monsters_only)

    doors = {1: "DR", 26: "DR", 27: "DR", 28: "DR", 31: "D1", 32: "D1", 33: "D1", 34: "D1", 117: "DR", 118: "D1",
             2: "W1", 4: "W1", 29: "S1", 46: "GR", 61: "SR", 63: "SR", 86: "WR", 90: "WR", 103: "S1", 105: "WR",
             106: "WR", 108: "W1", 109: "W1", 111: "S1", 112: "S1", 114: "SR", 115: "SR", 99: "SR", 133: "S1",
             134: "SR", 135: "S1", 136: "SR", 137: "S1"}
    add(DOOR, doors, key={26: "blue", 32: "blue", 99: "blue", 133: "blue", 27: "yellow", 34: "yellow", 136: "yellow",
                          137: "yellow", 28: "red", 33: "red", 134: "red", 135: "red"})
    add(CLOSE, {3: "W1", 16: "W1", 42: "SR", 50: "S1", 75: "WR", 76: "WR", 107: "WR", 110: "W1", 113: "S1", 116: "SR"})
    add(LIFT, {10: "W1", 21: "S1", 62: "SR", 88: "WR", 120: "WR", 121: "W1", 122: "S1", 123: "SR", 53: "W1", 87: "WR"})
    add(FLOOR, {23: "S1", 38: "W1", 60: "SR", 82: "WR"}, floor="lowest")
    add(FLOOR, {19: "W1", 45: "SR", 83: "WR", 102: "S1"}, floor="highest")
    add(FLOOR, {36: "W1", 70: "SR", 71: "S1", 98: "WR"}, floor="highest+8")
    add(FLOOR, {18: "S1", 20: "S1", 22: "W1", 47: "G1", 68: "SR", 69: "SR", 95: "WR", 119: "W1", 128: "WR", 129: "WR",
                130: "W1", 131: "S1", 132: "SR", 7: "S1", 8: "W1", 100: "W1", 127: "S1"}, floor="next")
    add(FLOOR, {58: "W1", 92: "WR"}, floor="+24")
    add(FLOOR, {5: "W1", 91: "WR", 101: "S1", 64: "SR", 24: "G1", 55: "S1", 56: "W1", 65: "SR", 94: "WR"}, floor="ceiling")
    add(TELEPORT, {39: "W1", 97: "WR"})
    add(TELEPORT, {125: "W1", 126: "WR"}, monsters_only=True)
    add(EXIT, {11: "S1", 51: "S1", 52: "W1", 124: "W1"})
    return table


DOOM_SPECIALS = _doom_table()
"""Doom-format line specials the reachability graph knows, by number."""

_GENERALISED_TRIGGERS = ("W1", "WR", "S1", "SR", "G1", "GR", "D1", "DR")
_LOCK_KEYS = {1: "red", 2: "blue", 3: "yellow", 4: "red", 5: "blue", 6: "yellow"}
"""Boom's generalised locked door's key field (0: any key, 7: all keys, taken as no key known)."""


def _generalised(special: int) -> LineAction | None:
    """Boom's generalised specials: the trigger in the low three bits, the kind by range."""
    trigger = _GENERALISED_TRIGGERS[special & 7]
    how, repeat = _TRIGGERS[trigger]
    manual = trigger.startswith("D")
    if 0x3C00 <= special < 0x4000:  # door
        kind = CLOSE if (special >> 5) & 3 in (2, 3) else DOOR  # close-stay, close-wait-open
        return LineAction(kind, how, repeat, manual)
    if 0x3800 <= special < 0x3C00:  # locked door
        return LineAction(DOOR, how, repeat, manual, _LOCK_KEYS.get((special >> 6) & 7))
    if 0x3400 <= special < 0x3800:  # lift
        return LineAction(LIFT, how, repeat, manual)
    if 0x6000 <= special < 0x8000:  # floor
        return LineAction(FLOOR, how, repeat, manual, floor="next")
    if 0x3000 <= special < 0x3400:  # stairs
        return LineAction(FLOOR, how, repeat, manual, floor="next")
    return None


UDMF_DOORS = {10: CLOSE, 11: DOOR, 12: DOOR, 13: DOOR, 14: DOOR, 202: DOOR, 249: CLOSE}
"""Hexen/ZDoom action specials of doors: Door_Close, Door_Open, Door_Raise, Door_LockedRaise,
Door_Animated, Generic_Door, Door_CloseWaitOpen."""
UDMF_LIFTS = {60, 61, 62, 63, 64, 65, 172, 203, 206, 207, 228, 230, 231}
"""Plat_* action specials (down, wait, up; perpetual; by value; generic)."""
UDMF_FLOORS = {20: "+24", 21: "lowest", 22: "highest", 23: "+24", 24: "next", 25: "highest", 28: "+24", 35: "+24",
               36: "+24", 37: "+24", 46: "+24", 238: "+24", 239: "+24", 240: "+24", 242: "lowest", 200: "next"}
"""Floor_* action specials and where they take the floor (the by-value ones taken as one step up)."""
UDMF_TELEPORTS = {70, 71, 215}
UDMF_EXITS = {74, 243, 244}
_HEXEN_LOCKS = {1: "red", 2: "blue", 3: "yellow", 4: "red", 5: "blue", 6: "yellow", 129: "red", 130: "blue", 131: "yellow",
                132: "red", 133: "blue", 134: "yellow"}


def describe(special: int, *, udmf: bool = False, args: tuple[int, ...] = (), flags: frozenset[str] = frozenset()) -> LineAction | None:
    """What line special `special` does, or None when it moves nothing the graph models
    (scrolling walls, lights, …). A UDMF special reads its arguments (`args`, arg0 the sector
    tag: 0 means the line's own back sector) and how it is set off from the line's flags
    (`playeruse`, `playercross`, `impact`, `repeatspecial`)."""
    if not special:
        return None
    if not udmf:
        return DOOM_SPECIALS.get(special) or (_generalised(special) if special >= 0x2F80 else None)
    trigger = USE if "playeruse" in flags else CROSS if "playercross" in flags else SHOOT if "impact" in flags else ""
    if not trigger:
        return None  # set off by monsters or scripts only
    repeat = "repeatspecial" in flags
    manual = not (args[0] if args else 0)
    if special in UDMF_DOORS:
        lock = args[3] if special == 13 and len(args) > 3 else 0
        return LineAction(UDMF_DOORS[special], trigger, repeat, manual, _HEXEN_LOCKS.get(lock))
    if special in UDMF_LIFTS:
        return LineAction(LIFT, trigger, repeat, manual)
    if special in UDMF_FLOORS:
        return LineAction(FLOOR, trigger, repeat, manual, floor=UDMF_FLOORS[special])
    if special in UDMF_TELEPORTS:
        return LineAction(TELEPORT, trigger, repeat, False)
    if special in UDMF_EXITS:
        return LineAction(EXIT, trigger, repeat, False)
    return None


DAMAGE_FLOORS = {4: "a damaging floor (20 %)", 5: "a damaging floor (10 %)", 7: "a damaging floor (5 %)",
                 11: "a damaging floor (20 %, ends the level)", 16: "a damaging floor (20 %)"}
"""Doom sector specials that hurt the player standing on them: what a death there was caused by."""
