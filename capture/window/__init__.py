"""Any game in a window: capture (mss), key injection (pynput), the desktop's windows (X11 first).

`WindowGame` is the backend (`window:TITLE`); `recorder.py` is the capture app behind
`playtester record`; `replay.py` re-sends a recorded episode. Importing this package loads no
display library: they are imported when a window is actually opened.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:  # keep `import playtester.capture.window` free of gym and cv2
    if name == "WindowGame":
        from playtester.capture.window.game import WindowGame

        return WindowGame
    raise AttributeError(name)
