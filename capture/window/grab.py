"""Screen grabs of a window's client area as RGB frames, through mss (imported here only).

The capture path: grab the region (clipped to the screen: a window partly off screen gives a
frame with black where the screen ends), convert BGRA to RGB, resize with `cv2.INTER_AREA` to a
fixed size when asked (a resized window keeps the observation's shape).
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
        if x1 <= x0 or y1 <= y0:
            frame = np.zeros((h, w, 3), dtype=np.uint8)  # entirely off screen
        else:
            shot = self._mss.grab({"left": x0, "top": y0, "width": x1 - x0, "height": y1 - y0})
            bgra = np.frombuffer(shot.raw, dtype=np.uint8).reshape(shot.height, shot.width, 4)
            rgb = cv2.cvtColor(bgra, cv2.COLOR_BGRA2RGB)
            if (x0, y0, x1, y1) == (x, y, x + w, y + h):
                frame = rgb
            else:
                frame = np.zeros((h, w, 3), dtype=np.uint8)
                frame[y0 - y : y1 - y, x0 - x : x1 - x] = rgb
        if self.size is not None and (frame.shape[1], frame.shape[0]) != tuple(self.size):
            frame = cv2.resize(frame, tuple(self.size), interpolation=cv2.INTER_AREA)
        return frame

    def close(self) -> None:
        if self._mss is not None:
            self._mss.close()
            self._mss = None
