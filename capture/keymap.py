"""Key maps: the discrete action space as data.

A key map is an ordered list of actions; action `i` of `Discrete(n)` holds the keys of entry `i`
for one control step. Key names are lower-case and backend-neutral (`w`, `left`, `space`, `f8`);
each backend translates them (pynput keys for a window, engine buttons for ViZDoom).

Key maps that would send a system combination (Alt+F4, Ctrl+Q, Ctrl+W, the Super key,
Ctrl+Alt+anything, Esc) are refused unless `allow_system_keys: true` is set: a bot pressing them on a tester's desktop closes
windows and opens menus.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

import yaml

from playtester.errors import UserError
from playtester.files import read_yaml

_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
_DIGITS = [str(d) for d in range(10)]
_FUNCTION = [f"f{i}" for i in range(1, 25)]
_NAMED = [
    "space", "enter", "tab", "esc", "backspace", "delete", "insert", "home", "end",
    "page_up", "page_down", "left", "right", "up", "down",
    "shift", "ctrl", "alt", "super", "caps_lock",
    "minus", "equal", "comma", "period", "slash", "semicolon", "quote", "backslash",
    "bracket_left", "bracket_right", "grave",
]
KEY_NAMES: frozenset[str] = frozenset(_LETTERS + _DIGITS + _FUNCTION + _NAMED)
"""Every key name a key map may use."""

KEY_ALIASES: dict[str, str] = {
    "escape": "esc", "return": "enter", "control": "ctrl", "ctrl_l": "ctrl", "ctrl_r": "ctrl",
    "shift_l": "shift", "shift_r": "shift", "alt_l": "alt", "alt_r": "alt", "alt_gr": "alt",
    "cmd": "super", "win": "super", "windows": "super", "meta": "super",
    "arrow_left": "left", "arrow_right": "right", "arrow_up": "up", "arrow_down": "down",
    "spacebar": "space", "pageup": "page_up", "pagedown": "page_down", "del": "delete",
}


def normalise_key(name: str, *, where: str = "key map") -> str:
    """The canonical name of a key, or a `UserError` naming it and `where` it came from."""
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    key = KEY_ALIASES.get(key, key)
    if key not in KEY_NAMES:
        raise UserError(
            f"{where}: unknown key {name!r}; use one of a-z, 0-9, f1-f24, "
            f"{', '.join(_NAMED)}"
        )
    return key


def system_combination(keys: Iterable[str]) -> str | None:
    """Why a set of keys is a system combination, or None when it is harmless."""
    held = set(keys)
    if "super" in held:
        return "the Super key opens the desktop's menus"
    if "esc" in held:
        return "Esc opens the game's menu or leaves full screen"
    if "alt" in held and "f4" in held:
        return "Alt+F4 closes the window"
    if "ctrl" in held and "q" in held:
        return "Ctrl+Q quits the application"
    if "ctrl" in held and "w" in held:
        return "Ctrl+W closes the window or tab"
    if "ctrl" in held and "alt" in held:
        return "Ctrl+Alt combinations switch terminals or log out"
    if "alt" in held and "tab" in held:
        return "Alt+Tab switches windows"
    return None


@dataclass(frozen=True)
class KeyAction:
    """One discrete action: the keys held together for a control step."""

    name: str
    """Short name shown in logs and reports (`forward`, `turn_left`)."""
    keys: tuple[str, ...]
    """Canonical key names held for the step; empty means no key (a no-op)."""


@dataclass(frozen=True)
class KeyMap:
    """An ordered list of actions; index `i` is action `i` of the `Discrete(n)` space."""

    name: str
    actions: tuple[KeyAction, ...]
    allow_system_keys: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.actions:
            raise UserError(f"key map {self.name!r}: it has no actions; list at least one")
        names = [a.name for a in self.actions]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise UserError(f"key map {self.name!r}: action names repeat: {', '.join(duplicated)}")
        if not self.allow_system_keys:
            for action in self.actions:
                reason = system_combination(action.keys)
                if reason:
                    raise UserError(
                        f"key map {self.name!r}: action {action.name!r} sends "
                        f"{'+'.join(action.keys)} ({reason}); remove it, or allow it "
                        "explicitly with allow_system_keys: true"
                    )

    @property
    def n(self) -> int:
        """Number of actions."""
        return len(self.actions)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.actions]

    @property
    def keys(self) -> frozenset[str]:
        """Every key this map can ever press; a backend sends no other."""
        return frozenset(k for a in self.actions for k in a.keys)

    def keys_for(self, action: int) -> tuple[str, ...]:
        return self.actions[int(action)].keys

    def index(self, name: str) -> int:
        """The action index of an action name."""
        for i, a in enumerate(self.actions):
            if a.name == name:
                return i
        raise UserError(f"key map {self.name!r}: no action named {name!r}; it has {', '.join(self.names)}")

    def action_for_keys(self, held: Sequence[str]) -> int | None:
        """The action that a set of held keys stands for, or None when no action matches.

        The rule, used by the recorder to label frames: an action matches when all its keys are
        held; among matches the one with the most keys wins (W+Space beats W when both are
        actions); on a tie the action whose keys were pressed most recently wins. `held` is in
        press order, oldest first.
        """
        held_set = set(held)
        recency = {k: i for i, k in enumerate(held)}
        matches = [
            (len(a.keys), max(recency[k] for k in a.keys), -i)
            for i, a in enumerate(self.actions)
            if a.keys and set(a.keys) <= held_set
        ]
        return -max(matches)[2] if matches else None

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "actions": [{"name": a.name, "keys": list(a.keys)} for a in self.actions]}
        if self.allow_system_keys:
            out["allow_system_keys"] = True
        return out

    @property
    def fingerprint(self) -> str:
        """A short hash of the actions, equal for key maps that drive a game the same way."""
        body = json.dumps([list(a.keys) for a in self.actions]).encode()
        return hashlib.sha1(body).hexdigest()[:12]

    def same_actions(self, other: "KeyMap") -> bool:
        return [a.keys for a in self.actions] == [a.keys for a in other.actions]

    @classmethod
    def from_dict(cls, data: object, *, where: str = "key map") -> "KeyMap":
        if not isinstance(data, dict) or not isinstance(data.get("actions"), list):
            raise UserError(f"{where}: expected a mapping with an 'actions' list (see capture/keymaps/default.yaml)")
        name = str(data.get("name", "custom"))
        actions = []
        for i, entry in enumerate(data["actions"]):
            if not isinstance(entry, dict) or "keys" not in entry:
                raise UserError(f"{where}: action {i} needs 'name' and 'keys' (a list of key names)")
            raw = entry["keys"]
            raw = [raw] if isinstance(raw, str) else list(raw or [])
            keys = tuple(normalise_key(k, where=f"{where}, action {entry.get('name', i)!r}") for k in raw)
            actions.append(KeyAction(name=str(entry.get("name", f"action{i}")), keys=keys))
        allow = data.get("allow_system_keys", False)
        if not isinstance(allow, bool):  # "no" in quotes is a string, and bool("no") is True
            raise UserError(f"{where}: allow_system_keys is {allow!r}; write true or false, without quotes")
        return cls(name=name, actions=tuple(actions), allow_system_keys=allow)

    @classmethod
    def load(cls, path: str | Path) -> "KeyMap":
        path = Path(path)
        return cls.from_dict(read_yaml(path, f"key map {path}"), where=f"key map {path}")

    @classmethod
    def default(cls) -> "KeyMap":
        """The paper's 9 actions: W A S D, the arrow keys, Space."""
        return cls.builtin("default")

    @classmethod
    def builtin(cls, name: str) -> "KeyMap":
        """A key map shipped in `capture/keymaps/` (`BUILTIN_KEYMAPS`)."""
        text = resources.files("playtester.capture").joinpath(f"keymaps/{name}.yaml").read_text()
        return cls.from_dict(yaml.safe_load(text), where=f"{name} key map")


BUILTIN_KEYMAPS = ("default", "level")
"""`default`: the paper's 9 actions (the park); `level`: those and USE (a Doom level's doors,
switches and lifts)."""


def load_keymap(spec: str | Path | None) -> KeyMap:
    """`None` gives the default map, a built-in name (`BUILTIN_KEYMAPS`) that map; anything else is a YAML file."""
    if spec is None or str(spec) in BUILTIN_KEYMAPS:
        return KeyMap.builtin(str(spec or "default"))
    return KeyMap.load(spec)
