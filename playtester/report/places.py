"""The places view: where a run with no map went, as the distinct views it reached.

A run with no map (a window game given no `map`, a Gymnasium game) puts every step in a place
(`playtester.perception.places`: views clustered online by a pixel embedding, measured against
the frozen encoder's features and kept for being purer and far cheaper; `places.jsonl`,
`places/`, `place` in `trajectory.jsonl`). The report shows a
grid of the places' thumbnails, each with when it was first seen, how often it was visited, and
the tests and findings made there, and a curve of distinct places over the run's steps: a curve
that flattens while the run goes on is an agent that stopped finding new views.

Several game instances cluster on their own; here their places are merged by feeding their
exemplars, in the order they were found, through one clusterer of the same threshold.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from playtester.perception.places import Places
from playtester.tester.runlog import read_jsonl

MOST_SHOWN = 60
"""Places drawn in the grid: those with tests or findings, then the most visited."""
EMBEDDINGS = {"encoder": "the frozen encoder's features",
              "pixels": "a pixel embedding (each frame as a 16×12 grey picture)"}


@dataclass
class PlaceCard:
    """One place of the grid."""

    id: int
    thumb_uri: str
    episode: int
    t: int
    first_step: int
    """The run's step (the trajectory's line) it was first seen at."""
    visits: int = 0
    tests: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


@dataclass
class PlacesView:
    embedding: str
    cards: list[PlaceCard]
    """Every place, by first sighting."""
    novel: list[int]
    """Distinct places seen after each of the run's steps."""
    test_steps: list[int]
    finding_steps: list[int]

    @property
    def shown(self) -> list[PlaceCard]:
        keep = sorted(self.cards, key=lambda c: (not (c.tests or c.findings), -c.visits, c.first_step))[:MOST_SHOWN]
        return sorted(keep, key=lambda c: c.first_step)

    def summary(self) -> dict[str, Any]:
        return {"places": len(self.cards), "embedding": self.embedding,
                "steps_since_last_new_place": (len(self.novel) - 1 - int(np.flatnonzero(np.diff([0] + self.novel))[-1]))
                if self.novel else 0}


def finding_env(folder: str) -> int:
    """The game instance of a finding's folder (`NNNN`: the first; `eK-NNNN`: instance K)."""
    return int(folder[1:folder.index("-")]) if folder.startswith("e") and "-" in folder else 0


def places_view(run: Path, trajectory: list[dict[str, Any]], tests: list[dict[str, Any]],
                findings: list[dict[str, Any]]) -> PlacesView | None:
    """The places of a run that kept them (`places.jsonl`), else None."""
    records = list(read_jsonl(run / "places.jsonl"))
    if not records:
        return None
    merged = Places(float(records[0].get("threshold", 0.0)))
    global_id: dict[tuple[int, int], int] = {}
    first: dict[int, dict[str, Any]] = {}
    for r in records:  # in the order found: an instance's later place may be another's earlier one
        vector = np.asarray(r["vector"], np.float32)
        vector /= max(1e-6, float(np.linalg.norm(vector)))
        g, new = merged.visit(vector)
        global_id[(int(r.get("env", 0)), int(r["place"]))] = g
        if new:
            first[g] = r
    cards: dict[int, PlaceCard] = {}
    where: dict[tuple[int, int, int], tuple[int, int]] = {}
    novel, seen = [], set()
    for step, row in enumerate(trajectory):
        if "place" not in row:
            continue
        g = global_id.get((int(row.get("env", 0)), int(row["place"])))
        if g is None:  # a line written after its place's (torn) record: unplaced
            continue
        if g not in cards:
            cards[g] = PlaceCard(g, _thumb(run, first[g]["thumb"]), int(row["episode"]), int(row["t"]), step)
        cards[g].visits += 1
        seen.add(g)
        novel.append(len(seen))
        where[(int(row.get("env", 0)), int(row["episode"]), int(row["t"]))] = (g, len(novel) - 1)
    test_steps, finding_steps = [], []
    for t in tests:
        at = where.get((int(t.get("env", 0)), int(t["episode"]), int(t["step"])))
        if at is not None:
            outcome = "passed" if t.get("success", True) and not (t.get("texture") or {}).get("bug") else "failed"
            cards[at[0]].tests.append(f"{t['kind']} {t['ooi']}: {outcome}")
            test_steps.append(at[1])
    for f in findings:
        at = where.get((finding_env(f["folder"]), int(f.get("episode", -1)), int(f.get("step", -1))))
        if at is not None:
            cards[at[0]].findings.append(f"{f['folder']}: {f['kind']}")
            finding_steps.append(at[1])
    return PlacesView(str(records[0].get("embedding", "")), sorted(cards.values(), key=lambda c: c.first_step), novel,
                      test_steps, finding_steps)


def _thumb(run: Path, name: str) -> str:
    path = run / name
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii") if path.is_file() else ""


def novel_places_curve(view: PlacesView) -> np.ndarray:
    """Distinct places over the run's steps, tests and findings marked where they were made."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
    steps = np.arange(1, len(view.novel) + 1)
    ax.plot(steps, view.novel, color="#2c6fbb", label="distinct places")
    if view.test_steps:
        ax.plot([s + 1 for s in view.test_steps], [view.novel[s] for s in view.test_steps], "^", color="#27ae60",
                markersize=5, label="test")
    if view.finding_steps:
        ax.plot([s + 1 for s in view.finding_steps], [view.novel[s] for s in view.finding_steps], "X", color="#c0392b",
                markersize=7, label="finding")
    ax.set_xlabel("steps")
    ax.set_ylabel("distinct places")
    ax.set_ylim(0, max(1, max(view.novel, default=0)) * 1.1)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return image
