"""Trapped, not just stuck: the softlock oracle on a Doom level, by its geometry and telemetry.

The stuck oracle fires when the picture stops changing. A softlock is the other kind of dead end:
the player still moves, but can never get back to the rest of the level or finish it — a pit with
no way up, a door opened by a switch of one use that closed behind it, a one-way teleporter into
a sealed room. The frames keep changing, and under `--rules immortal` no death ends it.

`SoftlockOracle` follows what the player did to the level (`capture/level_graph.py`'s
`LevelState`): the lines of one use it set off (a USE press the engine's step reports, a
walk-over line or a teleporter its positions crossed), the keys lying in the sectors it walked
through, and how high it climbs (a ledge of `JUMP_CLIMB` with a jump key, else a step). Every
step it asks the level's graph which sectors can still be reached from where the player stands:
doors and lifts still to be worked from there, what one-use lines moved for good, a spent
switch's door shut. When neither the start's sector nor an exit can be reached from there for
`patience` steps in a row (long enough for a door or a lift that is still moving to settle), it is
a finding: where (the position, the sectors of the trap), why ("no way up from a pit 96 units
deep", "the only door out (sector 3) closed for good: …"), and the actions that led there (every
finding keeps them, replayable). The episode then ends (`ends_episode`), so the run goes on from a
new start, once the player has been in no cell new to the run for `patience` steps: a trap not
walked before is walked first, as a tester looks round the pit it fell into.

The finding says what it judged with: the level's geometry and telemetry; neither steers the agent.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from playtester.bugs.oracles import Finding
from playtester.capture.level_graph import DOOR_PASSAGE, DROP, LIFT_PASSAGE, LevelGraph, LevelState
from playtester.capture.level_map import MAX_STEP, PLAYER_HEIGHT
from playtester.capture.level_specials import CLOSE, CROSS, DOOR, EXIT, KEY_THINGS, LIFT, TELEPORT

PATIENCE = 64
"""Steps the player must stay trapped before it is a finding (7 s at ViZDoom's 8.75 steps a
second): a Doom door waits 150 tics open and a lift 105 tics down, and the oracle cannot see
whether one is still moving."""
TELEPORT_JUMP = 128.0
"""A move this long in one step (map units) was a teleport: running covers about 67 a step."""
JUDGED_BY = "the level's geometry and telemetry"
WALKED_CELL = 64.0
"""Map units of the cells whose first visit keeps a trapped player's episode going (`ends_episode`):
the report's coverage cells."""


def softlock_patience(graph: LevelGraph, tics_per_step: int = 4) -> int:
    """`PATIENCE`, or longer where the level's doors stay open or its lifts down longer (a UDMF
    door's or lift's delay, its third argument, in tics), with 32 steps to spare."""
    longest = 0
    if graph.level.udmf:
        for ld, action in zip(graph.level.linedefs, graph.actions):
            if action is not None and action.kind in (DOOR, LIFT) and len(ld.args) > 2:
                longest = max(longest, int(ld.args[2]))
    return max(PATIENCE, math.ceil(longest / tics_per_step) + 32)


@dataclass(frozen=True)
class Move:
    """The player went from sector `source` to `target` at `step`, across `line` (None: not known)."""

    step: int
    source: int
    target: int
    line: int | None
    teleport: bool = False


