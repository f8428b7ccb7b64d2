"""Getting to a node's target: by telemetry when the game reports positions, else by sight.

- `TelemetryNavigator` walks to a map position: along the park's cell route (around lakes and
  invisible walls) when the ground truth is known, straight otherwise; turns, then walks, as the
  scripted experts do; side-steps when it stops moving.
- `SightNavigator` walks to a detected object: turns to keep its box centred and walks while it
  grows; when the object is not in view it searches (a full turn on the spot, then a stretch of
  wandering with the path policy or at random) and looks again.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from playtester.capture.doom import wrap_angle
from playtester.capture.experts import bearing
from playtester.capture.keymap import KeyMap

MOVES = ("forward", "backward", "strafe_left", "strafe_right", "turn_left", "turn_right", "look_up", "look_down")
MOVEMENT_KEYS = frozenset({"w", "a", "s", "d", "left", "right", "up", "down"})
"""Keys that only move the player or the camera: anything else is an action worth validating."""


def is_movement(keymap: KeyMap, action: int) -> bool:
    keys = keymap.keys_for(action)
    return bool(keys) and set(keys) <= MOVEMENT_KEYS


class Moves:
    """The key map's movement actions by name (None where the map lacks one)."""

    def __init__(self, keymap: KeyMap) -> None:
        for name in MOVES:
            setattr(self, name, keymap.index(name) if name in keymap.names else None)
        self.idle = [i for i, a in enumerate(keymap.actions) if not a.keys]
        if not self.idle and self.turn_left is not None and self.turn_right is not None:
            self.idle = [self.turn_left, self.turn_right]  # net still: a left then a right turn

    def missing(self) -> list[str]:
        """Movement actions navigation cannot do without."""
        return [n for n in ("forward", "turn_left", "turn_right") if getattr(self, n) is None]


def level_pitch(moves: Moves, info: dict[str, Any]) -> int | None:
    """Look back to the horizon after a glance (or a jump) tilted the view."""
    pitch = float(info.get("pitch", 0.0))
    if abs(pitch) > 6.0:
        return moves.look_down if pitch < 0 else moves.look_up
    return None


def turn_toward(moves: Moves, angle: float, heading: float, tolerance: float = 15.0) -> int | None:
    """A turn toward `heading` (degrees), or None when already facing it."""
    err = wrap_angle(heading - angle)
    if abs(err) <= tolerance:
        return None
    return moves.turn_left if err > 0 else moves.turn_right


@dataclass
class Unstick:
    """Notices when walking stops moving the player and plans a few side-steps."""

    moves: Moves
    rng: np.random.Generator
    window: int = 8
    min_travel: float = 6.0

    def __post_init__(self) -> None:
        self.recent: deque[tuple[float, float]] = deque(maxlen=self.window)
        self.plan: list[int] = []

    def check(self, x: float, y: float) -> int | None:
        self.recent.append((x, y))
        if self.plan:
            return self.plan.pop()
        if len(self.recent) == self.window:
            (x0, y0) = self.recent[0]
            if math.hypot(x - x0, y - y0) < self.min_travel:
                side = [m for m in (self.moves.strafe_left, self.moves.strafe_right, self.moves.backward) if m is not None]
                if side:
                    self.plan = [int(self.rng.choice(side))] * 4
                    self.recent.clear()
                    return self.plan.pop()
        return None


