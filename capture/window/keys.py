"""Keys on a real desktop: sending them safely (`KeySender`) and hearing a human's (`KeyListener`).

Sending goes through pynput, imported here only, when a window backend is used. `KeySender` is
the one place a key is pressed: it sends only the keys it was built with (the key map's) and
releases every held key on `close()`, at interpreter exit, on SIGTERM and when a press fails —
a key left down on a tester's desktop keeps typing into whatever has the focus.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import weakref
from typing import Callable, Iterable

from playtester.errors import UserError
from playtester.capture.keymap import KEY_ALIASES, KEY_NAMES
from playtester.capture.window.platform import Keyboard

_PUNCTUATION = {
    "minus": "-", "equal": "=", "comma": ",", "period": ".", "slash": "/", "semicolon": ";",
    "quote": "'", "backslash": "\\", "bracket_left": "[", "bracket_right": "]", "grave": "`",
}
_CHAR_NAMES = {c: n for n, c in _PUNCTUATION.items()}
_SPECIAL = {"super": "cmd"}  # canonical name -> pynput Key attribute, where they differ


def _pynput():
    try:
        from pynput import keyboard
    except ImportError as e:  # pynput refuses to import without a display
        raise UserError(f"keyboard injection is unavailable: {str(e).splitlines()[0]}; is DISPLAY right?") from None
    return keyboard


def pynput_key(name: str):
    """The pynput key for a canonical key name.

    On X11 every key is given by its keysym (`KeyCode.from_vk`), so that pynput sends it through
    XTest, as a real keyboard would: for a character key it would otherwise send a synthetic
    event to the focused window, which many games ignore and the keyboard state never shows.
    """
    kb = _pynput()
    if sys.platform.startswith("linux"):
        from Xlib import XK

        from playtester.capture.window.x11 import x_keysym_name

        return kb.KeyCode.from_vk(XK.string_to_keysym(x_keysym_name(name)))
    if len(name) == 1:
        return kb.KeyCode.from_char(name)
    if name in _PUNCTUATION:
        return kb.KeyCode.from_char(_PUNCTUATION[name])
    attr = _SPECIAL.get(name, name)
    if not hasattr(kb.Key, attr):
        raise UserError(f"key {name!r} cannot be sent on this desktop (pynput has no Key.{attr})")
    return getattr(kb.Key, attr)


def key_name(key) -> str | None:
    """The canonical name of a pynput key event, or None for keys outside `KEY_NAMES`."""
    name = getattr(key, "name", None)  # a pynput Key (special key)
    if name is None:
        char = getattr(key, "char", None)
        if not char:
            return None
        char = char.lower()
        name = _CHAR_NAMES.get(char, char)
    name = KEY_ALIASES.get(name, name)
    if name not in KEY_NAMES and name.endswith(("_l", "_r")):
        name = KEY_ALIASES.get(name[:-2], name[:-2])
    return name if name in KEY_NAMES else None


class PynputKeyboard(Keyboard):
    """`Keyboard` through pynput's controller (XTest on X11, SendInput on Windows, Quartz on macOS)."""

    def __init__(self) -> None:
        self._controller = _pynput().Controller()
        self._keys: dict[str, object] = {}

    def _key(self, name: str):
        if name not in self._keys:
            self._keys[name] = pynput_key(name)
        return self._keys[name]

    def press(self, key: str) -> None:
        self._controller.press(self._key(key))

    def release(self, key: str) -> None:
        self._controller.release(self._key(key))

    def close(self) -> None:
        # pynput's controller keeps an X connection until it is garbage-collected, and then
        # closes it even when the display has gone; close it now, once.
        display = getattr(self._controller, "_display", None)
        if display is not None:
            try:
                display.close()
            except Exception:
                pass
            del self._controller._display


_live_senders: "weakref.WeakSet[KeySender]" = weakref.WeakSet()
_sigterm_installed = False


def _release_everywhere() -> None:
    for sender in list(_live_senders):
        try:
            sender.release_all()
        except Exception:  # the display may be gone already; the other senders still get their turn
            pass


def _on_sigterm(signum, frame):  # turn SIGTERM into SystemExit so that `finally` and atexit run
    _release_everywhere()
    raise SystemExit(128 + signum)


