"""Build a park's files once and cache them: the PWAD, the ground truth and the bird's-eye map."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from playtester.files import write_bytes_atomic
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
    # Two processes may build the same park at once (two `playtester demos` side by side): each
    # writes into its own folder, then moves the files in; they are the same bytes, so whichever
    # lands last is as good. The ground truth moves last: its presence means the set is complete.
    own = ParkFiles(Path(tempfile.mkdtemp(prefix=".build-", dir=files.folder)))
    try:
        layout = generate_park(config)
        write_bytes_atomic(own.wad, park_wad(layout))
        render_birdseye(layout).save_png(own.map_png)
        layout.save(own.ground_truth)
        for name in ("wad", "map_png", "ground_truth"):
            os.replace(getattr(own, name), getattr(files, name))
    finally:
        shutil.rmtree(own.folder, ignore_errors=True)
    return files
