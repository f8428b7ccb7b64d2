"""Returning to the frontier (Go-Explore's "first return, then explore"), from pixels alone.

A game instance keeps an archive of the places its episodes reached (`Places` over the pixel
embedding, `playtester/perception/places.py`), and for each the shortest known way there: the
episode's reset arguments and the number of its first actions after which the place was first
seen. An episode that returns starts the game with those reset arguments and plays those actions
again (below the tester loop, so that no test, detection or PPO step is spent on them), then hands
the explorer the frontier's frame: the explorer explores from there instead of from a fresh start.

The returning steps are game steps like any other: they count against the episode's steps (the
game's own `max_steps`), appear in the trajectory (mode `return`) and are drawn on the maps. The
way is replayed, not navigated, so it only works in a game that is deterministic given its reset
seed and its actions (ViZDoom, ALE); after the replay the frame is compared with the one the way
ended on the first time, and a return whose frame differs is counted as missed (the episode goes
on from wherever the replay left it).

Which place: Go-Explore's count-based choice, a place's weight 1/√(times seen) × 1/√(1 + times
chosen), among the places whose way is at most `max_share` of the episode's steps (the rest of
the episode is the explorer's). The archive lives for the run's process: a resumed run starts a
new one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from playtester.perception.places import PIXEL_THRESHOLD, PixelEmbedding, Places

MAX_SHARE = 0.5
"""The longest way back, as a share of the episode's steps."""


def frame_digest(frame: np.ndarray) -> str:
    """A frame's fingerprint: whether a replay ended on the very frame the way ended on."""
    return hashlib.blake2b(np.ascontiguousarray(frame).tobytes(), digest_size=8).hexdigest()


class Way(NamedTuple):
    """How to reach a place: reset the game with `reset` (`{"seed", "options"}`), then play `actions`."""

    place: int
    episode: int
    """The run's episode the way was first played in."""
    reset: dict[str, Any]
    actions: tuple[int, ...]
    digest: str
    """`frame_digest` of the frame the actions end on."""


@dataclass
class _Entry:
    episode: int
    """Index into the archive's episodes."""
    steps: int
    digest: str
    chosen: int = 0


@dataclass
class FrontierArchive:
    """One game instance's places and the shortest way to each (see the module doc)."""

    max_steps: int
    """The episode's game steps: ways longer than `max_share` of them are not returned to."""
    max_share: float = MAX_SHARE
    threshold: float = PIXEL_THRESHOLD
    places: Places = field(init=False)
    episodes: list[tuple[int, dict[str, Any], list[int]]] = field(default_factory=list)
    """Each episode's number in the run, reset arguments and actions (the list the tester loop appends to)."""
    entries: dict[int, _Entry] = field(default_factory=dict)
    returned: int = 0
    missed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.max_share <= 1.0:
            raise ValueError(f"max_share {self.max_share}: a share of the episode's steps, in (0, 1]")
        self.places = Places(self.threshold)
        self.embed = PixelEmbedding(self.threshold)

    def begin(self, episode: int, reset: dict[str, Any], actions: list[int]) -> None:
        """Episode `episode` of the run starts on this instance: `actions` is the list its steps'
        actions are appended to."""
        self.episodes.append((episode, dict(reset), actions))

    def observe(self, frame: np.ndarray, steps: int) -> int:
        """The frame seen after the episode's first `steps` actions: its place, whose way is
        this one when it is the first or the shortest yet."""
        place, _ = self.places.visit(self.embed(frame))
        known = self.entries.get(place)
        if known is None or steps < known.steps:
            chosen = known.chosen if known is not None else 0
            self.entries[place] = _Entry(len(self.episodes) - 1, steps, frame_digest(frame), chosen)
        return place

    def odds(self) -> dict[int, float]:
        """Each place that may be returned to, with its chance of being chosen: a way of at least
        one step and at most `max_share` of the episode, weight 1/√(times seen) × 1/√(1 + times chosen)."""
        longest = int(self.max_share * self.max_steps)
        weights = {p: 1.0 / np.sqrt(self.places.places[p].visits) / np.sqrt(1.0 + e.chosen)
                   for p, e in self.entries.items() if 0 < e.steps <= longest}
        total = sum(weights.values())
        return {p: w / total for p, w in weights.items()}

    def choose(self, rng: np.random.Generator) -> Way | None:
        """A place to return to (`odds`), or None while no place has a way to it."""
        odds = self.odds()
        if not odds:
            return None
        place = list(odds)[int(rng.choice(len(odds), p=list(odds.values())))]
        entry = self.entries[place]
        entry.chosen += 1
        episode, reset, actions = self.episodes[entry.episode]
        return Way(place, episode, reset, tuple(actions[:entry.steps]), entry.digest)

    def arrived(self, way: Way, frame: np.ndarray, ended: bool = False) -> bool:
        """Whether a replay of `way` ended on its frame (not if the replay `ended` the episode
        first); counts the return, and a miss."""
        self.returned += 1
        reached = not ended and frame_digest(frame) == way.digest
        self.missed += int(not reached)
        return reached
