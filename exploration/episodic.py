"""The elliptical episodic bonus of E3B (Henaff et al., NeurIPS 2022): novelty within one episode.

Ensemble RND is a *global* novelty: what was new yesterday is stale today, and within an episode
nothing pushes the agent away from where it just was. E3B's bonus is episodic: for the embedding
`φ_t` of the frame reached at step t,

    b_t = φ_tᵀ C_{t−1}⁻¹ φ_t          C_t = λI + Σ_{s≤t} φ_s φ_sᵀ  over the episode so far

large where `φ_t` points where this episode's frames have not, small along directions already
seen (a frame seen n times: `1/(λ + n)` for a unit vector). C starts again at every episode start,
one per game instance; its inverse is kept and updated by Sherman–Morrison's rank-one formula

    C⁻¹ ← C⁻¹ − (C⁻¹φ)(C⁻¹φ)ᵀ / (1 + φᵀC⁻¹φ)

so that a step costs O(d²), not an inversion.

The embedding. E3B uses an inverse-dynamics embedding; ours is the path policy's frozen encoder,
trained by masked inverse dynamics (perception/encoder.py), on the frames the explorer acts on
(grayscale: the OD mask with no box), so the features are the ones the explorer computed already
and cost a look-up. They are projected to `dim` numbers by a fixed random Gaussian matrix (drawn
from `projection_seed`, kept in the checkpoint) and scaled to unit length:

- fixed and random, not learned: the encoder is already the learned inverse-dynamics embedding;
  a random projection keeps inner products and so the bonus's geometry (Johnson–Lindenstrauss)
  and needs no objective of its own;
- smaller: the encoder's 512 (default) or 2304 features make C 512² or 2304² a game instance and a
  step O(d²); 128 numbers cost 16× less than 512 and leave C full rank only after ~128 distinct
  frames, a few hundred steps into an episode;
- unit length: the bonus then depends on the frame's direction only (not on how bright it is), lies
  in (0, 1/λ], and a repeated frame's bonus falls as `1/(λ + n)`.

The raw bonus is divided by the running std of its discounted episodic sum (as RND's reward is by
that of its non-episodic sum), so that its weight in the blend with RND means the same on any game.

The memory can instead span the whole run (`memory: run`): one C for every instance, never started
again, so that a frame earns its bonus only if no episode of the run, on any instance, pointed
its way; an ablation for levels where each episode starts somewhere new and the cumulative
coverage is what counts (docs/benchmarks/explorer.md has what it measured).

A resumed run starts fresh episodes (games cannot be snapshotted, `ppo.Games`), so C is not in
the checkpoint: each instance's C starts again with the resumed run's first episode. What is
saved is the projection and the normaliser's statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch import Tensor

from playtester.exploration.rnd import RunningMeanStd


MEMORIES = ("episode", "run")
"""What the bonus's C sums over (`EpisodicConfig.memory`)."""


@dataclass
class EpisodicConfig:
    """The elliptical episodic bonus (E3B)."""

    ridge: float = 0.1
    """λ of `C = λI + Σ φφᵀ` (E3B's value): the first frame of a direction earns up to 1/λ."""
    dim: int = 128
    """Length of the embedding φ (a fixed random projection of the encoder's features); 0, or
    at least the features' own length: the features as they are."""
    projection_seed: int = 0
    """Seed of the random projection."""
    reward_gamma: float = 0.99
    """Discount of the episodic running sum whose std normalises the bonus."""
    memory: str = "episode"
    """What C sums over: `episode` (E3B: each instance's episode so far) or `run` (every frame of
    the run, on every instance)."""

    def __post_init__(self) -> None:
        if self.ridge <= 0:
            raise ValueError(f"episodic ridge={self.ridge}: λ must be positive (C = λI + Σ φφᵀ must be invertible)")
        if self.dim < 0:
            raise ValueError(f"episodic dim={self.dim}: a length, or 0 for the features as they are")
        if not 0.0 <= self.reward_gamma < 1.0:
            raise ValueError(f"episodic reward_gamma={self.reward_gamma}: must be in [0, 1)")
        if self.memory not in MEMORIES:
            raise ValueError(f"episodic memory={self.memory!r}: use {' or '.join(MEMORIES)}")


def sherman_morrison(inverse: Tensor, phi: Tensor) -> tuple[Tensor, Tensor]:
    """The bonus `φᵀ C⁻¹ φ` of each row and `(C + φφᵀ)⁻¹` (`N×d×d`, `N×d` → `N`, `N×d×d`)."""
    u = torch.bmm(inverse, phi.unsqueeze(-1)).squeeze(-1)
    bonus = (phi * u).sum(dim=-1)
    updated = inverse - u.unsqueeze(-1) * u.unsqueeze(-2) / (1.0 + bonus).view(-1, 1, 1)
    return bonus, updated


