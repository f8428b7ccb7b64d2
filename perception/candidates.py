"""Confirming detections across frames before anything is done with them.

In free play the detector fires on scenery: a tire in a bush, a pillar in a tree trunk. Most of
those boxes come and go from one frame to the next, while a real object, seen from a moving
player, is found again where it should be. `ConfirmTracker` follows the detections from one
detector pass to the next and says which are confirmed: found in at least `hits` of the last
`window` passes, each time of the same class, near where the last box was and of a similar size;
one hit fewer will do while every box it was found with scored `sure` or above.

The tester loop runs its detector every few steps; while a candidate waits for confirmation it
runs it on every step (`playtester.tester.loop`). Even so a step can move the whole picture by
more than a small object's height: on a Doom level a look up or down moves it 38–41 px of 240, a
turn 21 px, a jump's landing as much, while a health bonus close enough to test is 28–50 px tall.
So each pass first measures how far the picture moved since the last pass (`view_shift`: the
peak of the two frames' phase correlation, from pixels alone, whatever the game and its controls)
and moves the candidates' boxes by as much before matching. On free-play walks of Freedoom 2 MAP02
a box found again in the next frame was matched to its candidate 88 times of 103 with the shift
taken off, 60 without (docs/benchmarks/real-tests.md).

Boxes are `[x0, y0, x1, y1]` pixels, as the detector gives them. Only pixels and the player's own
actions go in: nothing here reads the game's labels.

A detection held for every pass can still be scenery: pressed against a wall, the player sees one
texture fill the frame, drawn so large that each of its texels spans several pixels, and the
detector boxes a pale streak of it as a pillar for as long as the player stays there.
`texel_size` measures that magnification around a box; `close_surface` says when it is that of a
surface at arm's length rather than of an object at a distance close enough to test.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

Box = Sequence[float]

SHIFT_WIDTH = 320
"""Frames wider than this are shrunk to it before `view_shift` (0.7 ms a pair at 320 × 240)."""

CONFIRM_HITS, CONFIRM_WINDOW = 4, 4
"""The tester's k of n, chosen on the cpu park by test precision against real OOIs tested
(docs/benchmarks/real-tests.md)."""

CONFIRM_SURE = 0.9
"""A candidate whose every box in the window scored this or above needs one hit fewer, where the
run's detector was calibrated among background images (the tester loop decides): on Freedoom 2
MAP02 a pick-up found at 0.97–0.99 is walked over or out of view before its fourth pass; the
demo's park detector, trained on framed shots alone, boxes scenery on its park 30 times as often
as MAP02's vetted detector on its level, and with the rule its runs tested phantoms three times as
often (docs/benchmarks/real-tests.md)."""


@dataclass(frozen=True)
class ConfirmConfig:
    hits: int = CONFIRM_HITS
    """k: passes (of the last `window`) a candidate must be found in to be confirmed; 1 confirms
    every detection at once (no confirmation)."""
    window: int = CONFIRM_WINDOW
    """n: the passes counted."""
    sure: float | None = CONFIRM_SURE
    """A candidate every box of which in the window scored this or above is confirmed at `hits - 1`
    (None: never sooner)."""
    reach: float = 1.0
    """How far a box's centre may move from one pass to the next, in heights of the last box (the
    height: a box's width changes with the side it shows)."""
    size_ratio: float = 1.6
    """How much a box's height may change from one pass to the next (either way)."""

    def __post_init__(self) -> None:
        if not 1 <= self.hits <= self.window:
            raise ValueError(f"confirmation {self.hits} of {self.window}: hits must be between 1 and the window")
        if self.sure is not None and not 0 < self.sure <= 1:
            raise ValueError(f"confirmation sure score {self.sure} must be in (0, 1]")
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
        self._grey: tuple[np.ndarray, float] | None = None
        """The last pass's frame in grey (`shrunk_grey`), to measure the view's shift against."""

    def reset(self) -> list[Candidate]:
        """Forget every candidate (a new episode); the ones followed until now end."""
        self.ended.extend(self.candidates)
        self.candidates = []
        self._grey = None
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

    def update(self, detections: Sequence[dict[str, Any]], frame: np.ndarray | None = None,
               shift: tuple[float, float] | None = None) -> list[Candidate]:
        """Follow the candidates into this pass's `detections` (each with `box`, `class`, `score`),
        seen on `frame` (RGB): the candidates' boxes move first by how far the picture moved since
        the last pass's frame (`view_shift`), or by `shift` (x, y pixels) when given. Returns the
        candidates found in this pass, each with its `detection`; the confirmed ones have
        `confirmed` set."""
        self._pass += 1
        grey = None if frame is None else shrunk_grey(frame)
        if shift is None and grey is not None and self._grey is not None and self.candidates:
            shift = grey_shift(self._grey, grey)
        self._grey = grey
        if shift is not None and shift != (0.0, 0.0):
            dx, dy = shift
            for c in self.candidates:
                c.box = [c.box[0] + dx, c.box[1] + dy, c.box[2] + dx, c.box[3] + dy]
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
        if not c.confirmed and sum(c.history) >= self.needed(c):
            c.confirmed = True

    def needed(self, c: Candidate) -> int:
        """The hits `c` needs in the window: one fewer while every box it was found with in the
        window scored `sure` or above."""
        recent = [score for found_in, _, score in c.boxes[-self.cfg.window:] if found_in > self._pass - self.cfg.window]
        sure = self.cfg.sure is not None and self.cfg.hits > 1 and bool(recent) and min(recent) >= self.cfg.sure
        return self.cfg.hits - 1 if sure else self.cfg.hits

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
        return misses < (self.cfg.window if c.confirmed else self.cfg.window - self.needed(c) + 1)


