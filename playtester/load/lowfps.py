"""Low-FPS points (RELINE §4.1.3): places where the frame rate drops more often than not.

A point is a telemetry cell (an `OccupancyGrid` cell of the position) or, without telemetry, a
frame cell (Go-Explore's downsampled frame). Every visit records the step's frame time; a point is
low-FPS when **more than half** of its visits took longer than the threshold `t`, and its
confidence is the share of visits that did. The low-FPS map draws the points over the bird's-eye
map; the violin plot shows the frame times at each agent's low-FPS points.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from playtester.errors import UserError
from playtester.capture.timing import frame_time_of

Key = tuple[int, int] | str
"""`(col, row)` of a telemetry cell, or the hex of a frame cell."""


@dataclass
class LowFpsPoint:
    """A point where most visits were slow."""

    key: Key
    visits: int
    over: int
    """Visits whose frame time exceeded the threshold."""
    frame_times: list[float] = field(repr=False)
    centre: tuple[float, float] | None = None
    """World position of the cell's centre (telemetry cells only)."""

    @property
    def confidence(self) -> float:
        """Share of visits over the threshold (RELINE's confidence)."""
        return self.over / self.visits

    def to_dict(self) -> dict[str, Any]:
        return {"key": list(self.key) if isinstance(self.key, tuple) else self.key, "visits": self.visits,
                "over": self.over, "confidence": self.confidence, "centre": self.centre,
                "median_frame_time_ms": float(np.median(self.frame_times))}


@dataclass
class VisitLog:
    """Frame times per point, gathered step by step (or from a run's `trajectory.jsonl`)."""

    cell: float
    """Telemetry cell size in map units (the park's cell is 128)."""
    origin: tuple[float, float] = (0.0, 0.0)
    times: dict[Key, list[float]] = field(default_factory=dict)
    unplaced: int = 0
    """Timed records that had no place to count at (`from_records`)."""

    def key_of(self, position: Sequence[float] | None = None, frame_cell: str | bytes | None = None) -> Key:
        if position is not None:
            return (int(np.floor((float(position[0]) - self.origin[0]) / self.cell)),
                    int(np.floor((float(position[1]) - self.origin[1]) / self.cell)))
        if frame_cell is not None:
            return frame_cell.hex() if isinstance(frame_cell, bytes) else str(frame_cell)
        raise ValueError("a visit needs a position or a frame cell")

    def add(self, frame_time_ms: float, position: Sequence[float] | None = None, frame_cell: str | bytes | None = None) -> None:
        self.times.setdefault(self.key_of(position, frame_cell), []).append(float(frame_time_ms))

    def centre(self, key: Key) -> tuple[float, float] | None:
        if isinstance(key, str):
            return None
        return (self.origin[0] + (key[0] + 0.5) * self.cell, self.origin[1] + (key[1] + 0.5) * self.cell)

    @property
    def all_times(self) -> np.ndarray:
        return np.array([t for ts in self.times.values() for t in ts], dtype=float)

    def __len__(self) -> int:
        return sum(len(v) for v in self.times.values())

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]], cell: float, origin: tuple[float, float] = (0.0, 0.0)) -> "VisitLog":
        """Visits from step records with a frame time (`frame_time_ms` or `fps`) and a `position`
        or a `frame_cell` (`cell` in runs written before it was named so). Records without a frame
        time are skipped, and so are those with no place (the last step of an episode that ended
        has no position): `unplaced` counts them."""
        log = cls(cell=cell, origin=origin)
        for r in records:
            t = frame_time_of(r)
            if t is None:
                continue
            place = r.get("frame_cell", r.get("cell"))
            if r.get("position") is None and place is None:
                log.unplaced += 1
                continue
            log.add(t, r.get("position"), place)
        return log


def is_low_fps(frame_times: Sequence[float], threshold: float) -> bool:
    """RELINE's rule: more than half of the visits took longer than `threshold`."""
    over = int(np.sum(np.asarray(frame_times, dtype=float) > threshold))
    return 2 * over > len(frame_times)


def low_fps_points(log: VisitLog, threshold: float, min_visits: int = 1) -> list[LowFpsPoint]:
    """Every point with at least `min_visits` visits of which more than half exceeded `threshold`,
    most confident first."""
    points = []
    for key, times in log.times.items():
        if len(times) < min_visits or not is_low_fps(times, threshold):
            continue
        over = int(np.sum(np.asarray(times) > threshold))
        points.append(LowFpsPoint(key, len(times), over, list(times), log.centre(key)))
    return sorted(points, key=lambda p: (-p.confidence, -p.visits, str(p.key)))


def confidence_summary(points: Sequence[LowFpsPoint]) -> dict[str, Any]:
    """How many points, how often each was exercised, and their confidence (mean, median, min, max)."""
    if not points:
        return {"points": 0}
    conf = np.array([p.confidence for p in points])
    return {"points": len(points), "mean_visits": float(np.mean([p.visits for p in points])),
            "confidence_mean": float(conf.mean()), "confidence_median": float(np.median(conf)),
            "confidence_min": float(conf.min()), "confidence_max": float(conf.max())}


