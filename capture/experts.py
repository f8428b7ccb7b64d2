"""Scripted experts: stand-ins for human testers on the park, playing from telemetry.

- `PathFollower` walks the pathway network from junction to junction (the golden path).
- `Inspector` walks up to an OOI and circles it 360° keeping it in view (texture testing).

Both choose among the key map's own actions (by name, so any map with the default names works)
and add a little human-like jitter, so that demos show every action and the inverse-dynamics
encoder has something to learn. They write ordinary demo episodes; a jittered step carries the
action meant as its `label`, which the policy learns instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from playtester.capture.doom import wrap_angle
from playtester.errors import UserError
from playtester.capture.keymap import KeyMap
from playtester.capture.park.layout import OOI, ParkLayout

REQUIRED_ACTIONS = ("forward", "backward", "strafe_left", "strafe_right", "turn_left", "turn_right", "look_up", "look_down", "jump")


class _Actions:
    def __init__(self, keymap: KeyMap) -> None:
        missing = [n for n in REQUIRED_ACTIONS if n not in keymap.names]
        if missing:
            raise UserError(f"key map {keymap.name!r}: the scripted experts need actions named {', '.join(missing)}")
        for n in REQUIRED_ACTIONS:
            setattr(self, n, keymap.index(n))
        self.n = keymap.n


def bearing(x0: float, y0: float, x1: float, y1: float) -> float:
    """Degrees counter-clockwise from east of the direction from (x0, y0) to (x1, y1)."""
    return math.degrees(math.atan2(y1 - y0, x1 - x0)) % 360.0


def cells_apart(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Chebyshev distance between two cells: 1 for neighbours, diagonal ones included."""
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]))


@dataclass
class _Steering:
    """Turn toward a heading, then walk; shared by both experts."""

    actions: _Actions
    rng: np.random.Generator
    jitter: float
    turn_tolerance: float = 18.0

    meant: int | None = None
    """After a jittered step, the action the expert meant to take (else None)."""

    def toward(self, info: dict[str, Any], heading: float, *, walk: int | None = None) -> int:
        pitch = float(info.get("pitch", 0.0))
        if abs(pitch) > 6.0:  # look back to the horizon after a glance up or down
            return self.actions.look_down if pitch < 0 else self.actions.look_up
        err = wrap_angle(heading - float(info["angle"]))
        if abs(err) > self.turn_tolerance:
            meant = self.actions.turn_left if err > 0 else self.actions.turn_right
        else:
            meant = self.actions.forward if walk is None else walk
        if self.rng.random() < self.jitter:
            self.meant = meant
            return int(self.rng.choice([self.actions.look_up, self.actions.look_down, self.actions.jump,
                                         self.actions.strafe_left, self.actions.strafe_right]))
        return meant


class _Expert:
    """What both experts share: `act` gives the action taken, jitter included; `intended` then
    holds the action meant (the same one unless the step was jitter). Demos execute the first and
    label the step with the second, so that a cloned policy learns the look back after a glance
    but not the glance itself (noise injection, as in DART)."""

    steer: _Steering
    intended: int = -1

    def act(self, info: dict[str, Any]) -> int:
        self.steer.meant = None
        action = self._choose(info)
        self.intended = action if self.steer.meant is None else self.steer.meant
        return action

    def _choose(self, info: dict[str, Any]) -> int:
        raise NotImplementedError


