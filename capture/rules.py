"""Tester rules for a Doom level: how the level is played while it is tested.

- `immortal` (god mode): the tester sees the whole level; nothing ends an episode before its
  steps. The default for stock levels, user WADs and ViZDoom's scenarios.
- `no-monsters`: the level without its monsters (the player can still die: slime, crushers).
- `play`: as shipped. Each death is a finding with its place and what killed it.

Under every rule a level that ends before the episode's steps (a death, the exit) starts again
from its start within the same episode, so that every episode plays its steps. The built-in park
has no monsters and no exit: it plays as it always has unless a rule is named.
"""

from __future__ import annotations

from playtester.errors import UserError

RULES = ("immortal", "no-monsters", "play")


def is_level(spec: str) -> bool:
    """Whether a game spec names a Doom level a tester walks (not the built-in park)."""
    return spec.startswith("doom:") and not spec.startswith(("doom:park", "doom:park-perf"))


def default_rules(spec: str) -> str | None:
    """`immortal` for a Doom level, None (as the game plays) for the park and other games."""
    return "immortal" if is_level(spec) else None


def check_rules(rules: str | None, spec: str, option: str = "--rules") -> str | None:
    """`rules`, or the game's default when None; a `UserError` for an unknown rule or a game without rules."""
    if rules is None:
        return default_rules(spec)
    if rules not in RULES:
        raise UserError(f"{option} {rules!r}: use one of {', '.join(RULES)}")
    if not spec.startswith("doom:"):
        raise UserError(f"{option} {rules}: only Doom levels have tester rules; {spec} plays as it is")
    return rules