def point_frame_times(points: Sequence[LowFpsPoint]) -> np.ndarray:
    """All frame times recorded at the points (the distribution RELINE's violins show)."""
    return np.array([t for p in points for t in p.frame_times], dtype=float)


# -- pictures ----------------------------------------------------------------------------------

def low_fps_map(view: Any, points: Sequence[LowFpsPoint], cell: float, visited: VisitLog | None = None) -> np.ndarray:
    """The bird's-eye map (`BirdsEye`) with visited cells shaded and low-FPS cells in red, the
    redder the more confident."""
    import cv2

    img = view.image.copy()
    overlay = img.copy()
    half = cell / 2

    def rect(centre: tuple[float, float]) -> tuple[tuple[int, int], tuple[int, int]]:
        (px0, px1), (py0, py1) = view.to_pixel([centre[0] - half, centre[0] + half], [centre[1] + half, centre[1] - half])
        return (int(px0), int(py0)), (max(int(px0) + 1, int(px1) - 1), max(int(py0) + 1, int(py1) - 1))

    if visited is not None:
        for key in visited.times:
            c = visited.centre(key)
            if c is not None:
                cv2.rectangle(overlay, *rect(c), (235, 200, 60), -1)
    img = cv2.addWeighted(overlay, 0.35, img, 0.65, 0)
    for p in points:
        if p.centre is None:
            continue
        shade = int(255 * (1.0 - p.confidence))
        cv2.rectangle(img, *rect(p.centre), (230, shade // 3, shade // 3), -1)
        cv2.rectangle(img, *rect(p.centre), (0, 0, 0), 1)
    return img


def violin_plot(times_by_agent: dict[str, np.ndarray], threshold: float | None, title: str = "") -> np.ndarray:
    """Violins of frame times per agent (ms), the threshold as a red line; RGB image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, v in times_by_agent.items() if len(v) > 0]
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(names) + 2), 3.4), dpi=100)
    if names:
        data = [np.asarray(times_by_agent[n], dtype=float) for n in names]
        ax.violinplot(data, showmedians=True)
        ax.set_xticks(range(1, len(names) + 1), [f"{n}\n(n={len(d)})" for n, d in zip(names, data)])
    else:
        ax.text(0.5, 0.5, "no frame times", ha="center", va="center", transform=ax.transAxes)
    if threshold is not None:
        ax.axhline(threshold, color="#d62728", lw=1.2, label=f"t = {threshold:.2f} ms")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_ylabel("frame time (ms)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return image


# -- the report's load-testing section ---------------------------------------------------------

@dataclass
class LoadSection:
    """What a run's frame times add to its report: a summary and pictures `(file, caption, png)`."""

    summary: dict[str, Any]
    pictures: list[tuple[str, str, bytes]]


def load_section(run: Any, trajectory: list[dict[str, Any]], view: Any | None, cell: float | None,
                 agent: str = "agent") -> LoadSection | None:
    """The low-FPS map and the frame-time violins of a run, or None when it recorded no frame times.

    The threshold is the run's `load_threshold.json` (`--objective load`), else `t_b` of the
    run's own frame times (mean + 5 sd): without a baseline the run is its own.
    """
    import cv2

    timed = [r for r in trajectory if frame_time_of(r) is not None]
    if not timed:
        return None
    path = Path(run) / "load_threshold.json"
    times = np.array([frame_time_of(r) for r in timed])
    if path.exists():
        try:
            threshold, source = float(json.loads(path.read_text())["value"]), "the run's load threshold"
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UserError(f"{path}: malformed ({type(e).__name__}: {e}); delete it to use the run's own frame times") from None
    else:
        threshold = float(times.mean() + 5 * times.std(ddof=1)) if times.size > 1 else float(times[0])
        source = "mean + 5 sd of this run's frame times"
    if not any(r.get("position") is not None or r.get("frame_cell", r.get("cell")) is not None for r in timed):
        return None  # frame times but nowhere to place them: no points, no map
    log = VisitLog.from_records(timed, cell=cell or 128.0)
    points = low_fps_points(log, threshold)
    summary = {"threshold_ms": threshold, "threshold_from": source, "steps_timed": len(timed),
               "steps_unplaced": log.unplaced, "frame_time_median_ms": float(np.median(times)), "over_threshold_share": float(np.mean(times > threshold)),
               **confidence_summary(points), "low_fps": [p.to_dict() for p in points[:50]]}

    def encode(image: np.ndarray) -> bytes:
        ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        assert ok
        return buf.tobytes()

    pictures = []
    if view is not None and cell is not None:
        pictures.append(("lowfps_map.png", f"Low-FPS map: {len(points)} point(s) where most visits took over "
                         f"{threshold:.2f} ms (red, the redder the more confident); visited cells shaded",
                         encode(low_fps_map(view, points, cell, visited=log))))
    violins = {f"{agent}: all steps": times, f"{agent}: at low-FPS points": point_frame_times(points)}
    pictures.append(("frame_times.png", f"Frame times (ms); red line: t ({source})", encode(violin_plot(violins, threshold))))
    return LoadSection(summary, pictures)
