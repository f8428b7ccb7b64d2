"""Screen grabs of a window's client area as RGB frames, through mss (imported here only).

The capture path: grab the region (clipped to the screen: a window partly off screen gives a
frame with black where the screen ends), resize to a fixed size when asked (a resized window
keeps the observation's shape; see `mipmap_resize`), convert BGRA to RGB.
"""

from __future__ import annotations

import cv2
import numpy as np

from playtester.capture.errors import UserError


def open_mss():
    """An mss screen grabber (mss 10 calls it `MSS`, older releases `mss`)."""
    try:
        import mss
    except ImportError:
        raise UserError("screen capture needs mss: pip install mss") from None
    factory = getattr(mss, "MSS", None) or mss.mss
    try:
        return factory()
    except mss.exception.ScreenShotError as e:
        raise UserError(
            f"cannot grab the screen ({e}); is DISPLAY set to a running display? "
            "On a server start one with Xvfb (`xvfb-run -a playtester …`)"
        ) from None


class FrameGrabber:
    """Grabs screen regions as `uint8 H×W×3` RGB; one per thread (mss handles are per thread)."""

    def __init__(self, size: tuple[int, int] | None = None) -> None:
        """`size` is `(width, height)` of the frames returned; None keeps the region's own size."""
        self.size = size
        self._mss = open_mss()
        self._scratch: dict[tuple[int, ...], np.ndarray] = {}
        self.refresh_screen()

    def refresh_screen(self) -> None:
        """Re-read the screen's bounds (after a change of resolution)."""
        every = self._mss.monitors[0]  # the bounding box of all monitors
        self.screen = (int(every["left"]), int(every["top"]), int(every["width"]), int(every["height"]))

    def grab_raw(self, region: tuple[int, int, int, int]):
        """One mss grab of `region` as is: the yardstick the capture path is measured against."""
        x, y, w, h = region
        return self._mss.grab({"left": x, "top": y, "width": w, "height": h})

    def grab(self, region: tuple[int, int, int, int]) -> np.ndarray:
        """The RGB frame of `(left, top, width, height)` on the screen."""
        x, y, w, h = region
        sx, sy, sw, sh = self.screen
        x0, y0 = max(x, sx), max(y, sy)
        x1, y1 = min(x + w, sx + sw), min(y + h, sy + sh)
        if (x0, y0, x1, y1) == (x, y, x + w, y + h):
            shot = self._mss.grab({"left": x, "top": y, "width": w, "height": h})
            bgra = np.frombuffer(shot.raw, dtype=np.uint8).reshape(h, w, 4)
        else:
            bgra = np.zeros((h, w, 4), dtype=np.uint8)  # what lies off the screen stays black
            if x1 > x0 and y1 > y0:
                shot = self._mss.grab({"left": x0, "top": y0, "width": x1 - x0, "height": y1 - y0})
                visible = np.frombuffer(shot.raw, dtype=np.uint8).reshape(shot.height, shot.width, 4)
                bgra[y0 - y : y1 - y, x0 - x : x1 - x] = visible
        if self.size is not None and (w, h) != tuple(self.size):
            bgra = mipmap_resize(bgra, self.size, scratch=self._scratch_buffer)  # 4 channels, then convert
        return cv2.cvtColor(bgra, cv2.COLOR_BGRA2RGB)

    def _scratch_buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """A buffer kept between grabs: a fresh large array each frame costs page faults."""
        buf = self._scratch.get(shape)
        if buf is None:
            buf = self._scratch[shape] = np.empty(shape, dtype=np.uint8)
        return buf

    def close(self) -> None:
        if self._mss is not None:
            self._mss.close()
            self._mss = None


def mipmap_resize(frame: np.ndarray, size: tuple[int, int], scratch=None) -> np.ndarray:
    """`frame` resized to `size` = (width, height), area-averaged when it shrinks.

    A shrink halves the frame with exact 2-pixel averages (a bilinear resize at exactly half size
    averages each pair: a box filter) while a side is at least twice its target, then takes one
    bilinear step for the factor left, below 2: mip-mapping. On a 640×480 game frame to 128×128
    it is within about 1.5 grey levels on average of `cv2.INTER_AREA`, at a third of its cost
    (`scripts/bench_capture.py`). Growing, or a mixed change, uses `INTER_AREA` itself.
    `scratch(shape)`, when given, supplies the output buffers (reused from frame to frame).
    """

    def resize(src: np.ndarray, w: int, h: int, interpolation: int) -> np.ndarray:
        if scratch is None:
            return cv2.resize(src, (w, h), interpolation=interpolation)
        return cv2.resize(src, (w, h), dst=scratch((h, w, *src.shape[2:])), interpolation=interpolation)

    w, h = int(size[0]), int(size[1])
    if frame.shape[1] < w or frame.shape[0] < h:
        return resize(frame, w, h, cv2.INTER_AREA)
    while frame.shape[1] >= 2 * w or frame.shape[0] >= 2 * h:
        half_w = frame.shape[1] // 2 if frame.shape[1] >= 2 * w else frame.shape[1]
        half_h = frame.shape[0] // 2 if frame.shape[0] >= 2 * h else frame.shape[0]
        even = frame[: half_h * (frame.shape[0] // half_h), : half_w * (frame.shape[1] // half_w)]
        frame = resize(even, half_w, half_h, cv2.INTER_LINEAR)
    if (frame.shape[1], frame.shape[0]) != (w, h):
        frame = resize(frame, w, h, cv2.INTER_LINEAR)
    return frame
