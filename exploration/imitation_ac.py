"""The explorer's actor-critic: the path-following imitation policy with two value heads.

PPGTA initialises the explorer from the path-following policy, so that it starts out walking the
way the tester does and novelty only has to pull it off that path. `ImitationActorCritic` is that
policy behind the `ActorCritic` protocol PPO trains:

    prepare   uint8 frames → grayscale (the OD mask with no object: the path policy's input)
              → resize to the policy's image size → frozen `FeatureEncoder` → B×D features
              (what the rollout buffer stores: the "frozen trunk" default of a CPU)
    forward   window of the last K features → local bi-GRU → h^l; global GRU over h^l → h^g;
              h^c = [h^l, h^g] → action head (the policy's MLP and logits layer)
                                → critic (fresh MLP, one output per reward stream)

The recurrent state is one `B×(G + (K−1)·D)` tensor: the global GRU's state, then the K−1
features before the current step. `done` resets both the way the imitation policy starts a
trajectory: the global state to zero and the window to the first frame repeated. The head's
dropout is off (PPO needs the same logits at collection and update time); its weights are the
policy's, so at initialisation the explorer's action distribution is the policy's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch import Tensor

from playtester.errors import UserError
from playtester.exploration.actor_critic import ActorCriticOutput, layer_init
from playtester.imitation.policy import PolicyConfig, PolicyCore, build_encoder, to_input


@dataclass
class ImitationActorCriticConfig:
    """Shape of the explorer: the imitation policy's config plus what PPO adds."""

    policy: dict[str, Any] = field(default_factory=dict)
    """The path-following policy's `PolicyConfig` as a dict (its encoder config included)."""
    num_values: int = 2
    """Value outputs: 1 (episodic), or 2 (plus the non-episodic intrinsic stream)."""
    head_dropout: float = 0.0
    """Dropout in the action head during PPO (0: collection and update see the same logits)."""
    source: str = ""
    """The policy checkpoint it was initialised from (for the log and reports)."""

    def __post_init__(self) -> None:
        if self.num_values not in (1, 2):
            raise UserError(f"num_values={self.num_values}: use 1, or 2 for a separate intrinsic value head")
        if not 0.0 <= self.head_dropout < 1.0:
            raise UserError(f"head_dropout={self.head_dropout}: must be in [0, 1)")

    @property
    def policy_config(self) -> PolicyConfig:
        cfg = dict(self.policy)
        cfg["dropout"] = self.head_dropout
        return PolicyConfig(**cfg)


def grayscale_frames(frames: Tensor) -> Tensor:
    """uint8 B×H×W×3 → uint8 B×H×W×3 BT.601 luma in all channels, rounded exactly as `od_mask`
    does with no box (so the explorer sees what the path policy was trained on)."""
    f = frames.to(torch.int32)
    y = (299 * f[..., 0] + 587 * f[..., 1] + 114 * f[..., 2] + 500) // 1000
    return y.to(torch.uint8).unsqueeze(-1).expand(*frames.shape).contiguous()


