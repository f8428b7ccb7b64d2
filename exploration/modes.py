"""The explorer and its baselines, chosen by configuration and run through the same code path.

    ppgta      ensemble RND (5 predictors, variance) + preference reward with adaptive α
    inspector  single-predictor RND (prediction error), no preference term (Inspector's explorer)
    random     uniform random actions, never trained (`RandomAgent`)

`explorer_preset(mode)` gives what differs between them; everything else (PPO, the environments,
coverage, reports) is shared.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from playtester.errors import UserError
from playtester.exploration.reward import ExplorationRewardConfig
from playtester.exploration.rnd import RNDConfig

MODES: tuple[str, ...] = ("ppgta", "inspector", "random")


class ExplorerPreset(NamedTuple):
    mode: str
    reward: ExplorationRewardConfig | None
    """The reward hook's config; None for the random agent (no rewards, no training)."""
    trained: bool
    """Whether PPO trains the agent (False: `RandomAgent`)."""
    needs_preference_policy: bool
    """Whether a path-following (preference) policy must be given."""


def explorer_preset(mode: str, rnd: RNDConfig | None = None) -> ExplorerPreset:
    """The settings of an explorer mode; `rnd` overrides the novelty model's other options."""
    rnd = rnd or RNDConfig()
    if mode == "ppgta":
        reward = ExplorationRewardConfig(rnd=rnd, use_preference=True)
        return ExplorerPreset(mode, reward, trained=True, needs_preference_policy=True)
    if mode == "inspector":
        single = replace(rnd, num_predictors=1, predictors="independent", reward="prediction_error")
        return ExplorerPreset(mode, ExplorationRewardConfig(rnd=single, use_preference=False), trained=True, needs_preference_policy=False)
    if mode == "random":
        return ExplorerPreset(mode, None, trained=False, needs_preference_policy=False)
    raise UserError(f"explorer mode {mode!r}: use one of {', '.join(MODES)}")
