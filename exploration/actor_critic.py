"""The actor-critic interface PPO trains, and a small GRU actor-critic for tests and benchmarks.

PPO only needs what `ActorCritic` names: an initial recurrent state, a `prepare` step that turns
raw observations into what the rollout buffer stores, and a forward pass over a sequence
`(inputs, state, done) → (logits, values, new state)` that resets the state wherever `done` marks
the first step of an episode. The explorer's real actor-critic (the imitation GRU policy with a
second value head, initialised from the path-following policy) will implement the same protocol;
with a frozen encoder trunk its `prepare` returns trunk features, so rollouts store features and
updates train only the recurrent layers and heads.

States are tensors whose first dimension is the batch (environments), so that PPO can keep the
starting state of each rollout and slice it by environment.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor


class ActorCriticOutput(NamedTuple):
    logits: Tensor
    """Action logits, `T×B×A`."""
    values: Tensor
    """Value estimates, `T×B×V` (V = 1, or 2 with a non-episodic intrinsic head)."""
    state: Tensor
    """Recurrent state after the last step, `B×…`."""


@runtime_checkable
class ActorCritic(Protocol):
    """What PPO needs from a policy (an `nn.Module`)."""

    num_actions: int
    num_values: int
    frozen_trunk: bool
    """True when `prepare` runs a frozen encoder trunk (PPO then logs that only the rest trains)."""

    def initial_state(self, batch_size: int) -> Tensor:
        """The state at the start of an episode, `batch_size×…`."""
        ...

    def prepare(self, obs: Tensor) -> Tensor:
        """Raw observations (`B×…`, as the env gives them) → what the rollout buffer stores."""
        ...

    def forward(self, inputs: Tensor, state: Tensor, done: Tensor) -> ActorCriticOutput:
        """Run `T×B×…` prepared inputs from `state`; `done[t]` resets the state before step t."""
        ...

    def checkpoint_spec(self) -> dict[str, Any]:
        """`{"class": "module:Name", "config": {...}}`: enough for `build_actor_critic` to rebuild it."""
        ...


def build_actor_critic(spec: dict[str, Any]) -> nn.Module:
    """Rebuild an actor-critic from its `checkpoint_spec` (the class must offer `from_config`)."""
    module_name, _, class_name = spec["class"].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.from_config(spec["config"])


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    """Orthogonal weights, constant bias: the initialisation PPO implementations rely on."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


@dataclass
class GRUActorCriticConfig:
    """A small recurrent actor-critic: encoder → GRU → policy head and value head(s)."""

    obs_shape: tuple[int, ...]
    """One observation's shape: `(D,)` for state vectors, `(H, W, C)` uint8 frames for pixels."""
    num_actions: int
    """Size of the `Discrete` action space."""
    encoder: Literal["mlp", "conv"] = "mlp"
    """`mlp` for state vectors; `conv` for `H×W×C` frames (Nature-DQN convolutions)."""
    hidden_dim: int = 64
    """Width of the encoder's output (and of the MLP's hidden layer)."""
    rnn_dim: int = 64
    """GRU state size."""
    num_values: int = 1
    """Value heads: 1 (episodic return), or 2 (plus a non-episodic intrinsic return)."""
    skip_connection: bool = True
    """Heads see the encoder features next to the GRU output (fast learning where memory is not needed)."""

    def __post_init__(self) -> None:
        self.obs_shape = tuple(int(d) for d in self.obs_shape)
        if self.encoder not in ("mlp", "conv"):
            raise ValueError(f"encoder={self.encoder!r}: use 'mlp' (state vectors) or 'conv' (frames)")
        if self.encoder == "mlp" and len(self.obs_shape) != 1:
            raise ValueError(f"encoder='mlp' needs flat observations, got shape {self.obs_shape}; use encoder='conv' for frames")
        if self.encoder == "conv" and (len(self.obs_shape) != 3 or min(self.obs_shape[:2]) < 36):
            raise ValueError(f"encoder='conv' needs H×W×C frames of at least 36×36, got shape {self.obs_shape}")
        if self.num_actions < 1 or self.hidden_dim < 1 or self.rnn_dim < 1:
            raise ValueError("num_actions, hidden_dim and rnn_dim must be positive")
        if self.num_values not in (1, 2):
            raise ValueError(f"num_values={self.num_values}: use 1, or 2 for a separate intrinsic value head")


