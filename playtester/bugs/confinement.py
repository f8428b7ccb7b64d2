"""Possibly trapped: the confinement oracle, from pixels alone, for games with no map.

Without a map there is no geometry to ask whether the player can still get back. What pixels can
show is the shape of a one-way trip: the agent used to reach many views, then, from some step on,
it sees only a few views it had never seen before that step, never one of the views from before,
while it keeps moving and acting. In a pit, behind a door that closed, after a one-way
teleporter, the views are the trap's walls; the rest of the level is not seen again.

`ConfinementOracle` puts every frame in a place (`perception/places.py`'s leader clusterer) by a
view embedding that a turn of the head barely changes: the histogram of the frame's grey levels
(`GreyHistogram`; the places view's 16×12 picture tells apart every yaw and pitch of one spot, so
a trapped player who looks around keeps finding "new" places). It is a finding when, over the
last `window` steps of varied input (at least `min_actions` different actions, the picture
changing on at least half of the steps: not the stuck oracle's frozen screen):

- no new place was found;
- the views fell in at most `max_places` places;
- every one of those places was first seen after some step t0, and before t0 the episode had
  reached at least `min_before` other places, none of them seen again in the window.

The finding says "possibly trapped": pixels cannot tell a pit from a small room the agent did
not try to leave (docs/benchmarks/softlock.md measures both), so the episode goes on. The clip
(the finding's frames) shows the views it cycled through.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import cv2
import numpy as np

from playtester.bugs.oracles import Finding
from playtester.perception.places import Places, unit

WINDOW = 200
"""Steps the views must stay confined (23 s at ViZDoom's 8.75 steps a second)."""
MAX_PLACES = 8
MIN_BEFORE = 4
MIN_ACTIONS = 3
HISTOGRAM_THRESHOLD = 0.05
"""Cosine distance between two grey histograms beyond which they are different places."""


class GreyHistogram:
    """A frame's grey levels in 16 bins, square-rooted (so that a large wall does not drown the
    rest) and scaled to a unit vector: what surfaces are in view and how lit, wherever they are on
    the screen."""

    name = "grey histogram"

    def __init__(self, threshold: float = HISTOGRAM_THRESHOLD) -> None:
        self.threshold = threshold

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        grey = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        counts = np.bincount((grey >> 4).ravel(), minlength=16).astype(np.float32)
        return unit(np.sqrt(counts))


class ConfinementOracle:
    """Views confined to a few places never seen before some step; see the module's docstring."""

    name = "confined"

    def __init__(self, window: int = WINDOW, max_places: int = MAX_PLACES, min_before: int = MIN_BEFORE,
                 min_actions: int = MIN_ACTIONS, embedding: Any = None, tolerance: float = 0.5) -> None:
        from playtester.errors import UserError

        if window < 2 or max_places < 1 or min_before < 1:
            raise UserError(f"confinement oracle: window {window}, max_places {max_places}, min_before {min_before}: "
                            "give a window of at least 2 steps and at least 1 for the others")
        self.window, self.max_places, self.min_before, self.min_actions = window, max_places, min_before, min_actions
        self.embedding = embedding or GreyHistogram()
        self.tolerance = tolerance
        """Mean absolute change (grey levels, a quarter-size frame) below which the picture did not change."""
        self.reset()

    def reset(self) -> None:
        self.places = Places(self.embedding.threshold)
        self.first_seen: list[int] = []
        """Each place's step of first sighting in this episode."""
        self.recent: deque[tuple[int, int | None, bool]] = deque(maxlen=self.window)
        """`(place, action, picture changed)` of the last `window` steps."""
        self._last: np.ndarray | None = None
        self._reported = False
        self._step = 0

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        if info.get("restarted"):  # the level started again: a new trip
            self.reset()
        small = frame[::4, ::4].astype(np.int16)
        changed = self._last is not None and float(np.abs(small - self._last).mean()) >= self.tolerance
        self._last = small
        place, new = self.places.visit(self.embedding(frame))
        if new:
            self.first_seen.append(self._step)
        self.recent.append((place, action, changed))
        self._step += 1
        if self._reported or len(self.recent) < self.window:
            return []
        verdict = self.confined()
        if verdict is None:
            return []
        self._reported = True
        since, seen = verdict
        return [Finding("confined", f"possibly trapped: for {self.window} steps of varied input the views stayed within "
                        f"{len(seen)} places, all first seen since step {since} of the episode, and none of the "
                        f"{self._before(since)} places reached before that step came back (judged from pixels alone)",
                        episode, step, {"places": sorted(seen), "since": since, "window": self.window,
                                        "places_before": self._before(since), "position": info.get("position"),
                                        "judged_by": "pixels: the views' grey histograms"})]

    def _before(self, since: int) -> int:
        return sum(1 for s in self.first_seen if s < since)

    def confined(self) -> tuple[int, set[int]] | None:
        """`(t0, the window's places)` when the last `window` steps are confined (the module's
        three conditions and varied, moving input), else None."""
        seen = {p for p, _, _ in self.recent}
        if len(seen) > self.max_places:
            return None
        start = self._step - self.window
        since = min(self.first_seen[p] for p in seen)
        if max(self.first_seen[p] for p in seen) >= start:  # a new place within the window
            return None
        if self._before(since) < self.min_before:
            return None
        actions = {a for _, a, _ in self.recent if a is not None}
        moving = sum(c for _, _, c in self.recent)
        if len(actions) < self.min_actions or moving < self.window / 2:
            return None
        return since, seen
