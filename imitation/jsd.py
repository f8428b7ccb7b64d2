"""Test quality: how close an executed behaviour's actions are to the expert's (PPGTA's metric).

An executed test is scored by the Jensen–Shannon divergence between its action distribution
(the share of steps on each action) and the expert's for that behaviour, in bits (0 … 1). The
success threshold comes from validation demos: the largest divergence an expert trajectory
itself has from the expert distribution (by default the largest), so "success" means "within
the spread of the expert's own tests".
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from scipy.spatial.distance import jensenshannon


def action_distribution(actions: Sequence[int] | np.ndarray, n_actions: int) -> np.ndarray:
    """Share of steps on each action."""
    counts = np.bincount(np.asarray(actions, dtype=np.int64), minlength=n_actions).astype(float)
    if counts.sum() == 0:
        raise ValueError("no actions to make a distribution of")
    return counts / counts.sum()


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon divergence in bits: `½ KL(p‖m) + ½ KL(q‖m)`, `m = ½(p + q)`; 0 … 1.
    (SciPy gives the JS *distance*, the divergence's square root.)"""
    return float(jensenshannon(np.asarray(p, dtype=float), np.asarray(q, dtype=float), base=2) ** 2)


def success_threshold(expert: np.ndarray, validation: Iterable[Sequence[int]], n_actions: int, quantile: float = 1.0) -> float:
    """The `quantile` of the validation trajectories' divergences from the expert distribution."""
    scores = [jsd(action_distribution(v, n_actions), expert) for v in validation]
    if not scores:
        raise ValueError("no validation trajectories to set the threshold from")
    return float(np.quantile(scores, quantile))
