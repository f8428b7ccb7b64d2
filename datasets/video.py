"""Gameplay video in and out: decoding with ffmpeg (imageio-ffmpeg), resampling to the control
rate, cropping and resizing to the frames the encoder was trained on, and writing episodes back
out as mp4.

A video is read as a stream, never whole: `control_rate_frames` yields uint8 H×W×3 frames at the
control rate, each the frame on screen at that moment (`resample_counts`: frame `i` of a source at
`source_fps` is kept once for every control step whose time falls while it is shown). A source
slower than the control rate is refused: repeating frames would make steps in which nothing
moved, and the inverse-dynamics model has no "nothing" to answer.

Frames are centre-cropped to the aspect of the target size, then resized by the one resize
(`capture/frames.py`; a 16:9 stream becomes the 4:3 view of the park's frames, with its sides cut, not squashed).
Bad input is a `UserError` that names the file: unreadable or corrupt, no video frames, a codec
ffmpeg cannot decode, frames smaller than the encoder's input.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec

VIDEO_SUFFIXES = frozenset({".mp4", ".mkv", ".avi", ".mov", ".webm", ".m4v", ".flv", ".ts", ".mpg", ".mpeg", ".wmv"})
"""File endings `video_files` takes from a folder (a file named on its own may end in anything)."""


@dataclass(frozen=True)
class VideoInfo:
    """What ffmpeg says of a video stream."""

    path: Path
    fps: float
    """Nominal frame rate of the stream (a variable-rate video is read at this rate)."""
    size: tuple[int, int]
    """Width, height of the decoded frames."""
    codec: str


def video_files(source: str | Path) -> list[Path]:
    """The videos to read: `source` itself when it is a file, else every file with a video
    ending under the folder (subfolders too), sorted; `NAME.partial.mp4`, a video `write_video`
    had not finished, is left out."""
    source = Path(source)
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise UserError(f"--from-video {source}: no such file or folder")
    found = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES
                   and not p.stem.endswith(".partial"))
    if not found:
        raise UserError(f"--from-video {source}: no video files in it (looked for {', '.join(sorted(VIDEO_SUFFIXES))})")
    return found


def _ffmpeg_reason(error: Exception) -> str:
    """The line of ffmpeg's stderr that says what went wrong."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    useful = [ln for ln in lines if "rror" in ln or "no decoder" in ln.lower() or "not contain" in ln or "no packets" in ln]
    return (useful or lines or ["no message"])[-1]


def _user_error(path: Path, error: Exception) -> UserError:
    text = str(error)
    low = text.lower()
    if "no decoder found" in low or "decoder not found" in low or "unknown codec" in low:
        return UserError(f"video {path}: its codec is not one this ffmpeg can decode; re-encode it (e.g. to H.264 mp4)")
    if "does not contain any stream" in low or "received no packets" in low or "end of file" in low:
        return UserError(f"video {path}: it has no video frames")
    return UserError(f"video {path}: not a readable video ({_ffmpeg_reason(error)}); check the file or re-export it")


class VideoStream:
    """The decoded frames of one video (uint8 H×W×3, RGB), read as they are iterated; `close()`
    stops ffmpeg early. Decoding errors become one-line `UserError`s naming the file."""

    def __init__(self, reader, info: VideoInfo) -> None:
        self._reader = reader
        self.info = info

    def __iter__(self) -> Iterator[np.ndarray]:
        width, height = self.info.size
        count = 0
        try:
            for raw in self._reader:
                count += 1
                yield np.frombuffer(raw, np.uint8).reshape(height, width, 3)
        except (OSError, RuntimeError) as e:
            raise _user_error(self.info.path, e) from None
        finally:
            self.close()
        if count == 0:
            raise UserError(f"video {self.info.path}: it has no video frames")

    def close(self) -> None:
        self._reader.close()


def open_video(path: str | Path) -> VideoStream:
    """Open a video with ffmpeg (imageio-ffmpeg) and read its stream's info; a file ffmpeg cannot
    open is a one-line `UserError` naming it."""
    import imageio_ffmpeg

    path = Path(path)
    if not path.is_file():
        raise UserError(f"video {path}: no such file")
    if path.stat().st_size == 0:
        raise UserError(f"video {path}: the file is empty")
    reader = imageio_ffmpeg.read_frames(str(path))
    try:
        meta = next(reader)
    except (OSError, RuntimeError, StopIteration) as e:
        reader.close()
        raise _user_error(path, e) from None
    width, height = (int(v) for v in meta["size"])
    fps = float(meta.get("fps") or 0)
    if not (math.isfinite(fps) and fps > 0):
        reader.close()
        raise UserError(f"video {path}: ffmpeg reports no frame rate; re-export it with a constant frame rate")
    return VideoStream(reader, VideoInfo(path=path, fps=fps, size=(width, height), codec=str(meta.get("codec", "?"))))


