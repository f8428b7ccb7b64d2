"""What the game's own labels say of a run's tests: scoring only.

`TesterEnv` picks its targets and runs its tests from pixels alone. Where the game labels what is
on screen (`info["objects"]`: the park, Doom levels), each test is then scored by those labels and
the test's telemetry, and the verdict is written beside it in `tests.jsonl`; nothing here is
read back by the tester.

- `matched` or `phantom`: at the test's start, did an object of the detector's classes stand in
  the tested box (its label box and the box overlap by IoU ≥ `MATCH_IOU`, the AP50 criterion)?
  A matched test names the object it was of (`target_ooi`): the park's OOI id, a Doom level's
  thing index (the known thing of its kind nearest the label), else the engine's object id. A
  phantom test whose box shows a labelled thing of another kind says which (`shows`: a medikit
  taken for a health bonus is a real object, just not one the detector was trained to find).
- Why a test of a real object failed (`failure`), from the test's steps, the first that holds:
  `blocked`: the player moved less than `STILL` map units on at least half of the steps whose
  action is a move (forward, backward, a strafe); `turned away`: the object was off the screen
  (no label of it) on at least half of the steps; `object lost`: on screen, but the tester had no
  box on it (neither the detector's nor the tracker's overlapping its label) on at least half of
  the steps; `other`: it kept the object in view and boxed, and moved, yet acted unlike the
  expert (JSD over the threshold).

A game without labels gets no verdict (None): its tests are neither matched nor phantom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from playtester.tester.identity import iou

MATCH_IOU = 0.5
"""Overlap of the tested box and a label box from which the test is of that object."""
STILL = 1.0
"""Map units: a move step that moved the player less than this went nowhere."""
MOVES = ("forward", "backward", "strafe_left", "strafe_right")
"""The key map's actions that move the player (blocked is judged on these)."""
FAILURES = ("blocked", "turned away", "object lost", "other")


def _near_known(label: dict[str, Any], known: Sequence[Any], reach: float = 16.0) -> Any:
    """The id of the known object of the label's kind nearest the label's position, within `reach`."""
    pos = label.get("position")
    if pos is None:
        return None
    best, best_d = None, reach
    for o in known:
        if o.kind != label["class"]:
            continue
        d = math.hypot(o.x - pos[0], o.y - pos[1])
        if d <= best_d:
            best, best_d = o.id, d
    return best


def object_key(label: dict[str, Any], known: Sequence[Any] = ()) -> Any:
    """How a labelled object is named in a run: the park's OOI id, a known object's id, else the engine's id."""
    if label.get("ooi") is not None:
        return label["ooi"]
    near = _near_known(label, known)
    return near if near is not None else f"{label['class']}#{label.get('id')}"


def labelled(info: dict[str, Any], classes: Sequence[str] | None) -> list[dict[str, Any]] | None:
    """The engine's labelled objects of `classes` (all when None); None where the game labels nothing."""
    if "objects" not in info:
        return None
    return [o for o in info["objects"] if classes is None or o["class"] in classes]


def real_object(box: Sequence[float], objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The labelled object the box shows (the one it overlaps most, at IoU ≥ `MATCH_IOU`), or None."""
    best, best_iou = None, MATCH_IOU
    for o in objects:
        v = iou(box, o["box"])
        if v >= best_iou:
            best, best_iou = o, v
    return best


@dataclass
class TestWitness:
    """Watches one test's steps through the labels and telemetry, to say afterwards why it failed."""

    __test__ = False

    target: Any
    """The key of the labelled object under test (`object_key`)."""
    known: Sequence[Any] = ()
    move_actions: frozenset[int] = frozenset()
    steps: int = 0
    moves: int = 0
    stuck: int = 0
    away: int = 0
    unboxed: int = 0
    _position: tuple[float, float] | None = field(default=None, repr=False)

    def start(self, info: dict[str, Any]) -> None:
        self._position = _xy(info)

    def step(self, action: int, info: dict[str, Any], box: Sequence[float] | None) -> None:
        self.steps += 1
        here = _xy(info)
        if action in self.move_actions and here is not None and self._position is not None:
            self.moves += 1
            self.stuck += math.hypot(here[0] - self._position[0], here[1] - self._position[1]) < STILL
        self._position = here
        mine = [o for o in info.get("objects", ()) if object_key(o, self.known) == self.target]
        if not mine:
            self.away += 1
        elif box is None or max(iou(box, o["box"]) for o in mine) <= 0.0:
            self.unboxed += 1

    def failure(self) -> str:
        """Why the test failed (see the module's docstring)."""
        if self.moves and self.stuck >= self.moves / 2:
            return "blocked"
        if self.steps and self.away >= self.steps / 2:
            return "turned away"
        if self.steps and self.unboxed >= (self.steps - self.away) / 2 and self.unboxed:
            return "object lost"
        return "other"


def _xy(info: dict[str, Any]) -> tuple[float, float] | None:
    p = info.get("position")
    return None if p is None else (float(p[0]), float(p[1]))


def move_actions(env: Any) -> frozenset[int]:
    """The indices of a game's move actions, by its key map's names; empty without a key map."""
    keymap = getattr(getattr(env, "unwrapped", env), "keymap", None)
    names = getattr(keymap, "names", None) or []
    return frozenset(i for i, name in enumerate(names) if name in MOVES)