class ImitationActorCritic(nn.Module):
    """`ActorCritic` around `PolicyCore` with a frozen encoder and a fresh critic."""

    frozen_trunk = True

    def __init__(self, config: ImitationActorCriticConfig):
        super().__init__()
        self.config = config
        pcfg = self.policy_cfg = config.policy_config
        if not pcfg.encoder:
            raise UserError("the imitation policy's config has no encoder config; retrain it with `playtester train policy`")
        self.num_actions = pcfg.n_actions
        self.num_values = config.num_values
        # NHWC weights: the frames come in NHWC already (`to_input` permutes B×H×W×3), and the
        # convolutions run about 20 % faster on a CPU with the same features (scripts/bench_loop.py)
        self.encoder = build_encoder(pcfg.encoder).to(memory_format=torch.channels_last)
        for p in self.encoder.parameters():
            p.requires_grad = False
        self.encoder.eval()
        self._features: dict[str, Tensor] = {}  # the last frames prepared and their features
        self.core = PolicyCore(pcfg)
        # Critic shaped like the action head (fresh weights): h^c → MLP → one value per stream.
        layers: list[nn.Module] = []
        width = pcfg.state_dim
        for h in pcfg.mlp:
            layers += [layer_init(nn.Linear(width, h)), nn.LayerNorm(h), nn.GELU()]
            width = h
        self.critic = nn.Sequential(*layers, layer_init(nn.Linear(width, config.num_values), std=1.0))

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ImitationActorCritic":
        return cls(ImitationActorCriticConfig(**config))

    @classmethod
    def from_policy(cls, policy: nn.Module, num_values: int = 2, source: str = "") -> "ImitationActorCritic":
        """Initialised from an `ImitationPolicy`: encoder, GRUs and action head copied; critic fresh."""
        config = ImitationActorCriticConfig(policy=policy.cfg.to_dict(), num_values=num_values, source=source)
        agent = cls(config)
        agent.encoder.load_state_dict(policy.encoder.state_dict())
        agent.core.load_state_dict(policy.core.state_dict())
        return agent

    @classmethod
    def from_checkpoint(cls, path: str | Path, num_values: int = 2) -> "ImitationActorCritic":
        """Initialised from a path-following policy checkpoint (`playtester train policy`)."""
        from playtester.imitation.live import load_policy

        return cls.from_policy(load_policy(path).policy, num_values=num_values, source=str(path))

    def checkpoint_spec(self) -> dict[str, Any]:
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}", "config": asdict(self.config)}

    def train(self, mode: bool = True) -> "ImitationActorCritic":
        super().train(mode)
        self.encoder.eval()  # frozen: never in training mode
        return self

    # -- the protocol ---------------------------------------------------------------------------
    def initial_state(self, batch_size: int) -> Tensor:
        pcfg = self.policy_cfg
        device = self.core.logits.weight.device
        return torch.zeros(batch_size, pcfg.global_hidden + (pcfg.k - 1) * pcfg.feature_dim, device=device)

    def share_encoder(self, other: "ImitationActorCritic") -> None:
        """Use `other`'s frozen encoder and its last features: the explorer and the preference
        policy (both from the path policy) then encode each frame once, not twice."""
        if self.policy_cfg.encoder != other.policy_cfg.encoder or self.policy_cfg.frames != other.policy_cfg.frames:
            raise ValueError("share_encoder: the two policies were built on different encoders")
        for name, value in self.encoder.state_dict().items():
            if not torch.equal(value, other.encoder.state_dict()[name].to(value.device)):
                raise ValueError("share_encoder: the two encoders have different weights")
        self.encoder = other.encoder
        self._features = other._features

    @torch.no_grad()
    def prepare(self, obs: Tensor) -> Tensor:
        """uint8 B×H×W×3 frames → B×D features of the frozen encoder (on grayscale frames).

        The last frames and their features are kept: the same frames again (the preference
        policy on the frames the explorer just acted on) cost a comparison, not an encoder pass.
        """
        if obs.ndim != 4 or obs.shape[-1] != 3:
            raise UserError(f"the explorer needs RGB frames B×H×W×3, got shape {tuple(obs.shape)}")
        obs = obs.to(device=self.core.logits.weight.device, dtype=torch.uint8)
        last = self._features.get("obs")
        if last is not None and last.shape == obs.shape and last.device == obs.device and torch.equal(last, obs):
            return self._features["features"]
        features = self.encoder(to_input(grayscale_frames(obs), self.policy_cfg.frames))
        self._features.update(obs=obs.clone(), features=features)
        return features

    def remember(self, obs: Tensor, features: Tensor) -> None:
        """Frames whose features were computed already (`free_rollout` assembles a step of the
        rollout from several decisions): the next `prepare` of these frames is a look-up."""
        self._features.update(obs=obs.to(device=features.device, dtype=torch.uint8), features=features)

    def forward(self, inputs: Tensor, state: Tensor, done: Tensor) -> ActorCriticOutput:
        """`T×B×D` features from `state`; `done[t]` starts an episode at step t."""
        pcfg = self.policy_cfg
        num_steps, batch, dim = inputs.shape
        k, g = pcfg.k, pcfg.global_hidden
        h = state[:, :g].unsqueeze(0)
        history = state[:, g:].reshape(batch, k - 1, dim)
        starts = done.float().view(num_steps, batch, 1, 1)

        # Windows of the last K features; at an episode start the window is the frame repeated.
        windows = []
        for t in range(num_steps):
            feat = inputs[t].unsqueeze(1)  # B×1×D
            history = starts[t] * feat.expand(batch, k - 1, dim) + (1.0 - starts[t]) * history
            window = torch.cat([history, feat], dim=1)  # B×K×D
            windows.append(window)
            history = window[:, 1:]
        h_local = self.core.local_state(torch.stack(windows, dim=1))  # B×T×2H

        # Global GRU over stretches without an episode start; reset by the done mask.
        keep = 1.0 - done.float()
        cuts = [0] + [t for t in range(1, num_steps) if bool((keep[t] < 1).any())] + [num_steps]
        outs = []
        for begin, end in zip(cuts[:-1], cuts[1:]):
            out, h = self.core.glob(h_local[:, begin:end], h * keep[begin].view(1, -1, 1))
            outs.append(out)
        h_c = torch.cat([h_local, torch.cat(outs, dim=1)], dim=-1).transpose(0, 1)  # T×B×S
        logits = self.core.logits(self.core.head(h_c))
        values = self.critic(h_c)
        new_state = torch.cat([h.squeeze(0), history.reshape(batch, -1)], dim=1)
        return ActorCriticOutput(logits, values, new_state)
