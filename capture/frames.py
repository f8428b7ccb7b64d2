"""The frame pipeline's one owner: what size a network sees frames at, and the one resize.

`FrameSpec` is the size of the frames a network takes. It is saved once, in the encoder's
checkpoint (`EncoderConfig.frames`), and everything built on that encoder inherits it: the
imitation policy, the explorer's PPO and its RND read the encoder's spec instead of restating a
size (a checkpoint from before the spec existed builds it from its old `image_size`).

`resize(frame, size)` is the one implementation that scales a game frame for a network: the
game's env wrapper (`capture/wrappers.py ResizeFrame`), window capture (`capture/window/grab.py`),
episodes cut from videos, the encoder's and IDM's training pairs, the imitation policy's input,
RND's input and the population's evaluation all call it, so a frame looks the same to a model
wherever it comes from.

Sizes are `(width, height)`, as OpenCV and screens give them, everywhere in the code;
arrays are `height × width × channels`.

Drawing for people is not the model-input path and keeps its own filters: the report's maps
(`playtester/report/maps.py`, nearest-neighbour blow-ups), the identity crops of found objects
(`playtester/tester/identity.py`), the coverage thumbnails (`playtester/report/coverage.py`,
`playtester/evolution/state_coverage.py`: tiny grey cells that count where the player has been, not
network input) and the park's low-resolution sprites (`capture/park/sprites.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import cv2
import numpy as np


@dataclass(frozen=True)
class FrameSpec:
    """The frames a network takes: `width × height` RGB, uint8."""

    width: int = 128
    height: int = 128

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))
        if self.width < 1 or self.height < 1:
            raise ValueError(f"frame size {self.width}×{self.height}: both sides need at least 1 pixel")

    @classmethod
    def square(cls, side: int) -> "FrameSpec":
        return cls(int(side), int(side))

    @property
    def size(self) -> tuple[int, int]:
        """`(width, height)`."""
        return self.width, self.height

    @property
    def shape(self) -> tuple[int, int, int]:
        """The array shape of one frame: `(height, width, 3)`."""
        return self.height, self.width, 3

    @property
    def side(self) -> int:
        """The side of a square spec (the networks here take square frames)."""
        if self.width != self.height:
            raise ValueError(f"frame size {self.width}×{self.height} is not square")
        return self.width

    def fits(self, frame: np.ndarray) -> bool:
        """Whether `frame` (`H×W×C`) has this size already."""
        return tuple(frame.shape[:2]) == (self.height, self.width)

    def resize(self, frame: np.ndarray, scratch: Callable[[tuple[int, ...]], np.ndarray] | None = None) -> np.ndarray:
        """`frame` at this size (itself when it has it already); see `resize`."""
        return frame if self.fits(frame) else resize(frame, self.size, scratch)

    def resize_batch(self, frames: np.ndarray) -> np.ndarray:
        """`B×H×W×C` frames at this size."""
        if frames.shape[1:3] == (self.height, self.width):
            return frames
        out = np.stack([resize(f, self.size) for f in frames]) if len(frames) else np.zeros((0, self.height, self.width), frames.dtype)
        return out.reshape(len(frames), self.height, self.width, *frames.shape[3:])  # OpenCV drops a channel axis of 1

    def to_dict(self) -> dict[str, int]:
        return {"width": self.width, "height": self.height}

    @classmethod
    def from_dict(cls, d: "dict[str, Any] | FrameSpec") -> "FrameSpec":
        if isinstance(d, FrameSpec):
            return d
        return cls(int(d["width"]), int(d["height"]))

    @classmethod
    def from_config(cls, config: dict[str, Any], old_key: str, default: int) -> "FrameSpec":
        """The spec a saved config holds: its `frames` entry, else (a config from before the spec)
        a square of its old `old_key` side, else of `default`."""
        if config.get("frames") is not None:
            return cls.from_dict(config["frames"])
        return cls.square(config.get(old_key) or default)


def saved_frames(config: dict[str, Any], old_key: str) -> dict[str, Any]:
    """A saved config (a checkpoint's) as today's dataclass takes it: a config from before the spec
    kept a square's side as `old_key` (e.g. `frame_size: 64`), read back as its `frames` spec."""
    if old_key not in config:
        return config
    config = dict(config)
    side = config.pop(old_key)
    config.setdefault("frames", FrameSpec.square(side))
    return config


def resize(frame: np.ndarray, size: tuple[int, int], scratch: Callable[[tuple[int, ...]], np.ndarray] | None = None) -> np.ndarray:
    """`frame` (`H×W×C` or `H×W`, uint8) resized to `size` = (width, height), area-averaged when it shrinks.

    A shrink halves the frame with exact 2-pixel averages (a bilinear resize at exactly half size
    averages each pair: a box filter) while a side is at least twice its target, then takes one
    bilinear step for the factor left, below 2: mip-mapping. Halving gives `cv2.INTER_AREA`'s
    pixels (by 4, 8, …: within one grey level, each halving rounds); at other ratios it is within about 1.5 grey levels on average of
    `cv2.INTER_AREA` (640×480 game frame → 128×128), at a third of its cost
    (`scripts/bench_capture.py`). Growing, or a mixed change (one side grows), is `cv2.INTER_AREA`
    itself. `scratch(shape)`, when given, supplies the output buffers (reused from frame to frame).
    """

    def step(src: np.ndarray, w: int, h: int, interpolation: int) -> np.ndarray:
        if scratch is None:
            return cv2.resize(src, (w, h), interpolation=interpolation)
        return cv2.resize(src, (w, h), dst=scratch((h, w, *src.shape[2:])), interpolation=interpolation)

    w, h = int(size[0]), int(size[1])
    if frame.shape[1] < w or frame.shape[0] < h:
        return step(frame, w, h, cv2.INTER_AREA)
    while frame.shape[1] >= 2 * w or frame.shape[0] >= 2 * h:
        half_w = frame.shape[1] // 2 if frame.shape[1] >= 2 * w else frame.shape[1]
        half_h = frame.shape[0] // 2 if frame.shape[0] >= 2 * h else frame.shape[0]
        even = frame[: half_h * (frame.shape[0] // half_h), : half_w * (frame.shape[1] // half_w)]
        frame = step(even, half_w, half_h, cv2.INTER_LINEAR)
    if (frame.shape[1], frame.shape[0]) != (w, h):
        frame = step(frame, w, h, cv2.INTER_LINEAR)
    return frame


LUMA = (299, 587, 114)
"""ITU-R BT.601 luma weights in thousandths: `Y = 0.299 R + 0.587 G + 0.114 B`."""


def grayscale(frames: np.ndarray) -> np.ndarray:
    """BT.601 luma of uint8 `…×3` frames, rounded, as uint8 of shape `…` (no channel axis)."""
    f = frames.astype(np.uint32)
    y = (LUMA[0] * f[..., 0] + LUMA[1] * f[..., 1] + LUMA[2] * f[..., 2] + 500) // 1000
    return y.astype(np.uint8)


def pixel_box(box: Sequence[float] | None, width: int, height: int) -> tuple[int, int, int, int]:
    """The box as whole pixels clipped to a `width`×`height` frame; empty (0,0,0,0) for None."""
    if box is None or any(not math.isfinite(float(v)) for v in box):
        return 0, 0, 0, 0
    x0, y0, x1, y1 = (float(v) for v in box)
    x0i = min(max(math.floor(x0), 0), width)
    y0i = min(max(math.floor(y0), 0), height)
    x1i = min(max(math.ceil(x1), x0i), width)
    y1i = min(max(math.ceil(y1), y0i), height)
    return x0i, y0i, x1i, y1i
