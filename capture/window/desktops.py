"""The desktop and keyboard of this session: the implementation of `platform.Desktop` and
`platform.Keyboard` for this system, imported only when a window backend is actually used (a
display library needs a display to import at all)."""

from __future__ import annotations

import sys

from playtester.capture.window.platform import Desktop, Keyboard


def open_desktop() -> Desktop:
    """The desktop of this session; a `UserError` says what is missing when there is none."""
    if sys.platform.startswith("linux"):
        from playtester.capture.window.x11 import X11Desktop

        return X11Desktop()
    from playtester.capture.window.pywinctl_desktop import PyWinCtlDesktop

    return PyWinCtlDesktop()


def open_keyboard() -> Keyboard:
    """Key injection through pynput, imported only now (it needs a display to import at all)."""
    from playtester.capture.window.keys import PynputKeyboard

    return PynputKeyboard()
