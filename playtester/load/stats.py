"""Statistics of load testing, as RELINE reports them (scipy underneath).

- `spearman_reliability`: one fixed action sequence replayed R times; Spearman's ρ between the
  per-step frame times of every pair of replays, p-values Holm-adjusted. High ρ means the slow
  steps stay slow from replay to replay: the measurement can be trusted to reward an agent.
- `compare_agents`: frame-time distributions of agents compared pairwise by two-sided
  Mann–Whitney U, Holm-adjusted, with Cliff's delta and its magnitude (Grissom & Kim's bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

import numpy as np
from scipy import stats

from playtester.errors import UserError


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment: sort ascending, `p_(i) · (m − i)` (i from 0), running max, cap at 1."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """`P(a > b) − P(a < b)` over all pairs: +1 when every `a` is larger, −1 when every `a` is smaller."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise UserError("Cliff's delta: both samples need at least one value")
    # counting by sorted search keeps this O((n + m) log m) for long frame-time logs
    ys = np.sort(y)
    less = np.searchsorted(ys, x, side="left")  # y values below each x
    greater = y.size - np.searchsorted(ys, x, side="right")
    return float((less.sum() - greater.sum()) / (x.size * y.size))


def magnitude(delta: float) -> str:
    """negligible < 0.10 ≤ small < 0.33 ≤ medium < 0.474 ≤ large (of |d|)."""
    d = abs(delta)
    return "negligible" if d < 0.10 else "small" if d < 0.33 else "medium" if d < 0.474 else "large"


@dataclass
class Comparison:
    """One pair of agents: is `a`'s frame-time distribution different from `b`'s?"""

    a: str
    b: str
    n_a: int
    n_b: int
    u: float
    p: float
    p_holm: float
    cliffs_delta: float
    """Positive: `a`'s frame times tend to be higher (lower FPS)."""
    magnitude: str


def compare_agents(times: dict[str, Sequence[float]]) -> list[Comparison]:
    """Every pair of agents with samples, by two-sided Mann–Whitney U and Cliff's delta, Holm-adjusted."""
    names = [n for n, v in times.items() if len(v) > 0]
    pairs = list(combinations(names, 2))
    raw = []
    for a, b in pairs:
        res = stats.mannwhitneyu(np.asarray(times[a], float), np.asarray(times[b], float), alternative="two-sided")
        raw.append((float(res.statistic), float(res.pvalue)))
    adjusted = holm([p for _, p in raw]) if raw else []
    out = []
    for (a, b), (u, p), p_adj in zip(pairs, raw, adjusted):
        d = cliffs_delta(times[a], times[b])
        out.append(Comparison(a, b, len(times[a]), len(times[b]), u, p, float(p_adj), d, magnitude(d)))
    return out


@dataclass
class Reliability:
    """Spearman's ρ between the frame times of every pair of replays of one action sequence."""

    replays: int
    steps: int
    rho: np.ndarray
    """ρ per pair, in `combinations(range(replays), 2)` order."""
    p_holm: np.ndarray

    @property
    def rho_min(self) -> float:
        return float(np.min(self.rho))

    @property
    def rho_median(self) -> float:
        return float(np.median(self.rho))

    @property
    def significant_share(self) -> float:
        """Share of pairs with Holm-adjusted p < 0.05."""
        return float(np.mean(self.p_holm < 0.05))

    def to_dict(self) -> dict[str, Any]:
        return {"replays": self.replays, "steps": self.steps, "rho_min": self.rho_min, "rho_median": self.rho_median,
                "rho_max": float(np.max(self.rho)), "significant_share": self.significant_share}


def spearman_reliability(timings: np.ndarray) -> Reliability:
    """`timings`: `replays × steps` frame times of the same actions from the same start."""
    t = np.asarray(timings, dtype=float)
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 3:
        raise UserError(f"reliability check: timings of shape {t.shape}; need at least 2 replays × 3 steps")
    rhos, ps = [], []
    for i, j in combinations(range(t.shape[0]), 2):
        res = stats.spearmanr(t[i], t[j])
        rhos.append(float(res.statistic))
        ps.append(float(res.pvalue))
    return Reliability(t.shape[0], t.shape[1], np.array(rhos), holm(ps))
