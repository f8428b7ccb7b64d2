"""Oracles a level designer wants on a Doom level, each judging every step like the others
(`playtester/bugs/oracles.py`) and each saying what it judged with.

- `DeathOracle`: the player died (under `--rules play` or `no-monsters`): where, and what most
  likely killed it (the engine's step says, `capture/level_play.py`).
- `HallOfMirrorsOracle`, from pixels: while the view turns, a solid, textured region of the screen
  stays exactly as it was in the frame before — the renderer drew nothing there (a wall without a
  texture, a gap in the map), so it smears the previous frame, on two turning steps in a row in
  overlapping places. Telemetry only says the view turned.
- `OutOfMapOracle`, by geometry: the player's position lies outside every sector of the level.
- `DoorOracle`, by geometry and telemetry: a door the player used, then walked into for a while
  after it should have opened, without ever getting into it.
- `SoftlockOracle` (`playtester/bugs/softlock.py`), by geometry and telemetry: the player can no
  longer get back to the start nor reach an exit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from playtester.bugs.oracles import Finding


class DeathOracle:
    """Each death is a finding with its place and its likely cause; the level starts again."""

    name = "death"

    def reset(self) -> None:
        pass

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        death = info.get("death")
        if not death:
            return []
        position = death.get("position")
        where = f" at ({position[0]:.0f}, {position[1]:.0f})" if position else ""
        return [Finding("death", f"the player died{where}: {death['cause']}; the level started again", episode, step,
                        {"position": list(position) if position else None, "cause": death["cause"]})]


class HallOfMirrorsOracle:
    """A screen region that smears the previous frame while the view turns; see the module's docstring."""

    name = "hall_of_mirrors"

    def __init__(self, min_area: float = 0.006, min_turn: float = 10.0, patience: int = 2, min_fill: float = 0.5,
                 min_texture: float = 8.0) -> None:
        self.min_area = min_area
        """Smallest region, as a share of the screen."""
        self.min_turn = min_turn
        """Degrees the view must turn between two frames (moving straight on, the sky stays put; the
        first step of a turn turns 7°, and close walls' wide texels match by chance)."""
        self.patience = patience
        """Turning steps in a row that must show such a region, each overlapping the step before's."""
        self.min_fill, self.min_texture = min_fill, min_texture
        self.reset()

    def reset(self) -> None:
        self._last: tuple[np.ndarray, float, float] | None = None
        self._streak = 0
        self._regions: list[tuple[int, int, int, int]] = []
        self._reported = False

    def stale_regions(self, frame: np.ndarray, previous: np.ndarray, turn: float = 0.0) -> list[tuple[int, int, int, int]]:
        """Boxes `[x0, y0, x1, y1]` of solid, textured regions identical in both frames where the
        view, turned by `turn` degrees, should have moved them: a region that also matches the
        previous frame turned by as much (a wall seen from so close that its texels are wider than
        the turn) is drawn right, and left out."""
        import cv2

        same = np.all(frame == previous, axis=-1).astype(np.uint8)
        same = cv2.morphologyEx(same, cv2.MORPH_OPEN, np.ones((7, 7), np.uint8))
        n, labels, stats, _ = cv2.connectedComponentsWithStats(same, connectivity=4)
        h, w = same.shape
        gray = frame.mean(axis=-1)
        out = []
        for i in range(1, n):
            x, y, bw, bh, area = (int(v) for v in stats[i])
            if area < self.min_area * h * w or area < self.min_fill * bw * bh:
                continue
            if float(gray[labels == i].std()) < self.min_texture:  # a flat dark patch stays the same legitimately
                continue
            if turn and _turned_difference(frame, previous, (x, y, x + bw, y + bh), turn) < self.min_texture:
                continue
            out.append((x, y, x + bw, y + bh))
        return out

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        last, self._last = self._last, (frame.copy(), float(info.get("angle", 0.0)), float(info.get("pitch", 0.0)))
        if last is None or self._reported or "angle" not in info or info.get("restarted"):
            return []
        from playtester.capture.doom import wrap_angle

        turn = max(abs(wrap_angle(float(info["angle"]) - last[1])), abs(float(info.get("pitch", 0.0)) - last[2]))
        if turn < self.min_turn:
            return []
        yaw = abs(wrap_angle(float(info["angle"]) - last[1]))
        regions = self.stale_regions(frame, last[0], yaw if yaw >= self.min_turn else 0.0)
        if self._streak and regions:  # a hall of mirrors stays where it was; a close wall's texels matching by chance move on
            regions = [b for b in regions if any(_overlap(b, p) for p in self._regions)]
        self._regions = regions
        self._streak = self._streak + 1 if regions else 0
        if self._streak < self.patience:
            return []
        self._reported = True
        box = max(regions, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
        share = (box[2] - box[0]) * (box[3] - box[1]) / (frame.shape[0] * frame.shape[1])
        position = info.get("position")
        return [Finding("hall_of_mirrors", f"a hall of mirrors: a region of {share:.1%} of the screen kept the previous "
                        f"frame while the view turned {turn:.0f}° ({self._streak} steps in a row): a missing texture or a "
                        "gap in the map", episode, step,
                        {"box": list(box), "share": share, "position": list(position) if position else None,
                         "angle": info.get("angle"), "judged_by": "pixels (the view's turn from telemetry)"})]


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether two boxes `[x0, y0, x1, y1]` share pixels."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _turned_difference(frame: np.ndarray, previous: np.ndarray, box: tuple[int, int, int, int], turn: float,
                       hfov: float = 90.0) -> float:
    """Mean absolute difference (grey levels) between a region of `frame` and where the same view
    directions were in `previous`, the view turned by `turn` degrees either way (the smaller)."""
    import math

    h, w = frame.shape[:2]
    focal = (w / 2) / math.tan(math.radians(hfov / 2))
    x0, y0, x1, y1 = box
    cols = np.arange(x0, x1)
    angles = np.arctan((cols + 0.5 - w / 2) / focal)
    now = frame[y0:y1, x0:x1].mean(axis=-1)
    best = float("inf")
    for sign in (1.0, -1.0):
        src = np.round(w / 2 + focal * np.tan(np.clip(angles + sign * math.radians(turn), -1.5, 1.5)) - 0.5).astype(int)
        ok = (src >= 0) & (src < w)
        if ok.sum() < max(2, len(cols) // 3):
            continue
        before = previous[y0:y1][:, src[ok]].mean(axis=-1)
        best = min(best, float(np.abs(now[:, ok] - before).mean()))
    return best if best != float("inf") else 0.0


class OutOfMapOracle:
    """The player's position outside every sector of the level (its geometry read from the WAD)."""

    name = "out_of_map"

    def __init__(self, graph) -> None:
        self.graph = graph
        self.reset()

    def reset(self) -> None:
        self._reported = False

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        position = info.get("position")
        if self._reported or position is None or self.graph.near_sector(position[0], position[1], slack=2):
            return []
        self._reported = True
        return [Finding("out_of_map", f"the player is outside every sector of the map at ({position[0]:.0f}, "
                        f"{position[1]:.0f}): out of the level", episode, step,
                        {"position": list(position), "judged_by": "the level's geometry and telemetry"})]


class DoorOracle:
    """A door used and then walked into, after it should have opened, without getting in."""

    name = "door"

    def __init__(self, graph, forward: int | None, opens_within: int = 10, watch: int = 40, pushes: int = 4) -> None:
        self.graph = graph
        self.forward = forward
        """The key map's forward action (None: no way to walk into a door, the oracle stays quiet)."""
        self.opens_within, self.watch, self.pushes = opens_within, watch, pushes
        self.reset()

    def reset(self) -> None:
        self._pressed: dict[int, dict[str, Any]] = {}
        self._entered: set[int] = set()
        self._reported: set[int] = set()
        self._last: tuple[float, float] | None = None

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        position = info.get("position")
        if position is None:
            return []
        x, y = float(position[0]), float(position[1])
        here = self.graph.sector_at(x, y)
        if here is not None:
            self._entered.add(here)
        used = info.get("used")
        if used and used["kind"] == "door" and not used.get("key"):
            line = self.graph.level.linedefs[used["line"]]
            door = used["sectors"][0] if used["sectors"] else line.back
            if door in self._pressed:  # used again: a second press reverses a door, the watch says nothing
                del self._pressed[door]
            elif door is not None and door not in self._entered:
                self._pressed[door] = {"line": used["line"], "step": step, "pushes": 0}
        moved = self._last is None or np.hypot(x - self._last[0], y - self._last[1]) >= 4.0
        self._last = (x, y)
        out = []
        for door, press in list(self._pressed.items()):
            if door in self._entered:
                del self._pressed[door]
                continue
            since = step - press["step"]
            if since > self.watch:
                del self._pressed[door]
                continue
            if since >= self.opens_within and action == self.forward and not moved and self._facing(press["line"], x, y, info):
                press["pushes"] += 1
            if press["pushes"] >= self.pushes and door not in self._reported:
                self._reported.add(door)
                del self._pressed[door]
                out.append(Finding("door", f"a door (sector {door}, line {press['line']}) did not open when used: used at step "
                                   f"{press['step']}, then walked into {self.pushes} times from {self.opens_within} steps on "
                                   "without getting in", episode, step,
                                   {"sector": door, "line": press["line"], "used_at": press["step"], "position": list(position),
                                    "judged_by": "the level's geometry and telemetry"}))
        return out

    def _facing(self, line: int, x: float, y: float, info: dict[str, Any]) -> bool:
        """Within 48 units of the line, looking at it within 45°."""
        import math

        x1, y1, x2, y2 = self.graph.line_ends[line]
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1.0
        u = max(0.0, min(1.0, ((x - x1) * dx + (y - y1) * dy) / length**2))
        cx, cy = x1 + u * dx, y1 + u * dy
        if math.hypot(cx - x, cy - y) > 48.0:
            return False
        from playtester.capture.doom import wrap_angle

        return abs(wrap_angle(math.degrees(math.atan2(cy - y, cx - x)) - float(info.get("angle", 0.0)))) < 45.0


def level_oracles(game: str, keymap=None, graph=None) -> list[Any]:
    """The level oracles for a game spec: none unless it is a Doom level whose geometry can be read."""
    from playtester.capture.rules import is_level
    from playtester.errors import UserError

    if not is_level(game):
        return []
    oracles: list[Any] = [DeathOracle(), HallOfMirrorsOracle()]
    if graph is None:
        try:
            from playtester.capture.level_graph import LevelGraph
            from playtester.capture.games import level_of_game

            graph = LevelGraph(level_of_game(game))
        except UserError:
            return oracles
    forward = keymap.index("forward") if keymap is not None and "forward" in keymap.names else None
    oracles += [OutOfMapOracle(graph), DoorOracle(graph, forward)]
    from playtester.bugs.softlock import softlock_oracle

    softlock = softlock_oracle(graph, keymap)
    return oracles + ([softlock] if softlock is not None else [])
