"""Windows and macOS desktops through pywinctl, behind the same `Desktop` interface as X11.

Not exercised by this repository's tests (they run on Linux under Xvfb); it maps pywinctl's
window objects onto `WindowInfo` and nothing more. pywinctl is not a dependency: it is asked for
when a window game is used on such a desktop.
"""

from __future__ import annotations

from playtester.errors import UserError
from playtester.capture.window.platform import Desktop, WindowInfo


class PyWinCtlDesktop(Desktop):
    name = "pywinctl"

    def __init__(self) -> None:
        try:
            import pywinctl
        except ImportError:
            raise UserError("window games on this desktop need pywinctl: pip install pywinctl") from None
        self._pwc = pywinctl
        self._windows: dict[int, object] = {}

    def _info(self, win) -> WindowInfo:
        box = win.getClientFrame() if hasattr(win, "getClientFrame") else None
        if box is not None:
            left, top, width, height = box.left, box.top, box.right - box.left, box.bottom - box.top
        else:
            left, top, width, height = win.left, win.top, win.width, win.height
        pid = win.getPID() if hasattr(win, "getPID") else None
        handle = int(win.getHandle()) if hasattr(win, "getHandle") else id(win)
        self._windows[handle] = win
        return WindowInfo(handle, str(win.title), pid, int(left), int(top), int(width), int(height))

    def windows(self) -> list[WindowInfo]:
        return [self._info(w) for w in self._pwc.getAllWindows() if w.title and w.isVisible]

    def window(self, handle: int) -> WindowInfo | None:
        win = self._windows.get(handle)
        if win is None or not win.isAlive:
            return None
        return self._info(win)

    def activate(self, handle: int) -> bool:
        win = self._windows.get(handle)
        if win is None or not win.isAlive:
            return False
        win.activate(wait=True)
        return bool(win.isActive)

    def has_focus(self, handle: int) -> bool:
        win = self._windows.get(handle)
        return bool(win is not None and win.isAlive and win.isActive)

    def keys_down(self) -> set[str]:
        return set()  # not observable through pywinctl
