"""Wuji's evolutionary operators as pure functions: NSGA-II selection and weight-space variation.

Scores are an `N×M` array, one row per policy, one column per objective, every objective
maximised (Wuji's exploration score and winning score). Policy `a` dominates `b` when it is no
worse on every objective and better on at least one; equal rows do not dominate each other, so
ties share a front.

- `non_dominated_sort`: the Pareto fronts, best first (Deb's fast non-dominated sort).
- `crowding_distance`: how sparse each member of one front is; the extremes of every objective
  get infinity so that they are always kept. Each gap is divided by the objective's range on
  the front (NSGA-II's normalisation: the two objectives have unrelated units).
- `select_survivors`: whole fronts in order, the last one cut by crowding distance.
- `binary_tournament`: two random candidates, the dominating one wins, else a coin flip.
- `single_point_crossover`, `gaussian_mutation`: on a policy's flattened trainable weights
  (`flat_weights` / `load_flat_weights`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """Pareto dominance for maximised objectives."""
    return bool(np.all(a >= b) and np.any(a > b))


def _as_scores(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be N×M (policies × objectives), got shape {scores.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    return scores


def non_dominated_sort(scores: np.ndarray) -> list[list[int]]:
    """Indices of `scores` grouped into Pareto fronts, best front first, ascending within a front."""
    scores = _as_scores(scores)
    n = len(scores)
    dominated_by = [[] for _ in range(n)]  # who i dominates
    counts = np.zeros(n, dtype=np.int64)  # how many dominate i
    for i in range(n):
        for j in range(i + 1, n):
            if dominates(scores[i], scores[j]):
                dominated_by[i].append(j)
                counts[j] += 1
            elif dominates(scores[j], scores[i]):
                dominated_by[j].append(i)
                counts[i] += 1
    fronts = []
    current = [i for i in range(n) if counts[i] == 0]
    while current:
        fronts.append(sorted(current))
        following = []
        for i in current:
            for j in dominated_by[i]:
                counts[j] -= 1
                if counts[j] == 0:
                    following.append(j)
        current = following
    return fronts


def crowding_distance(scores: np.ndarray) -> np.ndarray:
    """Crowding distance of each row of one front (`K×M`); boundary rows get `inf`.

    Per objective, rows are sorted (stably) and each inner row adds the gap between its two
    neighbours divided by the objective's range; an objective with no range adds nothing.
    """
    scores = _as_scores(scores)
    k, m = scores.shape
    distance = np.zeros(k)
    if k <= 2:
        distance[:] = np.inf
        return distance
    for obj in range(m):
        order = np.argsort(scores[:, obj], kind="stable")
        values = scores[order, obj]
        distance[order[0]] = distance[order[-1]] = np.inf
        span = values[-1] - values[0]
        if span <= 0:
            continue
        distance[order[1:-1]] += (values[2:] - values[:-2]) / span
    return distance


def select_survivors(scores: np.ndarray, n: int) -> list[int]:
    """`n` indices: best fronts whole, the front that does not fit cut by crowding distance
    (largest first; equal distances keep the lower index)."""
    scores = _as_scores(scores)
    if not 0 <= n <= len(scores):
        raise ValueError(f"cannot select {n} survivors from {len(scores)} policies")
    chosen: list[int] = []
    for front in non_dominated_sort(scores):
        if len(chosen) + len(front) <= n:
            chosen.extend(front)
            continue
        distance = crowding_distance(scores[front])
        order = sorted(range(len(front)), key=lambda i: (-distance[i], front[i]))
        chosen.extend(front[i] for i in order[: n - len(chosen)])
        break
    return chosen


def select_by_objective(scores: np.ndarray, n: int, objective: int) -> list[int]:
    """Single-objective survivor selection (Wuji's EA_S baseline): the `n` best on one column."""
    scores = _as_scores(scores)
    return [int(i) for i in np.argsort(-scores[:, objective], kind="stable")[:n]]


def binary_tournament(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Wuji's parent selection: two distinct random candidates; the dominating one wins, else a
    uniformly random one of the two. A one-member population returns its only member."""
    scores = _as_scores(scores)
    if len(scores) == 1:
        return 0
    a, b = (int(i) for i in rng.choice(len(scores), size=2, replace=False))
    if dominates(scores[a], scores[b]):
        return a
    if dominates(scores[b], scores[a]):
        return b
    return a if rng.random() < 0.5 else b


def crossover_point(size: int, rng: np.random.Generator) -> int:
    """A cut strictly inside a vector of `size` (so that both parents give something)."""
    if size < 2:
        raise ValueError(f"a weight vector of {size} cannot be cut in two")
    return int(rng.integers(1, size))


def single_point_crossover(father: Tensor, mother: Tensor, point: int) -> Tensor:
    """`father[:point]` followed by `mother[point:]` (1-D weight vectors of the same size)."""
    if father.shape != mother.shape or father.ndim != 1:
        raise ValueError(f"parents must be 1-D vectors of one size, got {tuple(father.shape)} and {tuple(mother.shape)}")
    if not 0 <= point <= len(father):
        raise ValueError(f"crossover point {point} outside 0..{len(father)}")
    return torch.cat([father[:point], mother[point:]])


def gaussian_mutation(weights: Tensor, sigma: float, rate: float, generator: torch.Generator) -> Tensor:
    """Add `N(0, sigma²)` noise to each weight with probability `rate` (a new tensor)."""
    if sigma < 0 or not 0 <= rate <= 1:
        raise ValueError(f"mutation sigma={sigma} must be ≥ 0 and rate={rate} in [0, 1]")
    if sigma == 0 or rate == 0:
        return weights.clone()
    noise = torch.randn(weights.shape, generator=generator, dtype=weights.dtype) * sigma
    if rate < 1:
        noise = noise * (torch.rand(weights.shape, generator=generator) < rate).to(weights.dtype)
    return weights + noise


def flat_weights(module: nn.Module) -> Tensor:
    """The trainable parameters as one detached 1-D vector (a frozen trunk is left out)."""
    return torch.nn.utils.parameters_to_vector([p for p in module.parameters() if p.requires_grad]).detach().clone()


def load_flat_weights(module: nn.Module, vector: Tensor) -> None:
    """Write a vector from `flat_weights` back into the module's trainable parameters."""
    params = [p for p in module.parameters() if p.requires_grad]
    size = sum(p.numel() for p in params)
    if vector.shape != (size,):
        raise ValueError(f"weight vector of shape {tuple(vector.shape)} for a module with {size} trainable weights")
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(vector.to(params[0].device), params)