class EllipticalEpisodicBonus(nn.Module):
    """E3B's bonus for `num_envs` game instances, one rollout at a time (see the module doc).

    `rollout_bonus(start_features, reached_features, episode_start)` gives the raw bonus of each
    step of a `T×N` rollout and carries each instance's C⁻¹ to the next rollout of its episode;
    `normalize(raw, episode_start)` divides it by the running std of its discounted episodic sum.
    """

    def __init__(self, config: EpisodicConfig, feature_dim: int, num_envs: int):
        super().__init__()
        self.config, self.num_envs = config, num_envs
        projected = 0 < config.dim < feature_dim
        dim = config.dim if projected else feature_dim
        generator = torch.Generator().manual_seed(config.projection_seed)
        projection = torch.randn(feature_dim, dim, generator=generator, dtype=torch.float64) if projected else None
        self.register_buffer("projection", projection)
        self.reward_rms = RunningMeanStd()
        self.dim = dim
        self.run_memory = config.memory == "run"
        self.inverse = torch.eye(dim, dtype=torch.float64).repeat(1 if self.run_memory else num_envs, 1, 1) / config.ridge
        """Each instance's C⁻¹ (`N×d×d`, float64 on the CPU), or the run's one (`1×d×d`, `memory:
        run`); not saved (see the module doc)."""
        self.return_filter = torch.zeros(num_envs, dtype=torch.float64)
        """Each instance's discounted sum of raw bonuses in its episode so far."""

    def embed(self, features: Tensor) -> Tensor:
        """Encoder features (`…×D`) → unit-length φ (`…×d`, float64 on the CPU)."""
        x = features.detach().to("cpu", torch.float64)
        if self.projection is not None:
            x = x @ self.projection.cpu()
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def reset(self, envs: Tensor) -> None:
        """Start a new episode's C on the instances `envs` (`N` bools): C = λI (the run's one
        C only when every instance starts again: a resumed run)."""
        fresh = torch.eye(self.dim, dtype=torch.float64) / self.config.ridge
        if not self.run_memory:
            self.inverse[envs] = fresh
        elif bool(envs.all()):
            self.inverse[:] = fresh

    @torch.no_grad()
    def rollout_bonus(self, start_features: Tensor, reached_features: Tensor, episode_start: Tensor) -> Tensor:
        """The raw bonus `φ(s_{t+1})ᵀ C_t⁻¹ φ(s_{t+1})` of each step (`T×N`, float32).

        `start_features[t]`: the features of the frames acted on at step t (only read where
        `episode_start[t]`: an episode's first frame joins its C, with no bonus, since no step
        reached it); `reached_features[t]`: those of the frames step t reached, each scored and
        then added to its instance's C. Each C⁻¹ starts again where `episode_start` says and is
        carried across rollouts otherwise.
        """
        steps = episode_start.shape[0]
        starts = episode_start.detach().cpu().bool()
        first = self.embed(start_features)
        reached = self.embed(reached_features)
        if self.run_memory:
            return self._run_bonus(first, reached, starts)
        bonus = torch.zeros(steps, self.num_envs, dtype=torch.float64)
        for t in range(steps):
            if starts[t].any():
                self.reset(starts[t])
                _, joined = sherman_morrison(self.inverse[starts[t]], first[t][starts[t]])
                self.inverse[starts[t]] = joined
            bonus[t], self.inverse = sherman_morrison(self.inverse, reached[t])
        return bonus.float()

    def _run_bonus(self, first: Tensor, reached: Tensor, starts: Tensor) -> Tensor:
        """`rollout_bonus` with the run's one C: the instances' frames join it one after another,
        step by step (an episode's first frame too, with no bonus); it never starts again."""
        bonus = torch.zeros(starts.shape, dtype=torch.float64)
        for t in range(starts.shape[0]):
            for i in range(self.num_envs):
                if starts[t, i]:
                    _, self.inverse = sherman_morrison(self.inverse, first[t, i:i + 1])
                value, self.inverse = sherman_morrison(self.inverse, reached[t, i:i + 1])
                bonus[t, i] = value[0]
        return bonus.float()

    @torch.no_grad()
    def normalize(self, raw: Tensor, episode_start: Tensor) -> Tensor:
        """Divide a rollout's raw bonuses (`T×N`) by the running std of their discounted sum, the
        sum taken within each episode (it starts again where `episode_start` says)."""
        raw = raw.detach().to(torch.float64).cpu()
        keep = 1.0 - episode_start.detach().cpu().to(torch.float64)
        sums = torch.empty_like(raw)
        running = self.return_filter.clone()
        for t in range(raw.shape[0]):
            running = running * keep[t] * self.config.reward_gamma + raw[t]
            sums[t] = running
        self.return_filter = running
        self.reward_rms.update(sums.flatten())
        return (raw / (self.reward_rms.std + 1e-8)).float()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A resumed run starts new episodes: C and the episode's running sum start again with them.
        self.reset(torch.ones(self.num_envs, dtype=torch.bool))
        self.return_filter = torch.zeros(self.num_envs, dtype=torch.float64)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
