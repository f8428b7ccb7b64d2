"""The feature encoder, trained by masked inverse dynamics (PPGTA §IV-A).

`FeatureEncoder` is AlexNet's convolutional trunk (ImageNet weights when available; the five
conv layers, without the last max-pool) followed by a small spatial pool and a linear projection: float B×3×H×W frames in [0, 1] → B×`out_dim`
features. It works at any input of 64 px a side or more (the imitation policy uses 128², RND 64²).

`InverseDynamics` predicts the action `a` between two adjacent frames from their features
`[f(s_{t-1}), f(s_t), f(s_t) − f(s_{t-1})]`. During training one of the two frames is OD-masked
at random (grayscale except for the box of the object under test), so the features learn to care
about what the player controls and about the OOI, not about colours elsewhere.

`load_encoder(path)` rebuilds the trained `FeatureEncoder` from its checkpoint alone.
"""

from __future__ import annotations

import logging
import math
from dataclasses import InitVar, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F

from playtester.errors import UserError
from playtester.capture.frames import FrameSpec
from playtester.perception.compact_backbone import BLOCKS, WIDTHS, CompactBody
from playtester.perception.int8 import CALIBRATION_FRAMES, Int8Convolutions
from playtester.perception.od_mask import od_mask_torch
from playtester.perception.training import read_checkpoint, tag_checkpoint

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TRUNKS = ("alexnet", "compact")
TRUNK_CHANNELS = 256
MIN_INPUT = 64