class SoftlockOracle:
    """The player can no longer reach the start's sector nor an exit; see the module's docstring."""

    name = "softlock"

    def __init__(self, graph: LevelGraph, *, climb: float = MAX_STEP, patience: int | None = None) -> None:
        """`climb`: how high the player gets (`JUMP_CLIMB` with a jump key). Raises `UserError`
        when the level has no player start inside a sector (the oracle cannot judge it)."""
        self.graph = graph
        self.climb = climb
        self.patience = patience or softlock_patience(graph)
        self.start = graph.start_sector()
        level = graph.level
        self.key_sectors: dict[int, set[str]] = {}
        for t in level.things:
            s = graph.sector_at(t.x, t.y) if t.type in KEY_THINGS else None
            if s is not None:
                self.key_sectors.setdefault(s, set()).add(KEY_THINGS[t.type])
        self.crossing = np.array([i for i, a in enumerate(graph.actions) if a is not None and a.trigger == CROSS], dtype=int)
        self.two_sided = np.array([i for i, ld in enumerate(level.linedefs)
                                   if ld.front is not None and ld.back is not None and ld.front != ld.back], dtype=int)
        self.movers: dict[int, list[int]] = {}
        """Each sector a special moves: the lines that move it."""
        for i, action in enumerate(graph.actions):
            if action is not None and action.kind not in (TELEPORT, EXIT):
                for s in graph.targets(i):
                    self.movers.setdefault(s, []).append(i)
        self.shuttable = frozenset(s for i, a in enumerate(graph.actions) if a is not None and a.kind == CLOSE
                                   for s in graph.targets(i))
        """Sectors a close line shuts: doors, though no line opens them."""
        self._regions: dict[tuple[int, LevelState], frozenset[int]] = {}
        self._start_checked = False
        self.walked: set[tuple[int, int]] = set()
        """The `WALKED_CELL` cells the player has been in, over the run (`ends_episode`)."""
        self.reset()

    def reset(self) -> None:
        self.fired: dict[int, int] = {}
        """Lines with a special set off this episode, and the step each was first set off at."""
        self.visited: set[int] = set()
        self.keys: set[str] = set()
        self.moves: deque[Move] = deque(maxlen=256)
        self._last: tuple[float, float, int | None] | None = None
        self._since: int | None = None
        self._reported = False
        self._new_cell_at: int | None = None
        """The last step of this episode at which the player entered a cell new to `walked`."""
        self.ends_episode = False
        """Trapped and reported, and no new cell walked for `patience` steps: the tester loop ends
        the episode (the run goes on from a new start). A trap the player has not walked yet is
        walked first (a tester looks round the pit it fell into; MAP07's red key lies in one), as
        long as each `patience` steps bring a cell it had not been in."""

    # -- what the player did to the level ----------------------------------------------------------
    def state(self) -> LevelState:
        return LevelState(frozenset(self.fired), frozenset(self.keys), self.climb)

    def region(self, sector: int, state: LevelState | None = None) -> frozenset[int]:
        """The sectors reachable from `sector` in `state` (default: the level as the player left it)."""
        state = state or self.state()
        key = (sector, state)
        if key not in self._regions:
            if len(self._regions) > 4096:
                self._regions.clear()
            self._regions[key] = frozenset(self.graph.reachable(sector, state))
        return self._regions[key]

    def _crossed(self, x0: float, y0: float, x1: float, y1: float, lines: np.ndarray) -> list[int]:
        """Which of `lines` the segment from `(x0, y0)` to `(x1, y1)` crosses, in order along it."""
        if not len(lines) or (x0, y0) == (x1, y1):
            return []
        ends = self.graph.line_ends[lines]
        dx, dy = x1 - x0, y1 - y0
        ex, ey = ends[:, 2] - ends[:, 0], ends[:, 3] - ends[:, 1]
        denom = dx * ey - dy * ex
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((ends[:, 0] - x0) * ey - (ends[:, 1] - y0) * ex) / denom
            u = ((ends[:, 0] - x0) * dy - (ends[:, 1] - y0) * dx) / denom
        hit = np.flatnonzero((denom != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1))
        return [int(lines[i]) for i in hit[np.argsort(t[hit])]]

    def _fire(self, line: int, step: int) -> None:
        self.fired.setdefault(line, step)

    def _track(self, x: float, y: float, sector: int | None, info: dict[str, Any], step: int) -> None:
        """Note the lines set off, the sectors walked, the keys taken and the moves between sectors."""
        used = info.get("used")
        if used and (used.get("key") is None or used["key"] in self.keys):
            self._fire(int(used["line"]), step)
        if sector is not None:
            self.visited.add(sector)
            self.keys |= self.key_sectors.get(sector, set())
        last, self._last = self._last, (x, y, sector)
        if last is None:
            return
        lx, ly, ls = last
        if math.hypot(x - lx, y - ly) > TELEPORT_JUMP:  # a teleport: the teleporter lines of the sector left
            tele = [int(i) for i in self.crossing if self.graph.actions[i].kind == TELEPORT
                    and self.graph.level.linedefs[i].front == ls and self.graph.teleport_target(i) == sector]
            for i in tele:
                self._fire(i, step)
            if ls is not None and sector is not None and ls != sector:
                self.moves.append(Move(step, ls, sector, tele[0] if tele else None, teleport=True))
            return
        for i in self._crossed(lx, ly, x, y, self.crossing):
            self._fire(i, step)
        if ls is not None and sector is not None and ls != sector:
            between = [i for i in self._crossed(lx, ly, x, y, self.two_sided)
                       if {self.graph.level.linedefs[i].front, self.graph.level.linedefs[i].back} == {ls, sector}]
            self.moves.append(Move(step, ls, sector, between[0] if between else None))

    # -- the judgement -----------------------------------------------------------------------------
    def trapped(self, sector: int, state: LevelState | None = None) -> frozenset[int] | None:
        """The region the player is shut in, standing in `sector` (None: the start's sector or an exit
        can still be reached from there)."""
        state = state or self.state()
        region = self.region(sector, state)
        if sector in self.graph.door_sectors() or sector in self.graph.narrow:  # a door does not close on the player:
            # both sides are open to it; over a sector narrower than the player, it stands on a neighbour
            region = region.union(*(self.region(n, state) for n in self.graph.neighbours[sector]))
        if self.start in region or self.graph.exit_within(set(region), state.keys) is not None:
            return None
        return region

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        if info.get("restarted"):  # the level started again (a death, the exit): a fresh level
            self.reset()
        position = info.get("position")
        if position is None:
            return []
        out = [] if self._start_checked else self._start_trap(episode, step)
        self._start_checked = True
        x, y = float(position[0]), float(position[1])
        sector = self.graph.sector_at(x, y)
        self._track(x, y, sector, info, step)
        cell = int(x // WALKED_CELL), int(y // WALKED_CELL)
        if cell not in self.walked:
            self.walked.add(cell)
            self._new_cell_at = step
        if self._reported:
            self.ends_episode = self._walked(step)
            return out
        if sector is None:
            return out
        region = self.trapped(sector)
        if region is None:
            self._since = None
            return out
        self._since = step if self._since is None else self._since
        if step - self._since + 1 < self.patience:
            return out
        self._reported = True
        self.ends_episode = self._walked(step)
        cause, details = self.cause(region)
        where = f"({x:.0f}, {y:.0f})"
        sectors = ", ".join(str(s) for s in sorted(region)[:8]) + (" …" if len(region) > 8 else "")
        details |= {"position": [round(float(v), 1) for v in position], "sector": sector, "region": sorted(region),
                    "trapped_since": self._since, "cause": cause, "fired": {str(k): v for k, v in sorted(self.fired.items())},
                    "new_start": True, "judged_by": JUDGED_BY}
        return out + [Finding("softlock", f"softlock at {where}: {cause}; neither the start nor an exit can be reached "
                              f"from sector{'s' if len(region) > 1 else ''} {sectors} (for {self.patience} steps); "
                              "the run goes on from a new start once the trap is walked", episode, step, details)]

    def _walked(self, step: int) -> bool:
        """No cell new to `walked` for `patience` steps (or none this episode)."""
        return self._new_cell_at is None or step - self._new_cell_at + 1 >= self.patience

    # -- why ---------------------------------------------------------------------------------------
    def entry(self, region: frozenset[int]) -> Move | None:
        """The last move into `region` from outside it."""
        for move in reversed(self.moves):
            if move.target in region and move.source not in region:
                return move
        return None

    def lip(self, region: frozenset[int]) -> float | None:
        """The least height the player must climb to leave `region` across an open line (None: no
        such line: every line out is a wall, a closed door or too low a gap)."""
        sectors, best = self.graph.level.sectors, None
        for i in self.two_sided:
            ld = self.graph.level.linedefs[i]
            for inside, outside in ((ld.front, ld.back), (ld.back, ld.front)):
                if inside in region and outside not in region and not ld.blocking:
                    a, b = sectors[inside], sectors[outside]
                    if min(a.ceiling, b.ceiling) - b.floor >= PLAYER_HEIGHT and b.floor > a.floor:
                        best = b.floor - a.floor if best is None else min(best, b.floor - a.floor)
        return best

    def cause(self, region: frozenset[int]) -> tuple[str, dict[str, Any]]:
        """Why the player cannot leave `region`, in words, with what it rests on."""
        entry = self.entry(region)
        details: dict[str, Any] = {}
        if entry is not None:
            details["entered"] = {"step": entry.step, "from": entry.source, "to": entry.target, "line": entry.line,
                                  "teleport": entry.teleport}
        ways = [p for p in self.graph.passages(climb=self.climb) if p.source in region and p.target not in region]
        if not ways:  # the level itself has no way out of here
            if entry is not None and entry.teleport:
                line = f" (line {entry.line})" if entry.line is not None else ""
                return f"a one-way teleporter{line} led here, and no passage leads out", details
            lip = self.lip(region)
            how = ""
            if entry is not None:
                drop = self.graph.level.sectors[entry.source].floor - self.graph.level.sectors[entry.target].floor
                if drop > 0:
                    how = f" (dropped {drop:g} units into it" + (f" across line {entry.line}" if entry.line is not None else "") + \
                          f" at step {entry.step})"
            if lip is not None:
                details["depth"] = lip
                return f"no way up from a pit {lip:g} units deep{how}", details
            return f"no passage leads out{how}", details
        reasons = []
        for p in ways:
            why = self.closed_because(p, region)
            if why not in reasons:
                reasons.append(why)
        details["ways_out"] = [{"from": p.source, "to": p.target, "kind": p.kind, "line": p.line} for p in ways]
        if len(reasons) == 1:
            return f"the only way out: {reasons[0]}", details
        return "every way out is shut: " + "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else ""), details

    def closed_because(self, passage, region: frozenset[int]) -> str:
        """Why a passage the level has out of `region` cannot be taken now."""
        graph = self.graph
        if passage.kind == TELEPORT:
            return f"the teleporter (line {passage.line}) {self._line_status(passage.line, region)}"
        doors = graph.door_sectors() | self.shuttable
        moved = [s for s in (passage.source, passage.target) if s in doors or self._moved_by(s)]
        if passage.kind == DOOR_PASSAGE or any(s in doors for s in moved):
            door = next((s for s in moved if s in doors), passage.target)
            return f"the door (sector {door}) {self._opener_status(door, region, 'opens')}"
        if passage.kind == LIFT_PASSAGE or moved:
            lift = moved[0] if moved else passage.target
            return f"the lift or moving floor (sector {lift}) {self._opener_status(lift, region, 'moves')}"
        if passage.kind == DROP:
            return f"a drop across line {passage.line}, which only leads down"
        return f"the way across line {passage.line} is shut"

    def _moved_by(self, sector: int) -> list[int]:
        """The lines whose special moves `sector` (opens or shuts it, lowers or raises it)."""
        return self.movers.get(sector, [])

    def _opener_status(self, sector: int, region: frozenset[int], verb: str) -> str:
        """What became of the lines that open or move `sector`: spent, locked, out of reach."""
        lines = self._moved_by(sector)
        shut = [i for i in lines if self.graph.actions[i].kind == CLOSE and i in self.fired and self.graph.actions[i].lasts]
        if shut:
            return f"was shut for good by line {shut[0]} at step {self.fired[shut[0]]}"
        openers = [i for i in lines if self.graph.actions[i].kind != CLOSE]
        if not openers:
            return f"{verb} by no line"
        spent = [i for i in openers if i in self.fired and not self.graph.actions[i].repeat]
        locked = [i for i in openers if i not in spent and self.graph.actions[i].key is not None
                  and self.graph.actions[i].key not in self.keys]
        outside = [i for i in openers if i not in spent and i not in locked]
        parts = []
        if spent:
            parts.append(f"{_lines(spent)} of one use {'was' if len(spent) == 1 else 'were'} set off at step "
                         f"{min(self.fired[i] for i in spent)}")
        if locked:
            parts.append(f"{_lines(locked)} {'needs' if len(locked) == 1 else 'need'} the "
                         f"{self.graph.actions[locked[0]].key} key")
        if outside:
            parts.append(f"{_lines(outside)} {'is' if len(outside) == 1 else 'are'} worked only from outside")
        return ("closed for good: " if spent and not locked else f"{verb} only from outside: " if not locked else "is locked: ") + \
            "; ".join(parts)

    def _line_status(self, line: int, region: frozenset[int]) -> str:
        """What became of a teleporter's line."""
        action = self.graph.actions[line]
        if line in self.fired and not action.repeat:
            return f"works once and was set off at step {self.fired[line]}"
        if action.key is not None and action.key not in self.keys:
            return f"needs the {action.key} key"
        if not any(s in region for s in self.graph.trigger_sectors(line)):
            return "is set off only from outside"
        return "cannot be set off from here"

    # -- a trap from the start ---------------------------------------------------------------------
    def _start_trap(self, episode: int, step: int) -> list[Finding]:
        """A level whose player starts in a trap: less than half of the walkable area can be reached
        from the start and, where the level has an exit, no exit either. Said once. A start region
        that holds most of the level is no trap even where the graph finds no way to the exit: a
        level is finishable more often than the graph knows (a mechanism it does not model)."""
        graph = self.graph
        region = self.region(self.start, LevelState(climb=self.climb))
        stand = graph.walkable_sectors()
        areas = np.bincount(graph.raster[graph.raster >= 0].ravel(), minlength=len(graph.level.sectors)) * stand
        share = float(areas[list(region)].sum() / max(1, areas.sum()))
        if share >= 0.5 or (graph.exits and graph.exit_within(set(region)) is not None):
            return []
        why = f"only {share:.0%} of the level's walkable area can be reached from the start " + \
            ("and no exit" if graph.exits else "(the level has no exit)")
        return [Finding("softlock", f"the player starts inside a trap: {why}", episode, step,
                        {"at_start": True, "region": sorted(region), "cause": why, "judged_by": JUDGED_BY})]


def _lines(lines: list[int], most: int = 4) -> str:
    """`line 6` or `lines 4, 7, 8` (the first `most`)."""
    shown = ", ".join(str(i) for i in lines[:most]) + (" …" if len(lines) > most else "")
    return f"line {shown}" if len(lines) == 1 else f"lines {shown}"


def softlock_oracle(graph: LevelGraph, keymap=None) -> SoftlockOracle | None:
    """The oracle for a level played with `keymap` (a jump key climbs `JUMP_CLIMB`), or None when
    the level's start lies in no sector (`softlock_off` says why)."""
    from playtester.capture.level_map import JUMP_CLIMB
    from playtester.errors import UserError

    climb = JUMP_CLIMB if keymap is None or "jump" in keymap.names else MAX_STEP
    try:
        return SoftlockOracle(graph, climb=climb)
    except UserError:
        return None


def softlock_off(game: str, graph: LevelGraph | None = None) -> str | None:
    """Why the softlock oracle cannot judge a Doom level (its geometry cannot be read, or its start
    lies in no sector), in one line; None when it can, or when the game is no Doom level."""
    from playtester.capture.rules import is_level
    from playtester.errors import UserError

    if not is_level(game):
        return None
    try:
        if graph is None:
            from playtester.capture.games import level_of_game

            graph = LevelGraph(level_of_game(game))
        graph.start_sector()
    except UserError as e:
        return f"the softlock oracle is off: {e}"
    return None


def trap_oracle_status(game: str, on_map: bool) -> str | None:
    """What judges whether the player is trapped in a run of `game` (`on_map`: drawn on a map), in
    a few words for the report: the level's geometry, pixels alone (a game with no map), or off
    and why; None for the park (it has no traps) or a game on a studio's map (no geometry, and
    positions rather than pixels for places)."""
    from playtester.capture.rules import is_level

    if is_level(game):
        return softlock_off(game) or f"by {JUDGED_BY} (softlock: trapped for good)"
    if game.startswith("doom:") or on_map:
        return None
    return "from pixels alone (confinement: possibly trapped)"
