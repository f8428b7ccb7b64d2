"""Screen grabs of a window's client area as RGB frames, through mss (imported here only).

The capture path: grab the region (clipped to the screen: a window partly off screen gives a
frame with black where the screen ends), resize to a fixed size when asked (a resized window
keeps the observation's shape; `capture/frames.py resize`, the one resize), convert BGRA to RGB.
"""

from __future__ import annotations

import cv2
import numpy as np

from playtester.errors import UserError
from playtester.capture.frames import resize


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
            bgra = resize(bgra, self.size, scratch=self._scratch_buffer)  # 4 channels, then convert
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
