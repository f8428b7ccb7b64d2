"""The small interface a desktop implements so that `WindowGame` can play a window on it.

A `Desktop` lists top-level windows, re-reads one window's client-area geometry, brings a window
to the front and says which process owns it. A `Keyboard` presses and releases one key by its
canonical name (see `playtester.capture.keymap`). Linux/X11 is first class (`x11.py`, through
python-xlib); other desktops plug in behind the same two classes (`pywinctl_desktop.py`).

Nothing here imports a display library: `open_desktop()` and `open_keyboard()` in
`desktops.py` do, when a window backend is actually used.
"""

from __future__ import annotations

import os
import re
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

from playtester.errors import UserError


@dataclass(frozen=True)
class WindowInfo:
    """A window as the desktop sees it now; `left, top` are screen coordinates of its client area."""

    handle: int
    title: str
    pid: int | None
    left: int
    top: int
    width: int
    height: int

    @property
    def region(self) -> tuple[int, int, int, int]:
        """`(left, top, width, height)` of the client area on the screen."""
        return self.left, self.top, self.width, self.height


class Desktop(ABC):
    """Window discovery and focus on one desktop session."""

    name: str = "desktop"

    @abstractmethod
    def windows(self) -> list[WindowInfo]:
        """The visible top-level windows that have a title, front-most last where known."""

    @abstractmethod
    def window(self, handle: int) -> WindowInfo | None:
        """A fresh reading of one window (it may have moved or been resized); None when it is gone."""

    @abstractmethod
    def activate(self, handle: int) -> bool:
        """Raise the window and give it the keyboard focus; True when it has the focus afterwards."""

    @abstractmethod
    def has_focus(self, handle: int) -> bool:
        """Whether key events go to this window now."""

    @abstractmethod
    def keys_down(self) -> set[str]:
        """Canonical names of the keys the desktop believes are held now (to prove none is stuck)."""

    def close(self) -> None:
        """Release the connection to the desktop."""


class Keyboard(ABC):
    """Synthetic key events by canonical key name."""

    @abstractmethod
    def press(self, key: str) -> None: ...

    @abstractmethod
    def release(self, key: str) -> None: ...

    def close(self) -> None:
        """Release the connection to the desktop."""


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    return True


def child_of_this_process(pid: int) -> bool:
    """Whether process `pid` descends from this one (Linux; False where that cannot be read)."""
    me = os.getpid()
    for _ in range(16):
        if pid == me:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid <= 1:
            return False
    return False


def find_window(desktop: Desktop, title: str, *, regex: bool = False, given_as: str | None = None,
                advice: str = "Start the game first, or give --region X,Y,W,H") -> WindowInfo:
    """The window whose title contains `title` (or matches the regular expression `title`).

    Several matches: the front-most one. No match: a `UserError` that lists the visible titles,
    so the user can copy the right one, then `advice`. Windows of processes that have ended are
    passed over. `given_as`: how the user gave the title, for the errors (default `--window TITLE`).
    """
    match = title_matcher(title, regex=regex, given_as=given_as)
    # A window whose process has died may linger a moment before the desktop removes it.
    windows = [w for w in desktop.windows() if w.pid is None or process_alive(w.pid)]
    found = [w for w in windows if match(w.title)]
    if found:
        return found[-1]
    raise UserError(f"no window title {'matches' if regex else 'contains'} {title!r}; visible windows: "
                    f"{visible_titles(windows)}. {advice}")


def title_matcher(title: str, *, regex: bool = False, given_as: str | None = None) -> Callable[[str], bool]:
    """Whether a window title is the one asked for: contains `title` (case-insensitive), or
    matches the regular expression `title`."""
    if regex:
        try:
            pattern = re.compile(title)
        except re.error as e:
            raise UserError(f"{given_as or f'--window {title!r}'}: not a valid regular expression ({e})") from None
        return lambda t: pattern.search(t) is not None
    needle = title.casefold()
    return lambda t: needle in t.casefold()


def visible_titles(windows: list[WindowInfo]) -> str:
    """The titles of `windows`, for an error a user can copy the right one from."""
    titles = sorted({w.title for w in windows})
    return "; ".join(repr(t) for t in titles[:20]) + (f"; … ({len(titles)} in all)" if len(titles) > 20 else "") or "none"
