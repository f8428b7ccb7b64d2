"""`--reset`: a window game's reset recipe, from a reset plan (a plan file) or from plain keys.

A reset plan is a plan (`datasets/plans.py`) whose nodes only press keys and wait: each node's `keys` (or
a key-map `action`) held for `repeat` steps, its `wait`, and with `until` idle steps until the
screen matches a screenshot, within its `timeout`. Targets, rules and behaviours need play, which
a reset is not, and are refused. The recipe it becomes is plain data (`capture/window/reset.py`
plays it), so that a run's config and the game workers can carry it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap


def is_plan_file(text: str) -> bool:
    """Whether `--reset` names a plan file rather than giving the keys themselves."""
    return text.lower().endswith((".yaml", ".yml")) or _is_file(text)


def _is_file(text: str) -> bool:
    """Whether `text` names an existing file (False for a text no file can be called: too long a name)."""
    try:
        return Path(text).is_file()
    except OSError:
        return False


def reset_recipe(text: str, keymap: KeyMap | None = None) -> dict[str, Any]:
    """`{"from", "steps"}` for `WindowGame(reset_recipe=…)`, checked: a `UserError` names the plan's
    node or the key that cannot be pressed."""
    from playtester.capture.window.reset import ResetRecipe, parse_reset_keys

    if is_plan_file(text):
        given_as = f"--reset {text}"
        steps = plan_steps(text, keymap or KeyMap.default(), given_as)
    else:
        given_as = f"--reset {text!r}"
        steps = parse_reset_keys(text)
    ResetRecipe(steps, given_as)  # every key pressable, every until screenshot readable
    return {"from": given_as, "steps": steps}


def plan_steps(path: str, keymap: KeyMap, given_as: str) -> list[dict[str, Any]]:
    """The steps of a reset plan file."""
    from playtester.datasets.plans import load_plan

    if not _is_file(path):
        raise UserError(f"{given_as}: no such file; give a reset plan (YAML) or the keys themselves, e.g. --reset \"down enter 10\"")
    plan = load_plan(path)
    if plan.rules or plan.behaviors:
        raise UserError(f"{given_as}: a reset plan presses keys and waits; its rules and behaviours need play, leave them out")
    steps = []
    for i, node in enumerate(plan.nodes):
        where = f"{given_as}: node {i + 1} ({node.name!r})"
        if node.target is not None:
            raise UserError(f"{where}: a reset plan has no targets (they need play); give keys, wait and until")
        keys = node.keys or []
        if node.action is not None:
            if node.action not in keymap.names:
                raise UserError(f"{where}: action {node.action!r} is not in the key map ({', '.join(keymap.names)}); "
                                "give the keys themselves with keys: [...]")
            keys = list(keymap.keys_for(keymap.index(node.action)))
        steps.append({"name": node.name, "keys": keys, "hold": max(1, node.repeat), "wait": node.wait,
                      "until": node.until, "timeout": node.timeout})
    return steps
