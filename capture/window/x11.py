"""The X11 desktop through python-xlib: window list, geometry, focus, owning process, held keys.

Works with and without a window manager: EWMH's `_NET_CLIENT_LIST` when a manager publishes it,
otherwise a walk of the root's children (Xvfb alone, or a manager without EWMH). The process of
a window is its `_NET_WM_PID` property.
"""

from __future__ import annotations

import os

from playtester.errors import UserError
from playtester.capture.window.platform import Desktop, WindowInfo

NO_DISPLAY = (
    "no X display: DISPLAY is not set. Run where the game's window is shown, or start a virtual "
    "screen with Xvfb (e.g. `xvfb-run -a playtester …`, or `Xvfb :99 & export DISPLAY=:99`)"
)

X_KEYSYMS: dict[str, tuple[str, ...]] = {
    **{c: (c,) for c in "abcdefghijklmnopqrstuvwxyz0123456789"},
    **{f"f{i}": (f"F{i}",) for i in range(1, 25)},
    "space": ("space",), "enter": ("Return", "KP_Enter"), "tab": ("Tab", "ISO_Left_Tab"),
    "esc": ("Escape",), "backspace": ("BackSpace",), "delete": ("Delete",), "insert": ("Insert",),
    "home": ("Home",), "end": ("End",), "page_up": ("Prior",), "page_down": ("Next",),
    "left": ("Left",), "right": ("Right",), "up": ("Up",), "down": ("Down",),
    "shift": ("Shift_L", "Shift_R"), "ctrl": ("Control_L", "Control_R"),
    "alt": ("Alt_L", "Alt_R", "ISO_Level3_Shift", "Meta_L", "Meta_R"), "super": ("Super_L", "Super_R"),
    "caps_lock": ("Caps_Lock",), "minus": ("minus",), "equal": ("equal",), "comma": ("comma",),
    "period": ("period",), "slash": ("slash",), "semicolon": ("semicolon",), "quote": ("apostrophe",),
    "backslash": ("backslash",), "bracket_left": ("bracketleft",), "bracket_right": ("bracketright",),
    "grave": ("grave",),
}
"""Canonical key names and the X keysym names that stand for them (the first is the one to send)."""


def x_keysym_name(key: str) -> str:
    """The X keysym name for a canonical key name (`left` → `Left`), as xdotool takes it."""
    return X_KEYSYMS[key][0]


