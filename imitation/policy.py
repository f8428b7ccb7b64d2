"""The memory-augmented imitation policy (PPGTA §IV-B), as a plain `nn.Module`.

Per step `t`: the encoder's features of the last K frames (OD-masked for the student) → a local
bidirectional GRU over those K → `h^l_t`; a global GRU over `h^l_1 … h^l_t` (causal, so the same
model runs live) → `h^g_t`; `h^c_t = [h^l_t, h^g_t]` → MLP 512 → 256 (LayerNorm, dropout) →
action logits.

The encoder is given as features: training precomputes them once with the (frozen) encoder, and
the live policy encodes one frame a step. `PolicyCore` therefore works on feature sequences;
`ImitationPolicy` adds the encoder for frames.
"""

from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass, field
from typing import Any

import torch
import torch.nn as nn

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec


@dataclass
class PolicyConfig:
    """Shape of the policy; the paper's values are the defaults."""

    n_actions: int = 9
    """Size of the action space (the key map's actions)."""
    feature_dim: int = 2304
    """Width of the encoder's features for one frame."""
    k: int = 4
    """Frames in the local window."""
    local_hidden: int = 256
    """Hidden size of each direction of the local bidirectional GRU."""
    global_hidden: int = 1024
    """Hidden size of the global GRU over the whole trajectory."""
    mlp: tuple[int, ...] = (512, 256)
    """Widths of the action head's hidden layers (each with LayerNorm, GELU, dropout)."""
    dropout: float = 0.2
    """Dropout in the action head."""
    image_size: InitVar[int | None] = None
    """Only read, from a checkpoint from before the frame spec whose `encoder` names no size: put
    into `encoder` as its frames; the policy takes its frames from its encoder (`frames`)."""
    behavior: str = ""
    """The behaviour it imitates (`inspect`, `path`): names the test in reports."""
    keymap: dict[str, Any] = field(default_factory=dict)
    """The key map of its demos; a game with another key map is refused."""
    encoder: dict[str, Any] = field(default_factory=dict)
    """The encoder's own config, so that the checkpoint rebuilds the encoder too."""

    def __post_init__(self, image_size: int | None) -> None:
        if image_size and self.encoder.get("frames") is None and not self.encoder.get("image_size"):
            self.encoder = {**self.encoder, "frames": FrameSpec.square(image_size).to_dict()}
        self.mlp = tuple(int(v) for v in self.mlp)
        for name in ("n_actions", "feature_dim", "k", "local_hidden", "global_hidden"):
            if int(getattr(self, name)) < 1:
                raise UserError(f"policy config: {name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"policy config: dropout {self.dropout} must be in [0, 1)")

    @property
    def frames(self) -> FrameSpec:
        """The encoder's frame spec (`capture/frames.py`): frames are resized to it before the encoder."""
        return FrameSpec.from_config(self.encoder, "image_size", 128)

    @property
    def state_dim(self) -> int:
        """Width of the concatenated state `h^c`."""
        return 2 * self.local_hidden + self.global_hidden

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mlp"] = list(self.mlp)
        return d


class PolicyCore(nn.Module):
    """Local bi-GRU, global GRU and action head over per-frame features."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.local = nn.GRU(cfg.feature_dim, cfg.local_hidden, batch_first=True, bidirectional=True)
        self.glob = nn.GRU(2 * cfg.local_hidden, cfg.global_hidden, batch_first=True)
        layers: list[nn.Module] = []
        width = cfg.state_dim
        for h in cfg.mlp:
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.GELU(), nn.Dropout(cfg.dropout)]
            width = h
        self.head = nn.Sequential(*layers)
        self.logits = nn.Linear(width, cfg.n_actions)

    def windows(self, feats: torch.Tensor, history: torch.Tensor | None = None) -> torch.Tensor:
        """B×T×D features → B×T×K×D windows of the last K frames (the first frame repeats
        before the start, or `history`, B×(K−1)×D, the frames before this chunk)."""
        b, t, d = feats.shape
        k = self.cfg.k
        if history is None:
            history = feats[:, :1].expand(b, k - 1, d)
        padded = torch.cat([history, feats], dim=1)  # B×(T+K−1)×D
        return padded.unfold(1, k, 1).permute(0, 1, 3, 2)  # B×T×K×D

    def local_state(self, windows: torch.Tensor) -> torch.Tensor:
        """B×T×K×D → `h^l` B×T×2H: last forward and last backward states of the window."""
        b, t, k, d = windows.shape
        _, h = self.local(windows.reshape(b * t, k, d))  # h: 2×(B·T)×H
        return torch.cat([h[0], h[1]], dim=-1).reshape(b, t, -1)

    def forward(
        self,
        feats: torch.Tensor,
        h_global: torch.Tensor | None = None,
        history: torch.Tensor | None = None,
        done: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features B×T×D → (logits B×T×A, `h^c` B×T×S, last global state 1×B×G).

        `h_global` carries the trajectory's memory across chunks (truncated back-propagation);
        `done` (B×T, 1 where a new episode starts at that step) resets it inside the chunk.
        """
        return self.forward_windows(self.windows(feats, history), h_global, done)

    def forward_windows(
        self, windows: torch.Tensor, h_global: torch.Tensor | None = None, done: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`forward` on precomputed windows B×T×K×D (training slices them into chunks)."""
        h_local = self.local_state(windows)
        if done is None:
            h_seq, h_last = self.glob(h_local, h_global)
        else:
            outs = []
            h = h_global if h_global is not None else h_local.new_zeros(1, windows.shape[0], self.cfg.global_hidden)
            for t in range(windows.shape[1]):
                h = h * (1.0 - done[:, t]).view(1, -1, 1)
                o, h = self.glob(h_local[:, t : t + 1], h)
                outs.append(o)
            h_seq, h_last = torch.cat(outs, dim=1), h
        h_c = torch.cat([h_local, h_seq], dim=-1)
        return self.logits(self.head(h_c)), h_c, h_last


def build_encoder(config: dict[str, Any]) -> nn.Module:
    """An untrained `FeatureEncoder` shaped by an encoder config (weights come from the checkpoint)."""
    from playtester.perception.encoder import EncoderConfig, FeatureEncoder

    cfg = EncoderConfig.from_dict(config)
    return FeatureEncoder(feature_dim=cfg.feature_dim, pool=cfg.pool, trunk=cfg.trunk)


def training_memory(cfg: PolicyConfig, batch_size: int, chunk: int, teacher: bool = True) -> int:
    """Bytes that training a policy of this shape takes (`train policy`, checked before it starts):
    the core's weights with AdamW (and the DINO teacher's copy of them), and the larger of each
    chunk's activations (the local GRU over every window, the global GRU and the head at every
    step, for the student and the teacher) and the whole training state serialised at each
    epoch's end (`training_bytes`)."""
    from playtester.perception.training import on_meta, parameter_count, training_bytes

    core = parameter_count(on_meta(lambda: PolicyCore(cfg)))
    per_step = cfg.k * 2 * 3 * cfg.local_hidden + 3 * cfg.global_hidden + sum(cfg.mlp) + cfg.state_dim
    copies = 2 if teacher else 1
    return training_bytes(core, frozen=core if teacher else 0, activations=copies * batch_size * chunk * per_step, resumable=True)