class GRUActorCritic(nn.Module):
    """`ActorCritic` with an MLP or conv encoder, a GRU cell reset by `done`, and linear heads."""

    def __init__(self, config: GRUActorCriticConfig):
        super().__init__()
        self.config = cfg = config
        self.num_actions = cfg.num_actions
        self.num_values = cfg.num_values
        self.frozen_trunk = False
        if cfg.encoder == "mlp":
            self.encoder = nn.Sequential(
                layer_init(nn.Linear(cfg.obs_shape[0], cfg.hidden_dim)), nn.Tanh(),
                layer_init(nn.Linear(cfg.hidden_dim, cfg.hidden_dim)), nn.Tanh(),
            )
        else:
            h, w, c = cfg.obs_shape
            convs = nn.Sequential(
                layer_init(nn.Conv2d(c, 32, 8, stride=4)), nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
                nn.Flatten(),
            )
            with torch.no_grad():
                flat = convs(torch.zeros(1, c, h, w)).shape[1]
            self.encoder = nn.Sequential(convs, layer_init(nn.Linear(flat, cfg.hidden_dim)), nn.ReLU())
        self.rnn = nn.GRU(cfg.hidden_dim, cfg.rnn_dim)
        for name, param in self.rnn.named_parameters():
            if "weight" in name:
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)
        head_in = cfg.rnn_dim + (cfg.hidden_dim if cfg.skip_connection else 0)
        self.actor = layer_init(nn.Linear(head_in, cfg.num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(head_in, cfg.num_values), std=1.0)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "GRUActorCritic":
        return cls(GRUActorCriticConfig(**config))

    def checkpoint_spec(self) -> dict[str, Any]:
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}", "config": asdict(self.config)}

    def initial_state(self, batch_size: int) -> Tensor:
        return torch.zeros(batch_size, self.config.rnn_dim, device=self.actor.weight.device)

    def prepare(self, obs: Tensor) -> Tensor:
        # Frames stay uint8 in the buffer (4× smaller); scaling happens in `encode`.
        return obs if self.config.encoder == "conv" else obs.float()

    def encode(self, inputs: Tensor) -> Tensor:
        """`B×…` prepared inputs → `B×hidden_dim` features."""
        if self.config.encoder == "conv":
            inputs = inputs.permute(0, 3, 1, 2).float() / 255.0
        return self.encoder(inputs)

    def forward(self, inputs: Tensor, state: Tensor, done: Tensor) -> ActorCriticOutput:
        num_steps, batch = inputs.shape[:2]
        features = self.encode(inputs.reshape(num_steps * batch, *inputs.shape[2:])).view(num_steps, batch, -1)
        # Run the GRU over stretches without any episode start, resetting the state by the done
        # mask at the first step of each stretch (equal to a step-by-step loop, and faster).
        keep = 1.0 - done.float()
        starts = [0] + [t for t in range(1, num_steps) if bool((keep[t] < 1).any())] + [num_steps]
        outputs = []
        h = state.unsqueeze(0)
        for begin, end in zip(starts[:-1], starts[1:]):
            out, h = self.rnn(features[begin:end], h * keep[begin].view(1, -1, 1))
            outputs.append(out)
        state = h.squeeze(0)
        hidden = torch.cat(outputs)
        if self.config.skip_connection:
            hidden = torch.cat([hidden, features], dim=-1)
        return ActorCriticOutput(self.actor(hidden), self.critic(hidden), state)


@dataclass
class RandomAgentConfig:
    """The random baseline: uniform over the actions, never trained."""

    num_actions: int
    """Size of the `Discrete` action space."""
    num_values: int = 1
    """Value outputs to report (always zero), so that it fits wherever an actor-critic does."""

    def __post_init__(self) -> None:
        if self.num_actions < 1:
            raise ValueError(f"num_actions={self.num_actions}: need at least one action")


class RandomAgent(nn.Module):
    """The random-agent baseline behind the `ActorCritic` interface: uniform logits, zero values.

    It runs in the same code path as the trained explorers (acting, coverage, reports) but has no
    parameters; PPO refuses to train it.
    """

    def __init__(self, config: RandomAgentConfig):
        super().__init__()
        self.config = config
        self.num_actions = config.num_actions
        self.num_values = config.num_values
        self.frozen_trunk = False
        self.register_buffer("_anchor", torch.zeros(()), persistent=False)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "RandomAgent":
        return cls(RandomAgentConfig(**config))

    def checkpoint_spec(self) -> dict[str, Any]:
        return {"class": f"{type(self).__module__}:{type(self).__qualname__}", "config": asdict(self.config)}

    def initial_state(self, batch_size: int) -> Tensor:
        return torch.zeros(batch_size, 1, device=self._anchor.device)

    def prepare(self, obs: Tensor) -> Tensor:
        return obs

    def forward(self, inputs: Tensor, state: Tensor, done: Tensor) -> ActorCriticOutput:
        num_steps, batch = inputs.shape[:2]
        zeros = torch.zeros(num_steps, batch, device=self._anchor.device)
        logits = zeros.unsqueeze(-1).expand(num_steps, batch, self.num_actions)
        values = zeros.unsqueeze(-1).expand(num_steps, batch, self.num_values)
        return ActorCriticOutput(logits.contiguous(), values.contiguous(), state)