def _install_sigterm_handler() -> None:
    """Release keys on SIGTERM too, unless the program already handles SIGTERM itself."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_installed = True


atexit.register(_release_everywhere)


class KeySender:
    """Holds exactly the keys asked for, sends no key outside `allowed`, releases all on close."""

    def __init__(self, keyboard: Keyboard, allowed: Iterable[str]) -> None:
        self.keyboard = keyboard
        self.allowed = frozenset(allowed)
        self.held: list[str] = []
        self._lock = threading.RLock()
        _live_senders.add(self)
        _install_sigterm_handler()
        if sys.platform.startswith("linux") and os.environ.get("DISPLAY"):  # a SIGKILL runs no handler: the watchdog lets go
            from playtester.capture.engine_guard import EngineWatchdog
            from playtester.capture.window.x11 import X_KEYSYMS

            EngineWatchdog.here().release_on_exit(os.environ["DISPLAY"], [X_KEYSYMS[k][0] for k in sorted(self.allowed)
                                                                          if k in X_KEYSYMS])

    def hold(self, keys: Iterable[str]) -> None:
        """Release the held keys not in `keys`, then press those of `keys` not yet held."""
        wanted = list(dict.fromkeys(keys))
        outside = [k for k in wanted if k not in self.allowed]
        if outside:
            self.release_all()  # a caller gone wrong: stop pressing anything
            raise ValueError(f"refused to send {', '.join(outside)}: not a key of the key map")
        with self._lock:
            try:
                for key in [k for k in self.held if k not in wanted]:
                    self.keyboard.release(key)
                    self.held.remove(key)
                for key in wanted:
                    if key not in self.held:
                        self.held.append(key)  # counted as held before the press, so a failed press is released too
                        self.keyboard.press(key)
            except BaseException:
                self.release_all()
                raise

    def release_all(self) -> None:
        """Release every held key, newest first; keeps going if one release fails."""
        with self._lock:
            errors = []
            for key in reversed(self.held):
                try:
                    self.keyboard.release(key)
                except Exception as e:  # the others must still be released
                    errors.append(e)
            self.held = []
        if errors:
            raise errors[0]

    def close(self) -> None:
        try:
            self.release_all()
        finally:
            _live_senders.discard(self)
            self.keyboard.close()


class KeyListener:
    """The keys a human holds now, in press order, and callbacks for hotkeys.

    Runs pynput's listener thread (the RECORD extension on X11): it hears keys whichever window
    has the focus, so hotkeys work while the game has it. X11 autorepeat may send a release
    immediately followed by a press; a key re-pressed within `repeat_gap` keeps its place.
    """

    def __init__(self, hotkeys: dict[str, Callable[[], None]] | None = None, *, repeat_gap: float = 0.05) -> None:
        self.hotkeys = dict(hotkeys or {})
        self.repeat_gap = repeat_gap
        self._down: dict[str, float] = {}  # key -> time of its (first) press
        self._released: dict[str, tuple[float, float]] = {}  # key -> (press time, release time)
        self._lock = threading.Lock()
        self._listener = None

    def start(self) -> "KeyListener":
        kb = _pynput()
        self._listener = kb.Listener(on_press=self._on_press, on_release=self._on_release)
        self._listener.start()
        self._listener.wait()
        return self

    def _on_press(self, key) -> None:
        name = key_name(key)
        if name is None:
            return
        now = time.monotonic()
        with self._lock:
            if name in self._down:
                return  # autorepeat without a release
            pressed, released = self._released.pop(name, (now, -1.0))
            fresh = now - released > self.repeat_gap
            self._down[name] = now if fresh else pressed
        if fresh and name in self.hotkeys:
            self.hotkeys[name]()

    def _on_release(self, key) -> None:
        name = key_name(key)
        if name is None:
            return
        with self._lock:
            pressed = self._down.pop(name, None)
            if pressed is not None:
                self._released[name] = (pressed, time.monotonic())

    def held(self) -> list[str]:
        """Keys held now, oldest press first (a key released under `repeat_gap` ago still counts)."""
        now = time.monotonic()
        with self._lock:
            down = dict(self._down)
            for name, (pressed, released) in self._released.items():
                if now - released <= self.repeat_gap:
                    down.setdefault(name, pressed)
        return sorted(down, key=down.__getitem__)

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener.join(timeout=2)
            self._listener = None