def shrunk_grey(frame: np.ndarray) -> tuple[np.ndarray, float]:
    """`frame` (RGB, or grey) as float32 grey at most `SHIFT_WIDTH` wide, and the scale it was
    shrunk by (1: not shrunk)."""
    import cv2

    grey = frame if frame.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(frame[..., :3]), cv2.COLOR_RGB2GRAY)
    scale = min(1.0, SHIFT_WIDTH / grey.shape[1])
    if scale < 1.0:
        grey = cv2.resize(grey, (round(grey.shape[1] * scale), round(grey.shape[0] * scale)), interpolation=cv2.INTER_AREA)
    return grey.astype(np.float32), scale


def grey_shift(before: tuple[np.ndarray, float], after: tuple[np.ndarray, float]) -> tuple[float, float] | None:
    """How far the picture moved from `before` to `after` (two `shrunk_grey` results), in pixels of
    the frames they were shrunk from (x right, y down): the peak of their phase correlation; None
    when they differ in size."""
    import cv2

    (a, _), (b, scale) = before, after
    if a.shape != b.shape:
        return None
    h, w = b.shape
    (dx, dy), _ = cv2.phaseCorrelate(a, b, _hanning(w, h))
    return float(dx) / scale, float(dy) / scale


_WINDOWS: dict[tuple[int, int], np.ndarray] = {}


def _hanning(w: int, h: int) -> np.ndarray:
    import cv2

    if (w, h) not in _WINDOWS:
        _WINDOWS[(w, h)] = cv2.createHanningWindow((w, h), cv2.CV_32F)
    return _WINDOWS[(w, h)]


def view_shift(before: np.ndarray, after: np.ndarray) -> tuple[float, float] | None:
    """How far the picture moved from frame `before` to frame `after` (RGB, same size), in pixels
    (x right, y down): the peak of the two frames' phase correlation, which a turn, a look up or
    down, a strafe or a jump moves as a whole; None for frames of different sizes."""
    return grey_shift(shrunk_grey(before), shrunk_grey(after))


CLOSE_TEXEL = 1 / 80
"""A box whose surroundings are drawn with texels this wide or wider (a share of the frame's
width: 4 px of 320) is on a surface at arm's length. On the park at 320 × 240: the boxes of the
phantom tests on walls measure 5.1 px or more, real objects at the start of their tests and the
956 labelled objects 28 px or taller of the demo's shots 3.4 px or less (docs/benchmarks/real-tests.md)."""
FLAT = 2.0
"""Below this mean difference (grey levels) between pixels a texel apart the region has no
texture to measure (sky, a flat wall): no judgement."""


def texel_size(frame: np.ndarray, box: Box) -> float | None:
    """How many pixels one texel of the texture around `box` spans, from the frame's pixels alone.

    The region is the box with one box width beside it on each side (a streak on a wall is a wall
    on both sides; an object stands before something else). A texture drawn magnified (nearest
    texel, as Doom draws it) changes only at its texels' edges, so the mean difference between
    neighbouring pixels is about 1/size of that between pixels `far` apart (1/40 of the frame's
    width, beyond any texel of an object close enough to test); their ratio estimates the size,
    at most `far`. None where the region is less than `far` + 1 pixels wide or tall or has no
    texture (`FLAT`)."""
    grey = np.asarray(frame, dtype=np.float32)
    if grey.ndim == 3:
        grey = grey.mean(axis=2)
    height, width = grey.shape
    far = max(2, round(width / 40))
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    x0, x1, y0, y1 = max(0, x0), min(width, x1), max(0, y0), min(height, y1)
    side = x1 - x0
    region = grey[y0:y1, max(0, x0 - side):min(width, x1 + side)]
    if region.shape[0] <= far or region.shape[1] <= far:
        return None
    near = (np.abs(np.diff(region, axis=1)).mean() + np.abs(np.diff(region, axis=0)).mean()) / 2
    apart = (np.abs(region[:, far:] - region[:, :-far]).mean() + np.abs(region[far:] - region[:-far]).mean()) / 2
    if apart < FLAT:
        return None
    return float(min(far, apart / max(near, 1e-6)))


def close_surface(frame: np.ndarray, box: Box) -> bool:
    """Whether `box` lies on a surface at arm's length (`texel_size` at least `CLOSE_TEXEL` of the
    frame's width), not on an object to test."""
    size = texel_size(frame, box)
    return size is not None and size >= CLOSE_TEXEL * np.asarray(frame).shape[1]