class PathFollower(_Expert):
    """Walks the pathway network: picks a far junction, follows the pathway cells to it, repeats.

    With `goals` (pathway cells, (col, row)) it walks to each of them in turn first, every episode,
    then on as before: a player sent to given places (the load benchmark sends it into the slow
    groves, to show they can be reached and measured)."""

    behavior = "path"

    def __init__(self, layout: ParkLayout, keymap: KeyMap, rng: np.random.Generator, jitter: float = 0.06,
                 goals: Sequence[tuple[int, int]] = ()) -> None:
        mask = layout.pathway_mask
        for c, r in goals:
            if not (0 <= r < mask.shape[0] and 0 <= c < mask.shape[1] and mask[r, c]):
                raise UserError(f"path follower: goal cell {(c, r)} is not a pathway cell of this park; give pathway cells")
        self.layout = layout
        self.goals = [tuple(g) for g in goals]
        self._pending: list[tuple[int, int]] = []
        self.actions = _Actions(keymap)
        self.rng = rng
        self.steer = _Steering(self.actions, rng, jitter)
        self.route: list[tuple[int, int]] = []
        self.done = False
        self._stuck_since: tuple[float, float, int] | None = None

    def reset(self, info: dict[str, Any]) -> None:
        self.route = []
        self.done = False
        self._pending = list(self.goals)

    def _plan(self, x: float, y: float) -> None:
        here = self.layout.cell_of(x, y)
        mask = self.layout.pathway_mask
        if not mask[here[1], here[0]]:  # first get onto the network, at its nearest cell on foot
            self.route = self.layout.route_to_nearest(here, mask) or []
            return
        while self._pending:  # a goal stays until the player has stood in it (a stuck spell replans to it)
            route = self.layout.route(here, self._pending[0], only=mask)
            if route and len(route) > 1:
                self.route = route
                return
            self._pending.pop(0)  # reached, or not reachable from here
        cells = [tuple(int(v) for v in c[::-1]) for c in np.argwhere(mask)]
        far = [c for c in cells if abs(c[0] - here[0]) + abs(c[1] - here[1]) >= 8] or cells
        for _ in range(10):
            goal = far[int(self.rng.integers(len(far)))]
            route = self.layout.route(here, goal, only=mask)
            if route and len(route) > 1:
                self.route = route
                return
        self.route = []

    def _choose(self, info: dict[str, Any]) -> int:
        x, y, _ = info["position"]
        if self._is_stuck(x, y):
            self.route = []
            return int(self.rng.choice([self.actions.strafe_left, self.actions.strafe_right, self.actions.backward]))
        here = self.layout.cell_of(x, y)
        if self.route and cells_apart(here, self.route[0]) > 1:
            self._rejoin(here)
        while self.route:
            cx, cy = self.layout.centre(*self.route[0])
            if math.hypot(cx - x, cy - y) < 48.0 or (len(self.route) > 1 and self._passed(x, y)):
                self.route.pop(0)
            else:
                break
        if not self.route:
            self._plan(x, y)
            if not self.route:
                return self.actions.turn_left
        cx, cy = self.layout.centre(*self.route[0])
        return self.steer.toward(info, bearing(x, y, cx, cy))

    def _rejoin(self, here: tuple[int, int]) -> None:
        """Off the route (another player drove, or a push): back to the nearest pathway cell,
        then along the network to the same goal. What DAgger labels ask of the expert."""
        goal = self.route[-1]
        mask = self.layout.pathway_mask
        back = [here] if mask[here[1], here[0]] else self.layout.route_to_nearest(here, mask)
        onward = self.layout.route(back[-1], goal, only=mask) if back else None
        self.route = back + onward[1:] if onward else (back or [])

    def _passed(self, x: float, y: float) -> bool:
        """Whether the player is already in the cell after the next waypoint."""
        return self.layout.cell_of(x, y) == self.route[1]

    def _is_stuck(self, x: float, y: float) -> bool:
        if self._stuck_since is None or math.hypot(x - self._stuck_since[0], y - self._stuck_since[1]) > 16:
            self._stuck_since = (x, y, 0)
            return False
        sx, sy, n = self._stuck_since
        self._stuck_since = (sx, sy, n + 1)
        return n + 1 >= 12

    def annotations(self, info: dict[str, Any]) -> dict[str, Any]:
        x, y, _ = info["position"]
        return {"on_path": self.layout.on_pathway(x, y)}


@dataclass
class CircleProgress:
    """How far the player has gone around an OOI: the unwrapped sweep of its bearing."""

    ooi: OOI
    swept: float = 0.0
    _last: float | None = None
    steps_on_screen: int = 0
    steps: int = 0
    history: list[float] = field(default_factory=list)

    def update(self, x: float, y: float, on_screen: bool) -> None:
        b = bearing(self.ooi.x, self.ooi.y, x, y)
        if self._last is not None:
            self.swept += wrap_angle(b - self._last)
        self._last = b
        self.steps += 1
        self.steps_on_screen += int(on_screen)
        self.history.append(self.swept)

    @property
    def degrees(self) -> float:
        return abs(self.swept)


def ooi_on_screen(info: dict[str, Any], ooi_id: int) -> dict[str, Any] | None:
    """The `objects` entry of an OOI when it is on screen."""
    for obj in info.get("objects", ()):
        if obj.get("ooi") == ooi_id:
            return obj
    return None