def to_input(frames: torch.Tensor, spec: FrameSpec) -> torch.Tensor:
    """uint8 B×H×W×3 frames → float B×3×H×W in [0, 1] at `spec`'s size (the one resize, on the
    CPU; frames of that size already, as the explorer's env gives them, stay where they are)."""
    if tuple(frames.shape[1:3]) != (spec.height, spec.width):
        frames = torch.from_numpy(spec.resize_batch(frames.cpu().numpy())).to(frames.device)
    return frames.permute(0, 3, 1, 2).float().div_(255.0)


@torch.no_grad()
def encode_frames(encoder: nn.Module, spec: FrameSpec, feature_dim: int, frames: torch.Tensor, batch: int = 64) -> torch.Tensor:
    """uint8 N×H×W×3 frames → N×`feature_dim` features of `encoder` at `spec`'s size, in batches
    (what a policy's `encode` does, without a policy: `train policy` encodes its demos with it)."""
    out = []
    for i in range(0, len(frames), batch):
        out.append(encoder(to_input(frames[i : i + batch], spec)))
    return torch.cat(out) if out else torch.zeros(0, feature_dim)


class ImitationPolicy(nn.Module):
    """Encoder + `PolicyCore`: what a checkpoint holds and what runs live."""

    def __init__(self, cfg: PolicyConfig, encoder: nn.Module) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = encoder
        self.core = PolicyCore(cfg)

    def encode(self, frames: torch.Tensor, batch: int = 64) -> torch.Tensor:
        """uint8 N×H×W×3 frames (already masked as wanted) → N×D features, in batches."""
        return encode_frames(self.encoder, self.cfg.frames, self.cfg.feature_dim, frames, batch)
