"""Build a park's files once and cache them: the PWAD, the ground truth and the bird's-eye map."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from playtester.capture.atomic import write_bytes_atomic
from playtester.capture.park.birdseye import render_birdseye
from playtester.capture.park.layout import ParkConfig, ParkLayout, generate_park
from playtester.capture.park.wad import park_wad


def cache_root() -> Path:
    """Where generated scenarios live: `$PLAYTESTER_CACHE` or `~/.cache/playtester`."""
    return Path(os.environ.get("PLAYTESTER_CACHE", Path.home() / ".cache" / "playtester"))


@dataclass(frozen=True)
class ParkFiles:
    folder: Path

    @property
    def wad(self) -> Path:
        return self.folder / "park.wad"

    @property
    def ground_truth(self) -> Path:
        return self.folder / "park.json"

    @property
    def map_png(self) -> Path:
        return self.folder / "map.png"

    def layout(self) -> ParkLayout:
        return ParkLayout.load(self.ground_truth)


def build_park(config: ParkConfig, folder: str | Path | None = None) -> ParkFiles:
    """Generate the park for `config` into `folder` (default: the cache), unless it is there."""
    files = ParkFiles(Path(folder) if folder else cache_root() / "scenarios" / config.slug)
    if files.wad.exists() and files.ground_truth.exists() and files.map_png.exists():
        return files
    files.folder.mkdir(parents=True, exist_ok=True)
    layout = generate_park(config)
    write_bytes_atomic(files.wad, park_wad(layout))
    render_birdseye(layout).save_png(files.map_png)
    layout.save(files.ground_truth)  # written last: its presence means the set is complete
    return files