class Inspector(_Expert):
    """Walks to an OOI, then circles it 360° at `radius`, keeping it centred on screen.

    The approach goes straight at the object, facing it, wherever the straight line can be walked;
    only where water or an invisible wall is in the way does it follow a route of cells."""

    behavior = "inspect"

    def __init__(
        self, layout: ParkLayout, keymap: KeyMap, rng: np.random.Generator, ooi: OOI,
        radius: float = 120.0, jitter: float = 0.03, target_degrees: float = 370.0,
    ) -> None:
        self.layout = layout
        self.actions = _Actions(keymap)
        self.rng = rng
        self.ooi = ooi
        self.radius = radius
        self.target_degrees = target_degrees
        self.steer = _Steering(self.actions, rng, jitter, turn_tolerance=12.0)
        self.progress = CircleProgress(ooi)
        self.circling = False
        self.done = False
        self.route: list[tuple[int, int]] = []

    def reset(self, info: dict[str, Any]) -> None:
        self.progress = CircleProgress(self.ooi)
        self.circling = False
        self.done = False
        self.route = []  # planned at the first step that needs it (most walk straight at the object)

    def _approach_cell(self, x: float, y: float) -> tuple[int, int] | None:
        col, row = self.layout.cell_of(self.ooi.x, self.ooi.y)
        options = [c for c in self.layout.neighbours(col, row)]
        if not options:
            return None
        return min(options, key=lambda c: math.hypot(self.layout.centre(*c)[0] - x, self.layout.centre(*c)[1] - y))

    def _choose(self, info: dict[str, Any]) -> int:
        x, y, _ = info["position"]
        dist = math.hypot(self.ooi.x - x, self.ooi.y - y)
        to_ooi = bearing(x, y, self.ooi.x, self.ooi.y)
        if not self.circling and dist <= self.radius + 48:
            self.circling = True
        if self.circling:
            self.progress.update(x, y, ooi_on_screen(info, self.ooi.id) is not None)
            if self.progress.degrees >= self.target_degrees:
                self.done = True
            err = wrap_angle(to_ooi - float(info["angle"]))
            if abs(err) > 12.0:
                return self.actions.turn_left if err > 0 else self.actions.turn_right
            if dist > self.radius + 32:
                return self.actions.forward
            if dist < self.radius - 32:
                return self.actions.backward
            return self.steer.toward(info, to_ooi, walk=self.actions.strafe_right)
        if self.layout.straight_walk(x, y, self.ooi.x, self.ooi.y):
            # a tester walks up to the object looking at it; the route is for when the way is blocked,
            # and a route from cell centre to cell centre turns the object off screen for no visible reason
            self.route = []
            return self.steer.toward(info, to_ooi)
        here = self.layout.cell_of(x, y)
        if not self.route or cells_apart(here, self.route[0]) > 1:  # no route yet, or pushed off it: plan again
            goal = self._approach_cell(x, y)
            self.route = (self.layout.route(here, goal) or []) if goal else []
        while self.route and here == self.route[0]:
            self.route.pop(0)
        if self.route:
            cx, cy = self.layout.centre(*self.route[0])
            return self.steer.toward(info, bearing(x, y, cx, cy))
        return self.steer.toward(info, to_ooi)

    def annotations(self, info: dict[str, Any]) -> dict[str, Any]:
        obj = ooi_on_screen(info, self.ooi.id)
        return {"target_ooi": self.ooi.id, "test_box": obj["box"] if obj else None, "circling": self.circling}


def inspect_start(layout: ParkLayout, ooi: OOI, rng: np.random.Generator, *, facing_spread: float = 45.0) -> tuple[float, float, float]:
    """A start 2–3 cells from an OOI, on walkable ground from which the OOI can be reached, roughly facing it."""
    col, row = layout.cell_of(ooi.x, ooi.y)
    reach = layout.reachable_from(next(iter(layout.neighbours(col, row))))
    cells = [
        (c, r) for r in range(max(0, row - 3), min(layout.config.rows, row + 4))
        for c in range(max(0, col - 3), min(layout.config.cols, col + 4))
        if 2 <= max(abs(c - col), abs(r - row)) <= 3 and reach[r, c]
    ]
    if not cells:
        raise UserError(f"OOI {ooi.id}: no walkable start near it")
    c, r = cells[int(rng.integers(len(cells)))]
    x, y = layout.centre(c, r)
    angle = bearing(x, y, ooi.x, ooi.y) + float(rng.uniform(-facing_spread, facing_spread))
    return x, y, angle % 360.0
