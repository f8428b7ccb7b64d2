"""A reset recipe: the keys that bring a window game from where it is to a start of play.

A recipe is a list of steps, each a set of keys held together for `hold` control steps, then
`wait` idle steps, then, with `until`, idle steps until the screen matches that screenshot
(within `timeout` steps, else the recipe failed). Steps run at the game's control rate, outside
the episode: their time is not play. A recipe that must work from several states (a game-over
dialog, the title screen, the middle of a level) is written with steps that are harmless where
they do not apply: in the game of the tests, `y` answers the continue dialog and does nothing on
the menus, and the menu keys do nothing in play (docs/your-own-game.md).

Given as a plan file (`--reset PLAN.yaml`: nodes with `keys` or a key-map `action`, `repeat`, `wait`,
`until`, `timeout`; read by `playtester.datasets.plans`, above this layer) or as a plain key
sequence (`--reset "down enter 10 down down enter 30"`: a key, or keys joined by `+`, is
pressed for one step; a whole number waits that many steps). Either becomes the same list of
step dicts (JSON, so that a run's config and a finding can carry it), checked here: every key
must be one a key map may press, and no step may send a combination that closes windows or
leaves the desktop (Esc alone is allowed: menus need it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from playtester.errors import UserError
from playtester.capture.keymap import normalise_key, system_combination


@dataclass(frozen=True)
class RecipeStep:
    """One step of a reset recipe."""

    keys: tuple[str, ...] = ()
    """Canonical key names held together (none: only wait)."""
    hold: int = 1
    """Control steps the keys are held; then they are released for one step at least."""
    wait: int = 0
    """Idle control steps after the keys."""
    until: str | None = None
    """A screenshot: after the wait, idle until the screen matches it."""
    timeout: int = 100
    """Control steps `until` may take; past it the recipe failed."""
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "keys": list(self.keys), "hold": self.hold, "wait": self.wait, "until": self.until,
                "timeout": self.timeout}


def recipe_steps(steps: Sequence[dict[str, Any]], given_as: str) -> list[RecipeStep]:
    """Checked `RecipeStep`s from step dicts; a `UserError` naming `given_as` and the step."""
    out = []
    for i, raw in enumerate(steps):
        where = f"{given_as}, step {i + 1}" + (f" ({raw['name']!r})" if raw.get("name") else "")
        keys = tuple(normalise_key(k, where=where) for k in raw.get("keys") or ())
        reason = system_combination(keys) if set(keys) != {"esc"} else None
        if reason:
            raise UserError(f"{where}: {'+'.join(keys)} is not a key a reset may press ({reason}); use the game's own "
                            "menu keys")
        hold, wait, timeout = (int(raw.get(k, d)) for k, d in (("hold", 1), ("wait", 0), ("timeout", 100)))
        if hold < 1 or wait < 0 or timeout < 1:
            raise UserError(f"{where}: hold and timeout are at least 1 step, wait 0 or more")
        out.append(RecipeStep(keys, hold if keys else 0, wait, raw.get("until"), timeout, str(raw.get("name") or "")))
    if not out:
        raise UserError(f"{given_as}: no steps; give the keys that bring the game to a start of play")
    return out


def parse_reset_keys(text: str) -> list[dict[str, Any]]:
    """`--reset KEYS`: keys pressed one step each (`a+b` together), whole numbers waits, as step dicts."""
    steps: list[dict[str, Any]] = []
    for token in (t for t in re.split(r"[\s,]+", text.strip()) if t):
        if token.isdigit():
            if not steps:
                steps.append({"name": token, "keys": [], "wait": int(token)})
            else:
                steps[-1]["wait"] = steps[-1].get("wait", 0) + int(token)
            continue
        steps.append({"name": token, "keys": [k for k in token.split("+") if k]})
    recipe_steps(steps, f"--reset {text!r}")  # check now: one line naming the bad key
    return steps


class ResetRecipe:
    """A checked recipe, with its `until` screenshots read."""

    def __init__(self, steps: Sequence[dict[str, Any]], given_as: str) -> None:
        from playtester.capture.window.play_state import look, read_screenshot

        self.given_as = given_as
        self.steps = recipe_steps(steps, given_as)
        self._until = {s.until: look(read_screenshot(s.until, f"{given_as}: until")) for s in self.steps if s.until}

    @property
    def keys(self) -> frozenset[str]:
        """Every key the recipe presses."""
        return frozenset(k for s in self.steps for k in s.keys)

    def play(self, hold: Callable[[Sequence[str]], None], tick: Callable[[], np.ndarray]) -> str | None:
        """Run the steps: `hold(keys)` holds exactly those keys (none: release all), `tick()` waits
        for the next control step and returns the frame then. Returns why the recipe failed, or None."""
        from playtester.capture.window.play_state import MATCH, look, similarity

        for i, step in enumerate(self.steps):
            if step.keys:
                hold(step.keys)
                for _ in range(step.hold):
                    tick()
                hold(())
                tick()  # released for a step at least: a game that reads the keys' state once a frame sees two presses
            for _ in range(step.wait):
                tick()
            if step.until is None:
                continue
            best = -1.0
            for _ in range(step.timeout):
                best = max(best, similarity(look(tick()), self._until[step.until]))
                if best >= MATCH:
                    break
            else:
                name = f" ({step.name})" if step.name else ""
                return (f"{self.given_as}: step {i + 1}{name} waited {step.timeout} steps for the screen of "
                        f"{Path(step.until).name} and never saw it (closest SSIM {best:.2f})")
        return None