@dataclass
class EncoderConfig:
    """Hyper-parameters of the encoder and its inverse-dynamics training, saved in the checkpoint."""

    action_names: list[str] = field(default_factory=list)
    """The key map's actions, in order; the head predicts one of them."""
    image_size: InitVar[int | None] = None
    """Only read: the side of a checkpoint's square from before the spec (or a caller's), into `frames`."""
    frames: FrameSpec | dict[str, int] | None = None
    """The frames the encoder takes (`capture/frames.py`; the paper: 128×128), saved in the
    checkpoint: the imitation policy built on this encoder, and the explorer's PPO on that
    policy, take it from here. None: an `image_size` square, else 128×128."""
    feature_dim: int = 512
    """Length of the feature vector (`FeatureEncoder.out_dim`)."""
    pool: int = 3
    """The trunk's output is average-pooled to pool×pool before the projection (keeps where
    things are, which tells turning from strafing)."""
    hidden: int = 512
    """Width of the inverse-dynamics head."""
    trunk: str = "alexnet"
    """`alexnet` (the paper's), or `compact`: the detector's compact body (GroupNorm ResNet), so
    that the encoder trained by masked inverse dynamics on unlabelled play can start a
    detector (`train detector --backbone compact --pretrained ENCODER.ckpt`): domain
    pretraining where no COCO weights can be had."""
    pretrained: str = "imagenet"
    """`imagenet` (torchvision's AlexNet weights; random init, said in the log, when they cannot
    be had), `none`, or the path of an encoder checkpoint to continue from."""
    mask_prob: float = 1.0
    """Chance that a training pair has one of its two frames (chosen at random) OD-masked."""
    lr: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 1e-4
    batch_size: int = 32
    class_weights: list[float] | None = None
    """Cross-entropy weight per action (inverse frequency in the training demos), so that rare
    actions count; None: all 1."""
    val_fraction: float = 0.2
    """Share of each behaviour's episodes held out for the accuracy report."""
    seed: int = 0

    def __post_init__(self, image_size: int | None) -> None:
        self.action_names = [str(a) for a in self.action_names]
        self.frames = FrameSpec.from_dict(self.frames) if self.frames is not None else FrameSpec.square(image_size or 128)
        if len(self.action_names) < 2:
            raise UserError(f"encoder: the key map needs at least two actions, got {self.action_names}")
        if self.trunk not in TRUNKS:
            raise UserError(f"--trunk {self.trunk!r}: use {' or '.join(TRUNKS)}")
        if min(self.frames.size) < MIN_INPUT:
            raise UserError(f"--image-size {min(self.frames.size)}: the encoder's trunk needs at least {MIN_INPUT} pixels")
        if self.feature_dim < 1 or self.pool < 1 or self.hidden < 1:
            raise UserError("encoder: feature_dim, pool and hidden must be positive")
        if not 0 <= self.mask_prob <= 1:
            raise UserError(f"mask probability {self.mask_prob}: between 0 and 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UserError(f"--lr {self.lr}: must be a positive number")
        if self.batch_size < 1:
            raise UserError(f"--batch-size {self.batch_size}: at least 1")
        if self.class_weights is not None:
            self.class_weights = [float(w) for w in self.class_weights]
            if len(self.class_weights) != len(self.action_names):
                raise UserError(f"class weights: {len(self.class_weights)} for {len(self.action_names)} actions")

    @property
    def n_actions(self) -> int:
        return len(self.action_names)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EncoderConfig":
        known = {f.name for f in fields(cls)} | {"image_size"}  # a checkpoint's side from before the spec, read
        return cls(**{k: v for k, v in d.items() if k in known})


class CompactTrunk(nn.Module):
    """The detector's compact body as an encoder trunk: its last (stride-16) map."""

    def __init__(self) -> None:
        super().__init__()
        self.body = CompactBody(WIDTHS, BLOCKS)
        self.channels = WIDTHS[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)[-1]


class FeatureEncoder(nn.Module):
    """Conv trunk (AlexNet's, or the detector's compact body) → pool×pool average pool →
    linear → ReLU; [0,1] frames → features."""

    def __init__(self, feature_dim: int = 512, pool: int = 3, trunk: str = "alexnet") -> None:
        super().__init__()
        from torchvision.models import alexnet

        if trunk == "compact":
            self.trunk = CompactTrunk()
            channels = self.trunk.channels
        else:
            # AlexNet's conv layers without its last max-pool: at 64 px that pool would leave a
            # 1×1 map, and where things moved is what tells a turn from a strafe.
            self.trunk = alexnet(weights=None).features[:-1]
            channels = TRUNK_CHANNELS
        self.trunk_name = trunk
        self.pool = nn.AdaptiveAvgPool2d(pool)
        self.proj = nn.Linear(channels * pool * pool, feature_dim)
        self.out_dim = feature_dim
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        self._int8: Int8Convolutions | None = None  # `quantise`; a plain attribute, not a submodule

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        if frames.ndim != 4 or frames.shape[1] != 3:
            raise ValueError(f"FeatureEncoder: frames of shape {tuple(frames.shape)}, expected B×3×H×W")
        if min(frames.shape[-2:]) < MIN_INPUT:
            raise ValueError(f"FeatureEncoder: frames of {tuple(frames.shape[-2:])} pixels; the trunk needs {MIN_INPUT} or more")
        if self._int8 is not None:
            return self._int8(frames)
        return self.features(frames)

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        """The network itself, without `forward`'s checks (what `quantise` traces)."""
        x = (frames - self.mean) / self.std
        x = self.pool(self.trunk(x)).flatten(1)
        return F.relu(self.proj(x))

    @property
    def int8(self) -> bool:
        """Whether `quantise` was called (its convolutions int8 once calibrated)."""
        return self._int8 is not None

    def quantise(self, calibration_frames: int = CALIBRATION_FRAMES) -> "FeatureEncoder":
        """From now on this encoder's convolutions and projection run in int8 on the CPU, their
        activation ranges observed on the next `calibration_frames` frames it encodes (answered
        in fp32 meanwhile): `perception/int8.py`. For an encoder that no longer learns; its
        parameters and state dict stay fp32. A second call changes nothing. Returns itself."""
        if self._int8 is None:
            if self.proj.weight.device.type != "cpu":
                raise ValueError(f"int8 convolutions run on the CPU; this encoder is on {self.proj.weight.device}")
            example = torch.zeros(1, 3, MIN_INPUT, MIN_INPUT).contiguous(memory_format=torch.channels_last)
            self._int8 = Int8Convolutions(_Features(self), example, calibration_frames)
        return self

    def load_imagenet(self) -> bool:
        """Load torchvision's ImageNet AlexNet weights into the trunk; False when they cannot be
        had (not cached, no network): the trunk keeps its random init."""
        from torchvision.models import AlexNet_Weights

        if self.trunk_name != "alexnet":
            log.warning("no ImageNet weights for the %s trunk; the encoder starts from random init", self.trunk_name)
            return False
        try:
            state = AlexNet_Weights.IMAGENET1K_V1.get_state_dict(progress=True, check_hash=True)
        except Exception as e:
            log.warning("ImageNet weights for AlexNet are not available (%s: %s); the encoder starts from random init "
                        "(use --pretrained none to skip the attempt)", type(e).__name__, str(e)[:120])
            return False
        trunk = {k.removeprefix("features."): v for k, v in state.items() if k.startswith("features.")}
        self.trunk.load_state_dict(trunk)
        return True


class _Features(nn.Module):
    """An encoder's `features` as a module's forward: what torch.fx traces for `quantise`."""

    def __init__(self, encoder: FeatureEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.encoder.features(frames)


def frames_to_float(frames: torch.Tensor) -> torch.Tensor:
    """uint8 B×3×H×W → float in [0, 1]."""
    return frames.float().div(255.0) if frames.dtype == torch.uint8 else frames


class InverseDynamics(nn.Module):
    """Predicts the action between two adjacent frames from their encoder features."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = FeatureEncoder(config.feature_dim, config.pool, config.trunk)
        d = self.encoder.out_dim
        self.head = nn.Sequential(
            nn.Linear(3 * d, config.hidden), nn.LayerNorm(config.hidden), nn.ReLU(inplace=True),
            nn.Linear(config.hidden, config.n_actions),
        )

    def forward(self, prev: torch.Tensor, curr: torch.Tensor) -> torch.Tensor:
        """Action logits B×n_actions for float B×3×H×W frame pairs in [0, 1]."""
        f = self.encoder(torch.cat([prev, curr]))
        f0, f1 = f.chunk(2)
        return self.head(torch.cat([f0, f1, f1 - f0], dim=1))


def mask_one_of_two(prev: torch.Tensor, curr: torch.Tensor, prev_box: torch.Tensor, curr_box: torch.Tensor,
                    mask_prob: float, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """OD-mask, in each pair picked with `mask_prob`, one of the two frames (each equally likely)."""
    b = len(prev)
    r = torch.rand(b, generator=generator)
    which = torch.rand(b, generator=generator) < 0.5  # True: mask prev
    masked = (r < mask_prob).to(prev.device)
    which = which.to(prev.device)
    m_prev = masked & which
    m_curr = masked & ~which
    prev = torch.where(m_prev[:, None, None, None], od_mask_torch(prev, prev_box), prev)
    curr = torch.where(m_curr[:, None, None, None], od_mask_torch(curr, curr_box), curr)
    return prev, curr


class InverseDynamicsModule(L.LightningModule):
    """Trains `InverseDynamics` by cross-entropy on masked frame pairs; logs loss and accuracy."""

    def __init__(self, **config: Any) -> None:
        super().__init__()
        cfg = EncoderConfig(**config)
        self.save_hyperparameters(asdict(cfg))
        self.config = cfg
        self.model = InverseDynamics(cfg)
        weights = torch.tensor(cfg.class_weights) if cfg.class_weights else torch.ones(cfg.n_actions)
        self.register_buffer("class_weights", weights.float(), persistent=False)
        self.diverged = False

    def _step(self, batch, generator: torch.Generator | None = None):
        prev, curr = frames_to_float(batch.prev), frames_to_float(batch.curr)
        prev, curr = mask_one_of_two(prev, curr, batch.prev_box, batch.curr_box, self.config.mask_prob, generator)
        logits = self.model(prev, curr)
        loss = F.cross_entropy(logits, batch.action, weight=self.class_weights)
        acc = (logits.argmax(1) == batch.action).float().mean()
        return loss, acc

    def training_step(self, batch, batch_idx: int):
        loss, acc = self._step(batch)
        if not torch.isfinite(loss):
            log.error("non-finite inverse-dynamics loss at step %d; stopping: lower --lr", self.global_step)
            self.diverged = True
            self.trainer.should_stop = True
            return None
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch.action))
        self.log("train/acc", acc, prog_bar=True, batch_size=len(batch.action))
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        g = torch.Generator().manual_seed(batch_idx)  # the same masks every epoch
        loss, acc = self._step(batch, g)
        self.log("val/loss", loss, prog_bar=True, batch_size=len(batch.action))
        self.log("val/acc", acc, prog_bar=True, batch_size=len(batch.action))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        tag_checkpoint(checkpoint, "encoder")


def load_pretrained(model: InverseDynamics) -> str:
    """Load the starting weights the config names into `model`; returns what, for the log."""
    cfg = model.config
    if cfg.pretrained == "none":
        return "random init (--pretrained none)"
    if cfg.pretrained == "imagenet":
        if model.encoder.load_imagenet():
            return "ImageNet AlexNet weights"
        return "random init (ImageNet weights not available)"
    old_cfg, state = read_checkpoint(cfg.pretrained, "encoder")
    old = EncoderConfig.from_dict(old_cfg)
    if (old.feature_dim, old.pool, old.trunk) != (cfg.feature_dim, cfg.pool, cfg.trunk):
        raise UserError(f"--pretrained {cfg.pretrained}: its encoder has feature_dim {old.feature_dim}, pool {old.pool}, "
                        f"trunk {old.trunk}; this one {cfg.feature_dim}, {cfg.pool}, {cfg.trunk}")
    if old.action_names == cfg.action_names and old.hidden == cfg.hidden:
        model.load_state_dict(state)
        return f"encoder checkpoint {cfg.pretrained}"
    model.encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")})
    return f"encoder checkpoint {cfg.pretrained} (new head: the actions differ)"


LEARNT_LITTLE = 2.0
"""An encoder whose held-out balanced accuracy is under this many times chance is said to have
learnt little (the park's demo encoder: 56.5 % against 11.1 %; level-walk demos of Freedoom
levels after 3 epochs: 14.8 % against 10 %)."""


@dataclass
class IdmReport:
    """Held-out inverse-dynamics accuracy per action, with the baselines that put it in context.

    `balanced` is the mean accuracy over the actions that occur in the held-out pairs; any
    predictor that ignores the frames scores `chance` = 1/(number of such actions) on it, however
    skewed the actions are. `majority` is the plain accuracy of always answering the training
    demos' most common action.
    """

    actions: list[str]
    samples: list[int]
    accuracy: list[float]
    overall: float
    balanced: float
    chance: float
    majority: float

    def learnt_little(self) -> str | None:
        """A line saying that the encoder has learnt little of what the actions do (balanced
        accuracy under `LEARNT_LITTLE` × chance), or None. Everything built on the encoder (the
        policies, the explorer's PPO, the episodic bonus) sees its features, so a user should know
        before training on them."""
        if self.balanced >= LEARNT_LITTLE * self.chance - 1e-9:  # a sum of per-action shares: not exact
            return None
        return (f"the encoder learnt little: balanced accuracy {100 * self.balanced:.1f} % against chance "
                f"{100 * self.chance:.1f} % (under {LEARNT_LITTLE:g}× chance), so the policies and explorers built on it see "
                "features that hardly follow the player's actions; train it longer (--epochs) and on demos with more turning "
                "(demos --behavior inspect): docs/benchmarks/explorer.md measures both on level demos")

    @classmethod
    def from_counts(cls, actions: list[str], total: list[int], correct: list[int], train_counts: list[int] | None = None) -> "IdmReport":
        n = sum(total)
        if n == 0:
            raise ValueError("no held-out samples")
        seen = [i for i, t in enumerate(total) if t > 0]
        acc = [correct[i] / total[i] if total[i] else float("nan") for i in range(len(total))]
        common = max(range(len(total)), key=lambda i: (train_counts or total)[i])
        return cls(
            actions=list(actions), samples=list(total), accuracy=acc, overall=sum(correct) / n,
            balanced=sum(acc[i] for i in seen) / len(seen), chance=1.0 / len(seen), majority=total[common] / n,
        )


@torch.no_grad()
def action_accuracy(model: InverseDynamics, loader, mask_prob: float | None = None) -> tuple[list[int], list[int]]:
    """(held-out samples, correct predictions) per action, with the training-time masking
    (seeded per batch, so the figure is reproducible)."""
    model.eval()
    device = next(model.parameters()).device
    n = model.config.n_actions
    total, correct = [0] * n, [0] * n
    p = model.config.mask_prob if mask_prob is None else mask_prob
    for i, batch in enumerate(loader):
        prev = frames_to_float(batch.prev.to(device))
        curr = frames_to_float(batch.curr.to(device))
        g = torch.Generator().manual_seed(i)
        prev, curr = mask_one_of_two(prev, curr, batch.prev_box.to(device), batch.curr_box.to(device), p, g)
        pred = model(prev, curr).argmax(1).cpu()
        for a, y in zip(batch.action.tolist(), pred.tolist()):
            total[a] += 1
            correct[a] += int(a == y)
    return total, correct


def load_inverse_dynamics(path: str | Path, map_location: str | torch.device = "cpu") -> InverseDynamics:
    """The whole inverse-dynamics model (encoder and head) of a checkpoint, in eval mode."""
    config, state = read_checkpoint(path, "encoder", map_location)
    model = InverseDynamics(EncoderConfig.from_dict(config))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise UserError(f"checkpoint {path}: its weights do not fit its own config ({len(missing)} missing, {len(unexpected)} unexpected)")
    return model.to(map_location).eval()


def training_memory(frames: FrameSpec, feature_dim: int, trunk: str, batch_size: int) -> int:
    """Bytes that training an encoder of this shape takes (`train encoder`, checked before it
    starts): the inverse-dynamics model's weights with AdamW, and the activations of a batch of
    frame pairs through the trunk, counted on the meta device."""
    from playtester.perception.training import activation_count, on_meta, parameter_count, training_bytes

    model = on_meta(lambda: InverseDynamics(EncoderConfig(action_names=["a", "b"], feature_dim=feature_dim, trunk=trunk,
                                                          frames=frames, pretrained="none")))
    per_frame = activation_count(model.encoder, (1, 3, frames.height, frames.width))
    return training_bytes(parameter_count(model), activations=2 * batch_size * per_frame)


def load_encoder(path: str | Path, map_location: str | torch.device = "cpu") -> FeatureEncoder:
    """The trained `FeatureEncoder` of a checkpoint, in eval mode; its config is at `.config`."""
    idm = load_inverse_dynamics(path, map_location)
    encoder = idm.encoder
    encoder.config = idm.config  # type: ignore[attr-defined]
    return encoder.eval()
