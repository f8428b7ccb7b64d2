"""The explorer and its baselines, chosen by configuration and run through the same code path.

    ppgta           ensemble RND (5 predictors, variance) + preference reward with adaptive α
    ppgta-episodic  ppgta + E3B's elliptical episodic bonus on the path policy's inverse-dynamics
                    features (exploration/episodic.py), both novelties weighted 1
    episodic        the episodic bonus + the preference reward, no RND
    inspector       single-predictor RND (prediction error), no preference term (Inspector's explorer)
    random          uniform random actions, never trained (`RandomAgent`)

`explorer_preset(mode)` gives what differs between them; everything else (PPO, the environments,
coverage, reports) is shared.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from playtester.errors import UserError

if TYPE_CHECKING:  # light to import: a run spec asks a mode's novelty scale before torch is needed
    from playtester.exploration.reward import ExplorationRewardConfig
    from playtester.exploration.rnd import RNDConfig

MODES: tuple[str, ...] = ("ppgta", "ppgta-episodic", "episodic", "inspector", "random")
NOVELTY_WEIGHTS = {"ppgta": (1.0, 0.0), "ppgta-episodic": (1.0, 1.0), "episodic": (0.0, 1.0), "inspector": (1.0, 0.0)}
"""Each trained mode's (w_rnd, w_epi): the weights of RND's and the episodic bonus's novelty."""
NOVELTY_SCALE = {"ppgta-episodic": "step"}
"""A mode's own `novelty_scale` where it is not `return`: ppgta-episodic's two novelties at unit
scale beside the preference, the setting measured best (docs/benchmarks/explorer.md)."""


def novelty_scale_of(mode: str) -> str:
    """What `mode`'s novelties are divided by unless a run says otherwise (`NOVELTY_SCALE`)."""
    return NOVELTY_SCALE.get(mode, "return")


class ExplorerPreset(NamedTuple):
    mode: str
    reward: ExplorationRewardConfig | None
    """The reward hook's config; None for the random agent (no rewards, no training)."""
    trained: bool
    """Whether PPO trains the agent (False: `RandomAgent`)."""
    needs_preference_policy: bool
    """Whether a path-following (preference) policy must be given."""


def explorer_preset(mode: str, rnd: RNDConfig | None = None, rnd_weight: float | None = None,
                    episodic_weight: float | None = None, novelty_scale: str | None = None,
                    episodic_memory: str = "episode") -> ExplorerPreset:
    """The settings of an explorer mode; `rnd` overrides the novelty model's other options,
    `rnd_weight` and `episodic_weight` the mode's weights of its two novelties, `novelty_scale`
    what each novelty is divided by (`ExplorationRewardConfig.novelty_scale`; default: the
    mode's own, `novelty_scale_of`), `episodic_memory` what the episodic bonus remembers
    (`EpisodicConfig.memory`)."""
    from playtester.exploration.episodic import EpisodicConfig
    from playtester.exploration.reward import ExplorationRewardConfig
    from playtester.exploration.rnd import RNDConfig

    rnd = rnd or RNDConfig()
    if mode in NOVELTY_WEIGHTS:
        default_rnd, default_episodic = NOVELTY_WEIGHTS[mode]
        weights = dict(rnd_weight=default_rnd if rnd_weight is None else rnd_weight,
                       episodic_weight=default_episodic if episodic_weight is None else episodic_weight,
                       novelty_scale=novelty_scale or novelty_scale_of(mode))
        try:
            weights["episodic"] = EpisodicConfig(memory=episodic_memory)
            if mode == "inspector":
                single = replace(rnd, num_predictors=1, predictors="independent", reward="prediction_error")
                reward = ExplorationRewardConfig(rnd=single, use_preference=False, **weights)
            else:
                reward = ExplorationRewardConfig(rnd=rnd, use_preference=True, **weights)
        except ValueError as e:
            raise UserError(f"explorer {mode}: {e}") from None
        return ExplorerPreset(mode, reward, trained=True, needs_preference_policy=mode != "inspector" or reward.uses_episodic)
    if mode == "random":
        return ExplorerPreset(mode, None, trained=False, needs_preference_policy=False)
    raise UserError(f"explorer mode {mode!r}: use one of {', '.join(MODES)}")