class X11Desktop(Desktop):
    name = "X11"

    def __init__(self, display_name: str | None = None) -> None:
        from Xlib import X, XK, display, error

        self._X, self._error = X, error
        display_name = display_name or os.environ.get("DISPLAY")
        if not display_name:
            raise UserError(NO_DISPLAY)
        try:
            self.display = display.Display(display_name)
        except (error.DisplayError, OSError) as e:
            raise UserError(
                f"cannot open the X display DISPLAY={display_name!r} ({e}); check that it runs, "
                "or start one with Xvfb (`xvfb-run -a playtester …`)"
            ) from None
        self.root = self.display.screen().root
        self._atoms: dict[str, int] = {}
        self._keysym_names = {
            XK.string_to_keysym(xname): key for key, xnames in X_KEYSYMS.items() for xname in xnames
        }

    # -- properties -----------------------------------------------------------------------------
    def _atom(self, name: str) -> int:
        if name not in self._atoms:
            self._atoms[name] = self.display.intern_atom(name)
        return self._atoms[name]

    def _prop(self, window, name: str, kind: int | None = None):
        prop = window.get_full_property(self._atom(name), kind if kind is not None else self._X.AnyPropertyType)
        return prop.value if prop is not None else None

    def _title(self, window) -> str:
        value = self._prop(window, "_NET_WM_NAME", self._atom("UTF8_STRING"))
        if not value:
            value = self._prop(window, "WM_NAME")
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return str(value or "")

    def _pid(self, window) -> int | None:
        value = self._prop(window, "_NET_WM_PID", self._X.AnyPropertyType)
        return int(value[0]) if value is not None and len(value) else None

    def _obj(self, handle: int):
        return self.display.create_resource_object("window", int(handle))

    def _gone(self) -> tuple[type[Exception], ...]:
        e = self._error
        return (e.BadWindow, e.BadDrawable, e.BadMatch, e.BadValue)

    # -- Desktop --------------------------------------------------------------------------------
    def windows(self) -> list[WindowInfo]:
        clients = self._prop(self.root, "_NET_CLIENT_LIST_STACKING") or self._prop(self.root, "_NET_CLIENT_LIST")
        handles = [int(h) for h in clients] if clients is not None and len(clients) else self._walk()
        found = []
        for handle in handles:
            info = self.window(handle, viewable_only=True)
            if info is not None and info.title and info.width > 1 and info.height > 1:
                found.append(info)
        return found

    def _walk(self) -> list[int]:
        """Top-level client windows without EWMH: root's children, or a frame's titled child."""
        handles = []
        try:
            children = self.root.query_tree().children  # bottom to top
        except self._gone():
            return handles
        for child in children:
            try:
                if self._title(child):
                    handles.append(child.id)
                    continue
                handles.extend(c.id for c in child.query_tree().children if self._title(c))
            except self._gone():
                continue
        return handles

    def window(self, handle: int, *, viewable_only: bool = False) -> WindowInfo | None:
        win = self._obj(handle)
        try:
            if viewable_only and win.get_attributes().map_state != self._X.IsViewable:
                return None
            geom = win.get_geometry()
            origin = self.root.translate_coords(win, 0, 0)
            return WindowInfo(
                handle=int(handle), title=self._title(win), pid=self._pid(win),
                left=int(origin.x), top=int(origin.y), width=int(geom.width), height=int(geom.height),
            )
        except self._gone():
            return None

    def activate(self, handle: int) -> bool:
        from Xlib import protocol

        X = self._X
        win = self._obj(handle)
        try:
            if win.get_attributes().map_state != X.IsViewable:
                return False
            supported = self._prop(self.root, "_NET_SUPPORTED")
            if supported is not None and self._atom("_NET_ACTIVE_WINDOW") in supported:
                event = protocol.event.ClientMessage(
                    window=win, client_type=self._atom("_NET_ACTIVE_WINDOW"),
                    data=(32, [2, X.CurrentTime, 0, 0, 0]),  # 2: a request from a pager-like tool
                )
                self.root.send_event(event, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
            catch = self._error.CatchError(*self._gone())
            win.configure(stack_mode=X.Above, onerror=catch)
            win.set_input_focus(X.RevertToParent, X.CurrentTime, onerror=catch)
            self.display.sync()
        except self._gone():
            return False
        return self.has_focus(handle)

    def has_focus(self, handle: int) -> bool:
        try:
            focus = self.display.get_input_focus().focus
            if isinstance(focus, int):  # None or PointerRoot: no window holds the focus
                return False
            window = focus
            for _ in range(32):  # the focus may sit on a child of the game's window
                if window.id == handle:
                    return True
                tree = window.query_tree()
                if tree.parent == 0 or tree.parent.id == self.root.id:
                    break
                window = tree.parent
            active = self._prop(self.root, "_NET_ACTIVE_WINDOW")
            return active is not None and len(active) > 0 and int(active[0]) == handle
        except self._gone():
            return False

    def keys_down(self) -> set[str]:
        held = set()
        for byte_index, byte in enumerate(self.display.query_keymap()):
            for bit in range(8):
                if byte & (1 << bit):
                    keycode = byte_index * 8 + bit
                    keysym = self.display.keycode_to_keysym(keycode, 0)
                    held.add(self._keysym_names.get(keysym, f"keycode {keycode}"))
        return held

    def close(self) -> None:
        display = getattr(self, "display", None)
        if display is not None:
            display.close()
            self.display = None
