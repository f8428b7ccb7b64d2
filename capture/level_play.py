"""How `DoomGame` plays a Doom level under tester rules (`capture/rules.py`): the engine's
arguments, god mode after each start, the level started again within the episode after a death
or the exit, what killed the player, and which special line a USE press worked.

Events ride in the step's `info`, for the tester loop to log and the oracles to judge:

- `used`: `{"line", "kind", "sectors", "key"}` when the step pressed USE facing a line with a special
  that is set off by USE, within the engine's reach (64 units): the first line along the view,
  looked through two-sided lines with nothing to use, as the engine does;
- `death`: `{"position", "cause"}` when the player died (under `play` or `no-monsters`); the cause
  is the nearest monster in view in the last 8 steps, else a damaging floor, else unknown;
- `level_exit`: `{"position"}` when the level was left (an exit switch or line);
- `restarted`: why the level started again within the episode (`death` or `exit`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from playtester.capture.level_graph import USE_RANGE
from playtester.capture.level_map import read_level
from playtester.capture.level_specials import DAMAGE_FLOORS, USE

MONSTERS = frozenset({
    "Zombieman", "ShotgunGuy", "ChaingunGuy", "DoomImp", "Demon", "Spectre", "LostSoul", "Cacodemon", "HellKnight",
    "BaronOfHell", "Arachnotron", "PainElemental", "Revenant", "Fatso", "Archvile", "Cyberdemon", "SpiderMastermind",
    "WolfensteinSS", "CommanderKeen"})


@lru_cache(maxsize=8)
def _level(wads: tuple[str, ...], name: str):
    from playtester.capture.level_graph import LevelGraph

    return LevelGraph(read_level(list(wads), name))


def scenario_graph(scenario):
    """The `LevelGraph` of the map a `DoomScenario` plays (read once per process), or None when its
    geometry cannot be read: the level still plays, and the oracles that need its geometry are off
    (`playtester/bugs/softlock.py`'s `softlock_off` says why)."""
    import struct

    from playtester.errors import UserError

    wads = ([str(scenario.pwad)] if scenario.pwad is not None else []) + [str(scenario.iwad)]
    try:
        return _level(tuple(wads), scenario.map)
    except (UserError, OSError, struct.error, KeyError, ValueError, IndexError):
        return None


def engine_args(level: bool, rules: str | None) -> list[str]:
    """The engine's arguments: on a level always run (as testers play), no monsters under
    `no-monsters`; never a message printed on screen ("a secret is revealed!" mid-screen, which
    `con_midtime 0` alone left up, and pickup messages at the top: text that stays put on screen
    while the view turns, which the hall-of-mirrors oracle would take for a smear). All
    are set either way: the engine keeps such settings in `_vizdoom.ini` in the working folder, and
    a level's run must not make the next park's player run."""
    return [f"+cl_run {int(level)}", f"+sv_nomonsters {int(rules == 'no-monsters')}", "+con_midtime 0",
            "+cl_showsecretmessage 0", "+show_messages 0"]


def used_line(graph, x: float, y: float, angle: float) -> int | None:
    """The line a USE press at `(x, y)` looking at `angle` degrees works: the first line along the
    view within `USE_RANGE` that has a USE special; None when a wall or nothing usable comes first."""
    a = math.radians(angle)
    dx, dy = math.cos(a) * USE_RANGE, math.sin(a) * USE_RANGE
    level, actions, ends = graph.level, graph.actions, graph.line_ends
    ex, ey = ends[:, 2] - ends[:, 0], ends[:, 3] - ends[:, 1]
    denom = dx * ey - dy * ex
    with np.errstate(divide="ignore", invalid="ignore"):
        t = ((ends[:, 0] - x) * ey - (ends[:, 1] - y) * ex) / denom  # along the view, 0..1
        u = ((ends[:, 0] - x) * dy - (ends[:, 1] - y) * dx) / denom  # along the line, 0..1
    hit = np.flatnonzero((denom != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1))
    for i in hit[np.argsort(t[hit])]:
        ld, action = level.linedefs[i], actions[i]
        if action is not None and action.trigger == USE:
            return int(i)
        if ld.back is None or ld.blocking:
            return None
        front, back = level.sectors[ld.front], level.sectors[ld.back]
        if min(front.ceiling, back.ceiling) <= max(front.floor, back.floor):
            return None  # a closed opening (a shut door) stops the look
    return None


def death_cause(level_graph, position: tuple[float, float, float], objects: list[dict[str, Any]]) -> str:
    """What most likely killed the player: the nearest of the monsters `objects` (those in view
    lately), else a damaging floor."""
    x, y = position[0], position[1]
    monsters = [o for o in objects if o.get("class") in MONSTERS]
    if monsters:
        near = min(monsters, key=lambda o: math.hypot(o["position"][0] - x, o["position"][1] - y))
        distance = math.hypot(near["position"][0] - x, near["position"][1] - y)
        return f"{near['class']} (the nearest monster in view lately, {distance:.0f} units away)"
    sector = level_graph.sector_at(x, y)
    if sector is not None and level_graph.level.sectors[sector].special in DAMAGE_FLOORS:
        return DAMAGE_FLOORS[level_graph.level.sectors[sector].special]
    return "unknown (no monster in view, no damaging floor)"


def use_event(level_graph, line: int) -> dict[str, Any]:
    action = level_graph.actions[line]
    return {"line": line, "kind": action.kind, "sectors": level_graph.targets(line), "key": action.key}
