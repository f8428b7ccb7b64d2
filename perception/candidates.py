"""Confirming detections across frames before anything is done with them.

In free play the detector fires on scenery: a tire in a bush, a pillar in a tree trunk. Most of
those boxes come and go from one frame to the next, while a real object, seen from a moving
player, is found again where it should be. `ConfirmTracker` follows the detections from one
detector pass to the next and says which are confirmed: found in at least `hits` of the last
`window` passes, each time of the same class, near where the last box was and of a similar size.

The tester loop runs its detector every few steps; while a candidate waits for confirmation it
runs it on every step (`playtester.tester.loop`), so a view that turns moves a box by less than
its height between two passes. Taking the turn's known shift off the boxes changed nothing on
free-play walks of the park (docs/benchmarks/real-tests.md), so none is taken.

Boxes are `[x0, y0, x1, y1]` pixels, as the detector gives them. Only pixels and the player's own
actions go in: nothing here reads the game's labels.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

Box = Sequence[float]

CONFIRM_HITS, CONFIRM_WINDOW = 4, 4
"""The tester's k of n, chosen on the cpu park by test precision against real OOIs tested
(docs/benchmarks/real-tests.md)."""


@dataclass(frozen=True)
class ConfirmConfig:
    hits: int = CONFIRM_HITS
    """k: passes (of the last `window`) a candidate must be found in to be confirmed; 1 confirms
    every detection at once (no confirmation)."""
    window: int = CONFIRM_WINDOW
    """n: the passes counted."""
    reach: float = 1.0
    """How far a box's centre may move from one pass to the next, in heights of the last box (the
    height: a box's width changes with the side it shows)."""
    size_ratio: float = 1.6
    """How much a box's height may change from one pass to the next (either way)."""

    def __post_init__(self) -> None:
        if not 1 <= self.hits <= self.window:
            raise ValueError(f"confirmation {self.hits} of {self.window}: hits must be between 1 and the window")
        if self.reach <= 0 or self.size_ratio < 1:
            raise ValueError(f"confirmation reach {self.reach} must be above 0 and size ratio {self.size_ratio} at least 1")


@dataclass
class Candidate:
    """One object followed from pass to pass."""

    id: int
    kind: str
    box: list[float]
    """Its last box."""
    score: float
    """Its last score."""
    first_pass: int
    history: deque = field(default_factory=deque)
    """Found (True) or not in each pass since it was first seen, the last `window` only."""
    confirmed: bool = False
    """Confirmed once; stays so while it is followed."""
    passes: int = 0
    """Passes it has been followed (found or not)."""
    found: int = 0
    """Passes it was found in."""
    boxes: list = field(default_factory=list)
    """Every box it was found with, oldest first, with its pass and score: `(pass, box, score)`."""
    detection: dict[str, Any] | None = None
    """The detection that found it in the latest pass (None: not found in it)."""

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]


class ConfirmTracker:
    """`update(detections)` once a detector pass; see the module's docstring."""

    def __init__(self, config: ConfirmConfig | None = None) -> None:
        self.cfg = config or ConfirmConfig()
        self.candidates: list[Candidate] = []
        self.ended: list[Candidate] = []
        """Candidates dropped since the last `take_ended` (the caller logs the unconfirmed ones)."""
        self._next_id = 0
        self._pass = 0

    def reset(self) -> list[Candidate]:
        """Forget every candidate (a new episode); the ones followed until now end."""
        self.ended.extend(self.candidates)
        self.candidates = []
        return self.take_ended()

    def take_ended(self) -> list[Candidate]:
        ended, self.ended = self.ended, []
        return ended

    def match_cost(self, candidate: Candidate, box: Box) -> float | None:
        """How far `box` is from where `candidate` should be (in its heights), None if too far or
        of another size."""
        h = max(candidate.height, 1.0)
        bh = box[3] - box[1]
        if not (h / self.cfg.size_ratio <= bh <= h * self.cfg.size_ratio):
            return None
        p = candidate.box
        dx = (box[0] + box[2]) / 2 - (p[0] + p[2]) / 2
        dy = (box[1] + box[3]) / 2 - (p[1] + p[3]) / 2
        cost = (dx * dx + dy * dy) ** 0.5 / h
        return cost if cost <= self.cfg.reach else None

    def update(self, detections: Sequence[dict[str, Any]]) -> list[Candidate]:
        """Follow the candidates into this pass's `detections` (each with `box`, `class`, `score`).
        Returns the candidates found in this pass, each with its `detection`; the confirmed ones
        have `confirmed` set."""
        self._pass += 1
        pairs = []
        for ci, c in enumerate(self.candidates):
            for di, d in enumerate(detections):
                if d["class"] != c.kind:
                    continue
                cost = self.match_cost(c, d["box"])
                if cost is not None:
                    pairs.append((cost, ci, di))
        taken_c, taken_d = set(), set()
        for cost, ci, di in sorted(pairs):
            if ci in taken_c or di in taken_d:
                continue
            taken_c.add(ci)
            taken_d.add(di)
            self._found(self.candidates[ci], detections[di])
        kept = []
        for ci, c in enumerate(self.candidates):
            if ci not in taken_c:
                c.detection = None
                c.history.append(False)
                c.passes += 1
                self._trim(c)
            if self._alive(c):
                kept.append(c)
            else:
                self.ended.append(c)
        for di, d in enumerate(detections):
            if di not in taken_d:
                c = Candidate(self._next_id, d["class"], list(d["box"]), float(d["score"]), self._pass)
                self._next_id += 1
                self._found(c, d)
                kept.append(c)
        self.candidates = kept
        return [c for c in kept if c.detection is not None]

    def _found(self, c: Candidate, d: dict[str, Any]) -> None:
        c.detection = d
        c.box = [float(v) for v in d["box"]]
        c.score = float(d["score"])
        c.history.append(True)
        c.passes += 1
        c.found += 1
        c.boxes.append((self._pass, [round(v, 1) for v in c.box], round(c.score, 3)))
        self._trim(c)
        if sum(c.history) >= self.cfg.hits:
            c.confirmed = True

    def _trim(self, c: Candidate) -> None:
        while len(c.history) > self.cfg.window:
            c.history.popleft()

    def _alive(self, c: Candidate) -> bool:
        """Followed on while it can still be confirmed (or was): `window - hits + 1` passes in a
        row without it end it (for a confirmed one, `window` passes)."""
        misses = 0
        for found in reversed(c.history):
            if found:
                break
            misses += 1
        return misses < (self.cfg.window if c.confirmed else self.cfg.window - self.cfg.hits + 1)