class TelemetryNavigator:
    """Walks to a map position (within `tolerance`) from `position` and `angle` telemetry."""

    def __init__(self, moves: Moves, goal: tuple[float, float], tolerance: float, rng: np.random.Generator,
                 layout: Any = None) -> None:
        self.moves = moves
        self.goal = goal
        self.tolerance = tolerance
        self.layout = layout
        self.unstick = Unstick(moves, rng)
        self.route: list[tuple[int, int]] | None = None

    def distance(self, info: dict[str, Any]) -> float:
        x, y = info["position"][0], info["position"][1]
        return math.hypot(self.goal[0] - x, self.goal[1] - y)

    def _waypoint(self, x: float, y: float) -> tuple[float, float]:
        if self.layout is None:
            return self.goal
        here = self.layout.cell_of(x, y)
        if self.route is None:
            self.route = self.layout.route(here, self.layout.cell_of(*self.goal)) or []
        while self.route and (self.route[0] == here or math.hypot(*np.subtract(self.layout.centre(*self.route[0]), (x, y))) < 40):
            self.route.pop(0)
        if len(self.route) <= 1:
            return self.goal
        return self.layout.centre(*self.route[0])

    def act(self, info: dict[str, Any]) -> int | None:
        """The next action, or None once within tolerance."""
        if self.distance(info) <= self.tolerance:
            return None
        x, y = info["position"][0], info["position"][1]
        side = self.unstick.check(x, y)
        if side is not None:
            self.route = None  # replan from wherever the side-steps lead
            return side
        tilt = level_pitch(self.moves, info)
        if tilt is not None:
            return tilt
        wx, wy = self._waypoint(x, y)
        turn = turn_toward(self.moves, float(info["angle"]), bearing(x, y, wx, wy))
        return self.moves.forward if turn is None else turn


Detection = dict[str, Any]


class SightNavigator:
    """Walks to the object `match` picks out of the detections, keeping its box centred."""

    def __init__(self, moves: Moves, match: Callable[[Detection], bool], view: float, rng: np.random.Generator,
                 search: Callable[[np.ndarray], int] | None = None, turn_steps: int = 32, wander_steps: int = 24) -> None:
        self.moves = moves
        self.match = match
        self.view = view
        self.rng = rng
        self.search = search
        self.turn_steps = turn_steps
        self.wander_steps = wander_steps
        self.phase = 0
        """Steps into the current search cycle (a full turn, then wandering)."""
        self.heights: deque[float] = deque(maxlen=10)
        self.seen = False
        self.lost = 0

    def best(self, detections: list[Detection]) -> Detection | None:
        found = [d for d in detections if self.match(d)]
        return max(found, key=lambda d: d["box"][3] - d["box"][1]) if found else None

    def act(self, frame: np.ndarray, info: dict[str, Any], detections: list[Detection]) -> int | None:
        """The next action, or None once the target fills `view` of the frame height, centred."""
        h_img, w_img = frame.shape[:2]
        target = self.best(detections)
        if target is None:
            self.lost += 1
            if self.seen and self.lost <= 3:
                return self.moves.forward  # a box flickers out for a step or two
            return self._search(frame)
        self.seen, self.lost, self.phase = True, 0, 0
        x0, y0, x1, y1 = target["box"]
        offset = (x0 + x1) / 2 / w_img - 0.5
        height = (y1 - y0) / h_img
        if height >= self.view and abs(offset) < 0.2:
            return None
        tilt = level_pitch(self.moves, info)
        if tilt is not None:
            return tilt
        if abs(offset) > 0.1:
            return self.moves.turn_right if offset > 0 else self.moves.turn_left
        self.heights.append(height)
        if len(self.heights) == self.heights.maxlen and self.heights[-1] <= self.heights[0] + 0.005:
            self.heights.clear()  # walking does not bring it closer: step aside once
            side = [m for m in (self.moves.strafe_left, self.moves.strafe_right) if m is not None]
            if side:
                return int(self.rng.choice(side))
        return self.moves.forward

    def _search(self, frame: np.ndarray) -> int:
        self.phase = (self.phase + 1) % (self.turn_steps + self.wander_steps)
        if self.phase < self.turn_steps:
            return self.moves.turn_left
        if self.search is not None:
            return self.search(frame)
        if self.rng.random() < 0.2:
            return self.moves.turn_left if self.rng.random() < 0.5 else self.moves.turn_right
        return self.moves.forward
