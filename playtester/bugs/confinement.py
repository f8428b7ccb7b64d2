"""Possibly trapped: the confinement oracle, from pixels alone, for games with no map.

Without a map there is no geometry to ask whether the player can still get back. What pixels can
show is the shape of a one-way trip: from some step t0 on, the agent sees views it had not seen
before t0, the views it reached before never come back, and its new views stop growing, while it
keeps moving and acting. In a pit, behind a door that closed, after a one-way teleporter, the
views are the trap's; the rest of the level is not seen again.

`ConfinementOracle` puts every frame in a place (`perception/places.py`'s leader clusterer) by a
view embedding that a turn of the head barely changes but where the view was taken does: the
grey levels of four horizontal bands of the frame (`BandHistogram`). A turn slides the picture
sideways and leaves each band's histogram nearly as it was; where the floor, the walls and the
ceiling meet (in a pit the walls fill the upper bands, in a room the ceiling shows) and how close
the walls are move grey levels from band to band. The places view's 16×12 picture tells apart
every yaw of one spot, so a trapped player who looks around keeps finding "new" places; one grey
histogram of the whole frame puts the pit's views and the room's in the same few places
(docs/benchmarks/softlock.md measures both).

It is a finding when, at step t, over the last `window` steps of varied input (at least
`min_actions` different actions, the picture changing on at least half of the steps: not the
stuck oracle's frozen screen):

- at most `new_share` of the window's steps fell in places first seen within the window (the
  views stopped growing; a new corner now and then is allowed);
- t0 is the first sighting of the oldest place that matters: the window's places in order of
  first sighting, those together under `old_share` of its steps left out (a glimpse of an old
  view is allowed);
- from t0 to t, at most `old_share` of the steps fell in places first seen before t0, and those
  steps visited at most `max_places` places (a trap is a small set of views);
- before t0 the episode had reached at least `min_before` places.

The finding says "possibly trapped": pixels cannot tell a pit from a pit with a lift the agent
does not work, nor from a room it came into and did not try to leave (the benchmark measures
both), so the episode goes on. The clip (the finding's frames) shows the views it cycled through.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

import cv2
import numpy as np

from playtester.bugs.oracles import Finding
from playtester.perception.places import Places, unit

WINDOW = 300
"""Steps whose views must have stopped growing (34 s at ViZDoom's 8.75 steps a second)."""
NEW_SHARE = 0.05
OLD_SHARE = 0.1
MAX_PLACES = 128
MIN_BEFORE = 4
MIN_ACTIONS = 3
VIEW_SIZE = (160, 120)
"""`(width, height)` every frame is brought to before it is embedded: the measured setting, and
the cost, whatever the game's resolution."""
BAND_THRESHOLD = 0.03
"""Cosine distance between two band histograms beyond which they are different places."""


class BandHistogram:
    """The frame's grey levels in 8 bins for each of 4 horizontal bands, square-rooted (so that a
    large wall does not drown the rest) and scaled to a unit vector: what surfaces are in view,
    how lit, and how high on the screen, wherever they are left to right."""

    name = "band histogram"

    def __init__(self, threshold: float = BAND_THRESHOLD, bands: int = 4, bins: int = 8) -> None:
        self.threshold, self.bands, self.bins = threshold, bands, bins

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        grey = frame if frame.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        h = grey.shape[0]
        counts = np.concatenate([cv2.calcHist([np.ascontiguousarray(grey[i * h // self.bands:(i + 1) * h // self.bands])],
                                              [0], None, [self.bins], [0, 256]).ravel() for i in range(self.bands)])
        return unit(np.sqrt(counts))


class ConfinementOracle:
    """A one-way trip into a few views; see the module's docstring."""

    name = "confined"

    def __init__(self, window: int = WINDOW, new_share: float = NEW_SHARE, old_share: float = OLD_SHARE,
                 max_places: int = MAX_PLACES, min_before: int = MIN_BEFORE, min_actions: int = MIN_ACTIONS,
                 embedding: Any = None, tolerance: float = 0.5) -> None:
        from playtester.errors import UserError

        if window < 2 or max_places < 1 or min_before < 1 or not (0 <= new_share < 1 and 0 <= old_share < 1):
            raise UserError(f"confinement oracle: window {window}, max_places {max_places}, min_before {min_before}, "
                            f"new_share {new_share}, old_share {old_share}: give a window of at least 2 steps, at least 1 "
                            "for the counts and shares from 0 to below 1")
        self.window, self.new_share, self.old_share = window, new_share, old_share
        self.max_places, self.min_before, self.min_actions = max_places, min_before, min_actions
        self.embedding = embedding or BandHistogram()
        self.tolerance = tolerance
        """Mean absolute change (grey levels, 40×30 of the 160×120 view) below which the picture did not change."""
        self.reset()

    def reset(self) -> None:
        self.places = Places(self.embedding.threshold)
        self.first_seen: list[int] = []
        """Each place's step of first sighting in this episode."""
        self.trail = np.zeros(1024, np.int32)
        """The place of every step of this episode (its first `steps` entries)."""
        self.steps = 0
        self.recent: deque[tuple[int, int | None, bool]] = deque(maxlen=self.window)
        """`(place, action, picture changed)` of the last `window` steps."""
        self.counts: Counter[int] = Counter()
        """How often each place is in `recent`."""
        self._last: np.ndarray | None = None
        self._reported = False

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        if info.get("restarted"):  # the level started again: a new trip
            self.reset()
        grey = frame if frame.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
        view = cv2.resize(grey, VIEW_SIZE, interpolation=cv2.INTER_AREA)
        small = view[::4, ::4].astype(np.int16)
        changed = self._last is not None and float(np.abs(small - self._last).mean()) >= self.tolerance
        self._last = small
        place, new = self.places.visit(self.embedding(view))
        if new:
            self.first_seen.append(self.steps)
        if self.steps == len(self.trail):
            self.trail = np.concatenate([self.trail, np.zeros_like(self.trail)])
        self.trail[self.steps] = place
        self.steps += 1
        if len(self.recent) == self.window:
            self.counts[self.recent[0][0]] -= 1
        self.recent.append((place, action, changed))
        self.counts[place] += 1
        if self._reported or len(self.recent) < self.window:
            return []
        verdict = self.confined()
        if verdict is None:
            return []
        self._reported = True
        since, seen = verdict
        before = self._before(since)
        return [Finding("confined", f"possibly trapped: for {self.steps - since} steps, since step {since} of the "
                        f"episode, the views stayed within {len(seen)} places first seen then, the last {self.window} "
                        f"steps of varied input found almost none new, and the {before} places reached before that "
                        "step hardly came back (judged from pixels alone)",
                        episode, step, {"places": sorted(seen), "since": since, "window": self.window,
                                        "places_before": before, "position": info.get("position"),
                                        "judged_by": "pixels: the views' band histograms"})]

    def _before(self, since: int) -> int:
        return int(np.searchsorted(self.first_seen, since))

    def confined(self) -> tuple[int, set[int]] | None:
        """`(t0, the places visited since t0)` when the episode is confined now (the module's
        conditions and varied, moving input), else None."""
        start = self.steps - self.window
        first = self.first_seen
        ordered = sorted((p for p, c in self.counts.items() if c), key=lambda p: first[p])
        if sum(self.counts[p] for p in ordered if first[p] >= start) > self.new_share * self.window:
            return None  # the views still grow
        since, glimpsed = None, 0
        for p in ordered:  # the oldest place that is more than a glimpse
            if glimpsed + self.counts[p] > self.old_share * self.window:
                since = first[p]
                break
            glimpsed += self.counts[p]
        if since is None or since >= start or self._before(since) < self.min_before:
            return None
        span = self.trail[since:self.steps]
        old = np.asarray(first)[span] < since
        if old.sum() > self.old_share * len(span):
            return None  # the earlier views came back
        seen = set(span[~old].tolist())
        if len(seen) > self.max_places:
            return None
        actions = {a for _, a, _ in self.recent if a is not None}
        moving = sum(c for _, _, c in self.recent)
        if len(actions) < self.min_actions or moving < self.window / 2:
            return None
        return since, seen
