"""The preference (style) reward and its adaptive mix with novelty (PPGTA §IV-C).

    r^p = −KL(π^e ‖ π^p)            explorer against the path-following policy, same frames
    r^c = α r^p + (1 − α) r^e       α adapted per step by `AlphaSchedule`
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


def preference_reward(logits_explorer: Tensor, logits_preference: Tensor) -> Tensor:
    """`−KL(π^e ‖ π^p)` per sample, from the two policies' action logits (`B×A` → `B`).

    Zero when both policies give the same distribution, negative otherwise. The KL is taken in the
    explorer's direction: actions the explorer favours but the preference policy would not take
    cost the most.
    """
    if logits_explorer.shape != logits_preference.shape:
        raise ValueError(
            f"explorer logits {tuple(logits_explorer.shape)} and preference logits "
            f"{tuple(logits_preference.shape)} differ: both policies must act over the same actions"
        )
    logp_e = F.log_softmax(logits_explorer, dim=-1)
    logp_p = F.log_softmax(logits_preference, dim=-1)
    kl = (logp_e.exp() * (logp_e - logp_p)).sum(dim=-1)
    # KL is never negative; float rounding leaves it a hair below zero when the two agree.
    return -kl.clamp_min(0.0)


def mix_rewards(preference: Tensor, intrinsic: Tensor, alpha: Tensor | float) -> Tensor:
    """The combined reward `r^c = α r^p + (1 − α) r^e`."""
    return alpha * preference + (1.0 - alpha) * intrinsic


@dataclass
class AlphaScheduleConfig:
    """The adaptive α of PPGTA §IV-C; the defaults are the paper's values."""

    start: float = 0.8
    """α at the start of training (and its ceiling)."""
    minimum: float = 0.5
    """α never goes below this."""
    maximum: float = 0.8
    """α never goes above this."""
    drop_threshold: float = -0.1
    """ε: a change `r^e_t − r^e_{t−1} < ε` counts as a drop in novelty (e.g. hitting an invisible wall)."""
    decrease: float = 0.05
    """How much α falls on a drop in novelty (more exploration)."""
    increase: float = 0.1
    """How much α rises when novelty rises again."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.minimum <= self.maximum <= 1.0:
            raise ValueError(f"alpha bounds: need 0 <= minimum ({self.minimum}) <= maximum ({self.maximum}) <= 1")
        if not self.minimum <= self.start <= self.maximum:
            raise ValueError(f"alpha start {self.start} must lie in [minimum, maximum] = [{self.minimum}, {self.maximum}]")
        if self.decrease < 0 or self.increase < 0:
            raise ValueError("alpha decrease and increase are step sizes: give them as non-negative numbers")
        if self.drop_threshold > 0:
            raise ValueError(f"alpha drop_threshold {self.drop_threshold} should be negative (the paper uses -0.1)")


class AlphaSchedule:
    """α per environment, moved by the change in novelty between adjacent transitions.

    The rules, read from PPGTA §IV-C and DESIGN.md, for each environment and each step `t`:

    - `Δ = r^e_t − r^e_{t−1}` compares the intrinsic rewards of two adjacent transitions of the
      same episode (the normalised rewards the explorer is trained on, since ε = −0.1 is a scale);
    - `Δ < ε` (ε = −0.1): novelty dropped, `α ← max(α − 0.05, 0.5)`;
    - `Δ > 0`: novelty "rises again" — we read "rises" as a strictly positive change between
      adjacent transitions — `α ← min(α + 0.1, 0.8)`; because of the ceiling this only matters
      after a drop;
    - `ε ≤ Δ ≤ 0`: α is left as it is (novelty flat or gently falling).

    The first transition of an episode has no predecessor within the episode, so it leaves α
    unchanged; α itself carries over from one episode to the next. The α returned by `step` is
    the one after this step's update, and is the one to use for this step's `r^c`.
    """

    def __init__(self, num_envs: int, config: AlphaScheduleConfig | None = None):
        self.config = config or AlphaScheduleConfig()
        self.alpha = torch.full((num_envs,), self.config.start, dtype=torch.float64)
        self.previous = torch.zeros(num_envs, dtype=torch.float64)
        self.has_previous = torch.zeros(num_envs, dtype=torch.bool)

    def step(self, intrinsic: Tensor, episode_start: Tensor | None = None) -> Tensor:
        """Update α from this step's intrinsic rewards (`N`); `episode_start` marks first transitions."""
        cfg = self.config
        r = intrinsic.detach().to(torch.float64).cpu()
        has_prev = self.has_previous.clone()
        if episode_start is not None:
            has_prev &= ~episode_start.detach().cpu().bool()
        change = r - self.previous
        dropped = has_prev & (change < cfg.drop_threshold)
        rose = has_prev & (change > 0)
        alpha = torch.where(dropped, (self.alpha - cfg.decrease).clamp(min=cfg.minimum), self.alpha)
        alpha = torch.where(rose, (alpha + cfg.increase).clamp(max=cfg.maximum), alpha)
        self.alpha = alpha.round(decimals=10)  # keep 0.8 − 0.05 − … on the exact grid
        self.previous = r
        self.has_previous = torch.ones_like(self.has_previous)
        return self.alpha.clone().float()

    def state_dict(self) -> dict[str, Tensor]:
        return {"alpha": self.alpha.clone(), "previous": self.previous.clone(), "has_previous": self.has_previous.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        if state["alpha"].shape != self.alpha.shape:
            raise ValueError(f"alpha state is for {state['alpha'].shape[0]} environments, this run has {self.alpha.shape[0]}")
        self.alpha = state["alpha"].clone()
        self.previous = state["previous"].clone()
        self.has_previous = state["has_previous"].clone()
