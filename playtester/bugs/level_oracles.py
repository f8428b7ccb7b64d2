"""Oracles a level designer wants on a Doom level, each judging every step like the others
(`playtester/bugs/oracles.py`) and each saying what it judged with.

- `DeathOracle`: the player died (under `--rules play` or `no-monsters`): where, and what most
  likely killed it (the engine's step says, `capture/level_play.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from playtester.bugs.oracles import Finding


class DeathOracle:
    """Each death is a finding with its place and its likely cause; the level starts again."""

    name = "death"

    def reset(self) -> None:
        pass

    def observe(self, frame: np.ndarray, info: dict[str, Any], action: int | None, episode: int, step: int) -> list[Finding]:
        death = info.get("death")
        if not death:
            return []
        position = death.get("position")
        where = f" at ({position[0]:.0f}, {position[1]:.0f})" if position else ""
        return [Finding("death", f"the player died{where}: {death['cause']}; the level started again", episode, step,
                        {"position": list(position) if position else None, "cause": death["cause"]})]


def level_oracles(game: str) -> list[Any]:
    """The level oracles for a game spec: none unless it is a Doom level."""
    from playtester.capture.rules import is_level

    if not is_level(game):
        return []
    return [DeathOracle()]