def _rate(fps: float) -> Fraction:
    return Fraction(fps).limit_denominator(1001)


def resample_counts(source_fps: float, target_fps: float) -> Iterator[int]:
    """For source frames 0, 1, 2, …: how many control steps each one is the frame on screen for.

    Step `k` happens at `k / target_fps`; source frame `i` is on screen during
    `[i / source_fps, (i+1) / source_fps)`. Exact in fractions, so 30 fps to 10 keeps every third
    frame with no drift over hours."""
    ratio = _rate(target_fps) / _rate(source_fps)  # steps per source frame
    i = 0
    while True:
        yield math.ceil((i + 1) * ratio) - math.ceil(i * ratio)
        i += 1


def fit_frame(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Centre-crop `frame` to the aspect of `size` (width, height), then resize to it (the one resize, `capture/frames.py`)."""
    width, height = size
    h, w = frame.shape[:2]
    if w * height > h * width:  # wider than the target: cut the sides
        keep = max(1, round(h * width / height))
        x0 = (w - keep) // 2
        frame = frame[:, x0 : x0 + keep]
    elif w * height < h * width:  # taller: cut top and bottom
        keep = max(1, round(w * height / width))
        y0 = (h - keep) // 2
        frame = frame[y0 : y0 + keep]
    return np.ascontiguousarray(FrameSpec(width, height).resize(frame))


def cropped_size(source: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """Width, height of the centre crop `fit_frame` takes from a `source`-sized frame."""
    w, h = source
    width, height = size
    if w * height > h * width:
        return max(1, round(h * width / height)), h
    if w * height < h * width:
        return w, max(1, round(w * height / width))
    return w, h


def control_rate_frames(path: str | Path, fps: float, size: tuple[int, int], min_side: int = 1) -> tuple[VideoInfo, Iterator[np.ndarray]]:
    """A video's frames at `fps`, cropped and resized to `size`; refused (one line naming the
    file) when its frame rate is below `fps` or its crop is smaller than `min_side` pixels a side."""
    stream = open_video(path)
    info = stream.info
    crop = cropped_size(info.size, size)
    if min(crop) < min_side:
        stream.close()
        raise UserError(f"video {info.path}: {info.size[0]}×{info.size[1]} pixels ({crop[0]}×{crop[1]} once cropped to "
                        f"{size[0]}:{size[1]}), smaller than the encoder's {min_side}×{min_side} input; use larger footage")
    if info.fps < fps * (1 - 1e-3):
        stream.close()
        raise UserError(f"video {info.path}: {info.fps:g} frames a second, fewer than the control rate {fps:g}; "
                        "repeated frames would be steps in which nothing moved. Use footage at the control rate or faster")

    def resampled() -> Iterator[np.ndarray]:
        for frame, n in zip(stream, resample_counts(info.fps, fps)):
            if n:
                fitted = fit_frame(frame, size)
                for _ in range(n):
                    yield fitted

    return info, resampled()


def write_video(path: str | Path, frames: Iterable[np.ndarray], fps: float, quality: float = 5.0) -> Path:
    """Encode uint8 H×W×3 frames as an H.264 mp4 at `fps`, atomically (`NAME.partial.mp4`, then
    renamed). `quality` is imageio-ffmpeg's 1–10 scale (5: its default, a typical screen recording)."""
    import imageio_ffmpeg

    path = Path(path)
    tmp = path.with_name(path.stem + ".partial" + path.suffix)
    writer = None
    try:
        for frame in frames:
            if writer is None:
                h, w = frame.shape[:2]
                writer = imageio_ffmpeg.write_frames(str(tmp), (w, h), fps=fps, quality=quality, macro_block_size=2,
                                                     codec="libx264", ffmpeg_log_level="error")
                writer.send(None)
            writer.send(np.ascontiguousarray(frame, dtype=np.uint8))
        if writer is None:
            raise UserError(f"video {path}: no frames to write")
        writer.close()
        writer = None
        os.replace(tmp, path)
    finally:
        if writer is not None:
            writer.close()
        if tmp.exists():
            tmp.unlink()
    return path


def episode_video(folder: str | Path, path: str | Path | None = None) -> Path:
    """Render a demo episode's frames to an mp4 at its control rate: `NAME.mp4` beside the
    episode folder unless `path` is given (footage whose true actions are known)."""
    from playtester.datasets.episodes import Episode

    ep = Episode.open(folder)
    target = Path(path) if path is not None else ep.path.with_name(ep.name + ".mp4")
    return write_video(target, (ep.frames[t] for t in range(len(ep))), float(ep.meta["fps"]))
