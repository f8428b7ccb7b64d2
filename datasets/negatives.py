"""Candidate negatives: frames where the detector boxed something that was not there.

A tester run writes them (`playtester.tester.loop.TesterEnv`) into its folder, pixel-only: the
frames of detections it rejected (never confirmed across frames, or confirmed only on a surface
at arm's length) and of tests whose detector passes found no object:

    RUN/negatives/images/eEPISODE-tSTEP.png   the frame as the game drew it (-2, -3 … after the
                                              name where more than one ended at that step)
    RUN/negatives/negatives.jsonl             one line a frame: file, episode, step, why,
                                              boxes [{box, class, score}] (what was boxed)

`train detector --negatives PATH` takes them back as background images (frames with no object
of interest in them), so that the detector's next round learns what it boxed wrongly. They are
candidates: a detection the run rejected may still have been of a real object, which a person
can weed out by deleting its image. PATH (repeatable) is one of

- a folder of images (PNG or JPEG), every one a background (frames a user marked as empty);
- a run folder: its `negatives/images`;
- a text file naming such folders, one a line (`#` starts a comment; relative to the file).

Every image must have the size of the shots it is trained with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from playtester.errors import UserError

FOLDER = "negatives"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class NegativeLog:
    """Writes one run instance's candidate negatives (the folder is made at the first one)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir) / FOLDER
        self._f = None

    def write(self, frame: np.ndarray, episode: int, step: int, why: str, boxes: Sequence[dict[str, Any]]) -> str:
        """Keep `frame` (RGB) with what was boxed in it; returns the image's name."""
        import cv2

        from playtester.files import write_bytes_atomic

        (self.dir / "images").mkdir(parents=True, exist_ok=True)
        name, n = f"e{episode}-t{step}.png", 1
        while (self.dir / "images" / name).exists():  # two candidates ended at one step: keep both frames
            n += 1
            name = f"e{episode}-t{step}-{n}.png"
        ok, buf = cv2.imencode(".png", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        assert ok
        write_bytes_atomic(self.dir / "images" / name, buf.tobytes())
        if self._f is None:
            self._f = open(self.dir / "negatives.jsonl", "a")
        record = {"file": f"images/{name}", "episode": episode, "step": step, "why": why,
                  "boxes": [{"box": [round(float(v), 1) for v in b["box"]], "class": b["class"], "score": round(float(b["score"]), 3)}
                            for b in boxes]}
        self._f.write(json.dumps(record) + "\n")
        self._f.flush()
        return name

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def _resolve(path: Path, named_in: str) -> list[Path]:
    """The image files one --negatives entry stands for."""
    where = f"--negatives {path}" + (f" (named in {named_in})" if named_in else "")
    if not path.exists():
        what = "run folder or image folder" if named_in else "folder or file"
        raise UserError(f"{where}: no such {what}; give a run folder, a folder of images, or a file listing them")
    if path.is_dir():
        written = path / FOLDER / "images"  # a run's candidate negatives
        if (path / "summary.json").is_file() and not written.is_dir():
            raise UserError(f"{where}: a run folder that wrote no candidate negatives (nothing rejected, no test "
                            f"that found nothing); leave it out")
        folder = written if written.is_dir() else path
        images = _images_in(folder)
        if not images:
            raise UserError(f"{where}: no images (PNG or JPEG) in {folder}; give a run folder that wrote negatives, or a folder of frames")
        return images
    if named_in:
        raise UserError(f"{where}: a file; each line of {named_in} must name a run folder or a folder of images")
    images: list[Path] = []
    for i, line in enumerate(path.read_text(errors="replace").splitlines()):
        entry = line.split("#", 1)[0].strip()
        if entry:
            named = Path(entry) if Path(entry).is_absolute() else path.parent / entry
            images += _resolve(named, f"{path} line {i + 1}")
    if not images:
        raise UserError(f"--negatives {path}: the file names no folder; one run folder or image folder a line")
    return images


def negative_images(paths: Sequence[str | Path], size: tuple[int, int] | None = None) -> list[Path]:
    """Every image the `--negatives` entries name, checked: each exists and is readable, and has
    `size` (width, height), the shots' size, when given. Raises a one-line `UserError` otherwise."""
    from PIL import Image

    images: list[Path] = []
    for p in paths:
        images += _resolve(Path(p), "")
    for path in images:
        try:
            with Image.open(path) as im:
                found = im.size
        except Exception:
            raise UserError(f"--negatives: image {path} cannot be read; delete it or replace it") from None
        if size is not None and found != tuple(size):
            raise UserError(f"--negatives: image {path} is {found[0]}×{found[1]} but the shots are {size[0]}×{size[1]}; "
                            "negatives must come from the same game at the same resolution")
    return list(dict.fromkeys(images))


def with_backgrounds(split: Any, paths: Sequence[str | Path]) -> Any:
    """A training split (`CocoSet`) with the `--negatives` images added as images without boxes.
    They must have the split's image size (its most common one, where shots of several sizes are
    mixed)."""
    from collections import Counter

    from playtester.datasets.detection import CocoImage, CocoSet

    sizes = Counter((im.width, im.height) for im in split.images)
    size = sizes.most_common(1)[0][0] if sizes else None
    first = 1 + max((im.id for im in split.images), default=0)
    backgrounds = []
    for i, path in enumerate(negative_images(paths, size)):
        w, h = size if size is not None else _size(path)
        backgrounds.append(CocoImage(first + i, path, str(path), int(w), int(h)))
    return CocoSet(split.source, split.classes, split.images + backgrounds)


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as im:
        return im.size
