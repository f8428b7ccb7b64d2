"""Ensemble Random Network Distillation: novelty as the disagreement of N predictors (PPGTA §IV-C).

A fixed random target network projects a 64×64 frame to 256 numbers; N predictors learn that
projection by MSE on a replay buffer of recent frames. On frames like those trained on the
predictors agree with the target, hence with each other; on new frames their random
initialisations still show, and they disagree. The intrinsic reward is that disagreement:

    r^e = mean_d  (1/N) Σ_i (ô_i,d − ō_d)²        (population variance over the ensemble, mean over d)

With one predictor (the Inspector baseline) there is no ensemble, and the reward is classic RND's
prediction error `mean_d (ô_d − o_d)²`.

What makes RND work in practice (Burda et al.; CleanRL's `ppo_rnd_envpool.py`) is kept: the target
is frozen (`requires_grad=False`); inputs are normalised by running per-pixel statistics, warmed up
before any reward is given, and clipped to [−5, 5]; rewards are divided by the running standard
deviation of their discounted sum; the explorer treats intrinsic returns as non-episodic.

The trunk is pluggable: `SmallConvTrunk` by default; pass `trunk_factory` to use another one, e.g.
the perception `FeatureEncoder`'s conv trunk (then set `normalize_obs=False`, as a trained trunk
expects frames in [0, 1]).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

from playtester.capture.frames import FrameSpec


@dataclass
class RNDConfig:
    """Ensemble RND. Defaults follow PPGTA (5 predictors, 1024-frame replay, MLP 512 → 256)."""

    num_predictors: int = 5
    """N, the ensemble size. 1 gives classic single-predictor RND (the Inspector baseline)."""
    predictors: Literal["independent", "shared_trunk"] = "independent"
    """`independent`: each predictor has its own trained trunk (the paper). `shared_trunk`: the fast
    option — one frozen random trunk shared by N trained MLP heads (N× cheaper convolutions)."""
    reward: Literal["ensemble_variance", "prediction_error"] = "ensemble_variance"
    """`ensemble_variance` (PPGTA, needs N ≥ 2) or `prediction_error` (classic RND, Inspector)."""
    in_channels: int = 3
    """Channels of the input frames (3 for OD-masked RGB)."""
    frames: FrameSpec = field(default_factory=lambda: FrameSpec.square(64))
    """The input frames (RND's own networks, not the encoder's: other frames are resized to it by
    `capture/frames.py`'s one resize); a saved config's `{width, height}` is read back as a spec."""
    hidden_dim: int = 512
    """Width of the MLP after the trunk (target and predictors)."""
    out_dim: int = 256
    """Size of the target's projection, the thing predicted."""
    buffer_size: int = 1024
    """Replay buffer of the most recent frames the predictors are trained on."""
    batch_size: int = 128
    """Frames per predictor per training step (each predictor draws its own: bootstrap diversity)."""
    train_steps: int = 2
    """Predictor training steps after each rollout. 2, not the 8 of earlier versions: RND's training
    was the largest part of a CPU run at 8, and with 2 the predictors catch up with new frames more
    slowly, so novelty fades more slowly: pathway coverage 71 against 57 % at a fixed budget
    (docs/benchmarks/ppo-and-loop.md)."""
    learning_rate: float = 1e-4
    """Adam learning rate of the predictors."""
    normalize_obs: bool = True
    """Normalise inputs by running per-pixel mean and std (clipped to ±`obs_clip`)."""
    obs_clip: float = 5.0
    """Clip of the normalised inputs."""
    obs_warmup_frames: int = 256
    """Frames seen before any reward is given or any training done (the statistics' warm-up)."""
    reward_gamma: float = 0.99
    """Discount of the running sum whose std normalises the reward (the intrinsic value head's γ)."""

    def __post_init__(self) -> None:
        if self.num_predictors < 1:
            raise ValueError(f"RND num_predictors={self.num_predictors}: need at least 1")
        if self.reward == "ensemble_variance" and self.num_predictors < 2:
            raise ValueError("RND reward='ensemble_variance' needs num_predictors >= 2; use reward='prediction_error' for one predictor")
        if self.predictors not in ("independent", "shared_trunk"):
            raise ValueError(f"RND predictors={self.predictors!r}: use 'independent' or 'shared_trunk'")
        if self.reward not in ("ensemble_variance", "prediction_error"):
            raise ValueError(f"RND reward={self.reward!r}: use 'ensemble_variance' or 'prediction_error'")
        if self.buffer_size < 1 or self.batch_size < 1 or self.train_steps < 0:
            raise ValueError("RND buffer_size and batch_size must be >= 1, train_steps >= 0")
        self.frames = FrameSpec.from_dict(self.frames)
        if min(self.frames.size) < 36:
            raise ValueError(f"RND frames {self.frames.width}×{self.frames.height}: the conv trunk needs at least 36 pixels")
        if not 0.0 <= self.reward_gamma < 1.0:
            raise ValueError(f"RND reward_gamma={self.reward_gamma}: must be in [0, 1)")


class RunningMeanStd(nn.Module):
    """Running mean and variance over batches (Chan et al.'s parallel update), in float64.

    Gymnasium's `wrappers.utils.RunningMeanStd` is the same update in NumPy; this one keeps its
    state in the module's buffers, so that it moves to the run's device with the predictors and
    is saved and restored with them in the explorer's checkpoint."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold in a batch (first dimension) of samples."""
        x = x.detach().to(torch.float64)
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        batch_count = x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.mean.copy_(self.mean + delta * batch_count / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    @property
    def std(self) -> Tensor:
        return self.var.sqrt()


class SmallConvTrunk(nn.Module):
    """Nature-DQN-style convolutions for 64×64 frames → a flat feature vector (1024 for 64×64)."""

    def __init__(self, in_channels: int = 3, frames: FrameSpec = FrameSpec.square(64)):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.LeakyReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.LeakyReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.LeakyReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            self.out_dim = int(self.net(torch.zeros(1, in_channels, frames.height, frames.width)).shape[1])

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


def _init_orthogonal(module: nn.Module, gain: float = np.sqrt(2)) -> None:
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, gain)
            nn.init.zeros_(m.bias)


def _feature_dim(trunk: nn.Module, cfg: RNDConfig) -> int:
    with torch.no_grad():
        return int(trunk(torch.zeros(1, cfg.in_channels, cfg.frames.height, cfg.frames.width)).flatten(1).shape[1])


def _head(in_dim: int, cfg: RNDConfig) -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(in_dim, cfg.hidden_dim), nn.ReLU(), nn.Linear(cfg.hidden_dim, cfg.out_dim))


def _freeze(module: nn.Module) -> nn.Module:
    for p in module.parameters():
        p.requires_grad = False
    return module.eval()


def frames_to_rnd_input(frames: np.ndarray | Tensor, spec: FrameSpec = FrameSpec.square(64)) -> Tensor:
    """Env frames (`B×H×W×C` uint8) → RND input (`B×C×H×W` uint8, at `spec`), by the one resize (`capture/frames.py`)."""
    if isinstance(frames, Tensor):
        frames = frames.detach().cpu().numpy()
    if frames.ndim != 4:
        raise ValueError(f"RND frames should be B×H×W×C images, got shape {frames.shape}")
    frames = spec.resize_batch(frames)
    return torch.from_numpy(np.ascontiguousarray(frames.transpose(0, 3, 1, 2)))


class EnsembleRND(nn.Module):
    """Frozen random target, N predictors, replay buffer, observation and reward normalisation.

    Use, once per rollout: `observe(frames)` for every new frame batch (statistics and replay),
    `reward(frames)` for the raw novelty of each frame, `normalize_rewards(raw)` on the rollout's
    `T×N` raw rewards, then `train_predictors(rnd, optimizer, fabric)` with the module and its
    `configure_optimizer()` as `fabric.setup` returned them. Frames are `B×C×S×S`, uint8 or float
    in [0, 1]. `forward(x)` is what is trained: the predictors' loss on prepared inputs.
    """

    def __init__(self, config: RNDConfig | None = None, trunk_factory: Callable[[], nn.Module] | None = None):
        super().__init__()
        cfg = self.config = config or RNDConfig()
        make_trunk = trunk_factory or (lambda: SmallConvTrunk(cfg.in_channels, cfg.frames))

        target_trunk = make_trunk()
        features = _feature_dim(target_trunk, cfg)
        self.target = nn.Sequential(target_trunk, _head(features, cfg))
        _init_orthogonal(self.target)
        _freeze(self.target)

        if cfg.predictors == "shared_trunk":
            self.shared_trunk: nn.Module | None = make_trunk()
            _init_orthogonal(self.shared_trunk)
            _freeze(self.shared_trunk)
            self.predictors = nn.ModuleList(_head(features, cfg) for _ in range(cfg.num_predictors))
        else:
            self.shared_trunk = None
            self.predictors = nn.ModuleList(
                nn.Sequential(make_trunk(), _head(features, cfg)) for _ in range(cfg.num_predictors)
            )
        _init_orthogonal(self.predictors)

        self.obs_rms = RunningMeanStd((cfg.in_channels, cfg.frames.height, cfg.frames.width))
        self.reward_rms = RunningMeanStd(())
        self.register_buffer("replay", torch.zeros(cfg.buffer_size, cfg.in_channels, cfg.frames.height, cfg.frames.width, dtype=torch.uint8))
        self.register_buffer("replay_size", torch.tensor(0))
        self.register_buffer("replay_pos", torch.tensor(0))
        self.register_buffer("frames_seen", torch.tensor(0))
        self.register_buffer("reward_filter", torch.zeros(0, dtype=torch.float64))

    def configure_optimizer(self) -> torch.optim.Optimizer:
        """Adam over the predictors' trained weights (the target and a shared trunk stay frozen)."""
        return torch.optim.Adam([p for p in self.predictors.parameters() if p.requires_grad], lr=self.config.learning_rate)

    # -- inputs ----------------------------------------------------------------------------------
    def _check(self, frames: Tensor) -> None:
        cfg = self.config
        expected = (cfg.in_channels, cfg.frames.height, cfg.frames.width)
        if frames.ndim != 4 or tuple(frames.shape[1:]) != expected:
            raise ValueError(f"RND expects frames B×{expected[0]}×{expected[1]}×{expected[2]}, got {tuple(frames.shape)}; see frames_to_rnd_input")

    def _as_uint8(self, frames: Tensor) -> Tensor:
        if frames.dtype == torch.uint8:
            return frames
        return (frames.clamp(0, 1) * 255).round().to(torch.uint8)

    def prepare(self, frames: Tensor) -> Tensor:
        """Frames → network input: scaled to [0, 1], then normalised and clipped when configured."""
        self._check(frames)
        device = self.obs_rms.mean.device
        x = frames.to(device)
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        if self.config.normalize_obs:
            mean = self.obs_rms.mean.float()
            std = self.obs_rms.std.float()
            x = ((x - mean) / (std + 1e-8)).clamp(-self.config.obs_clip, self.config.obs_clip)
        return x

    @torch.no_grad()
    def observe(self, frames: Tensor) -> None:
        """Fold new frames into the input statistics and the replay buffer (the newest are kept)."""
        self._check(frames)
        frames_u8 = self._as_uint8(frames).to(self.replay.device)
        self.obs_rms.update(frames_u8.float() / 255.0)
        self.frames_seen += frames_u8.shape[0]
        cap = self.config.buffer_size
        for frame in frames_u8[-cap:]:
            self.replay[int(self.replay_pos)] = frame
            self.replay_pos.fill_((int(self.replay_pos) + 1) % cap)
        self.replay_size.fill_(min(cap, int(self.replay_size) + frames_u8.shape[0]))

    @property
    def warmed_up(self) -> bool:
        """Whether enough frames were seen for the input statistics to be trusted."""
        return int(self.frames_seen) >= self.config.obs_warmup_frames

    # -- networks --------------------------------------------------------------------------------
    def target_features(self, x: Tensor) -> Tensor:
        """The target's projection `o` of prepared inputs (`B×out_dim`)."""
        return self.target(x)

    def predictions(self, x: Tensor) -> Tensor:
        """Every predictor's `ô_i` of prepared inputs (`N×B×out_dim`)."""
        if self.shared_trunk is not None:
            with torch.no_grad():
                features = self.shared_trunk(x)
            return torch.stack([head(features) for head in self.predictors])
        return torch.stack([predictor(x) for predictor in self.predictors])

    @staticmethod
    def ensemble_variance(predictions: Tensor) -> Tensor:
        """`mean_d (1/N) Σ_i (ô_i,d − ō_d)²` for `N×B×D` predictions → `B`."""
        return predictions.var(dim=0, unbiased=False).mean(dim=-1)

    @torch.no_grad()
    def reward(self, frames: Tensor) -> Tensor:
        """Raw novelty of each frame (`B`); zeros until the input statistics are warmed up."""
        if not self.warmed_up:
            self._check(frames)
            return torch.zeros(frames.shape[0])
        x = self.prepare(frames)
        predictions = self.predictions(x)
        if self.config.reward == "ensemble_variance":
            r = self.ensemble_variance(predictions)
        else:
            r = ((predictions - self.target_features(x)) ** 2).mean(dim=-1).mean(dim=0)
        return r.float().cpu()

    # -- reward normalisation --------------------------------------------------------------------
    @torch.no_grad()
    def normalize_rewards(self, raw: Tensor) -> Tensor:
        """Divide a rollout's raw rewards (`T×N`) by the running std of their discounted sum.

        The discounted sum runs per environment across rollouts and across episode boundaries
        (intrinsic returns are non-episodic); its running variance is updated with this rollout.
        """
        raw = raw.detach().to(torch.float64).cpu()
        num_envs = raw.shape[1]
        if self.reward_filter.shape != (num_envs,):
            self.reward_filter = torch.zeros(num_envs, dtype=torch.float64)
        sums = torch.empty_like(raw)
        running = self.reward_filter.clone()
        for t in range(raw.shape[0]):
            running = running * self.config.reward_gamma + raw[t]
            sums[t] = running
        self.reward_filter = running
        if self.warmed_up:
            self.reward_rms.update(sums.flatten())
        return (raw / (self.reward_rms.std.cpu() + 1e-8)).float()

    # -- training --------------------------------------------------------------------------------
    def predictor_loss(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Mean over predictors of the MSE to the target, each on its own bootstrap draw of `x`."""
        with torch.no_grad():
            target = self.target_features(x)
        n = x.shape[0]
        losses = []
        if self.shared_trunk is not None:
            with torch.no_grad():
                features = self.shared_trunk(x)
        for i, predictor in enumerate(self.predictors):
            idx = torch.randint(0, n, (min(n, self.config.batch_size),), generator=generator, device=x.device)
            pred = predictor(features[idx]) if self.shared_trunk is not None else predictor(x[idx])
            losses.append(((pred - target[idx]) ** 2).mean())
        return torch.stack(losses).mean()

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """The training loss on prepared inputs (see `predictor_loss`)."""
        return self.predictor_loss(x, generator)

    def replay_sample(self, generator: torch.Generator | None = None) -> Tensor:
        """Prepared inputs of a random draw from the replay buffer (twice a predictor's batch)."""
        size = int(self.replay_size)
        idx = torch.randint(0, size, (min(size, self.config.batch_size * 2),), generator=generator, device=self.replay.device)
        return self.prepare(self.replay[idx])

    # -- checkpoints -----------------------------------------------------------------------------
    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The discounted-sum filter is sized by the number of environments, known only at run time.
        key = prefix + "reward_filter"
        if key in state_dict:
            self.reward_filter = torch.zeros_like(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def train_predictors(rnd: nn.Module, optimizer: torch.optim.Optimizer, fabric: Any, steps: int | None = None,
                     generator: torch.Generator | None = None) -> float:
    """Train the predictors on the replay buffer under `fabric` (`rnd` and `optimizer` as
    `fabric.setup` returned them); the mean loss, nan before the warm-up. `generator` draws the
    replay samples and the predictors' bootstrap batches (default: torch's global one)."""
    steps = rnd.config.train_steps if steps is None else steps
    if not rnd.warmed_up or int(rnd.replay_size) == 0 or steps == 0:
        return float("nan")
    module = getattr(rnd, "module", rnd)  # under Fabric: its wrapper has the forward, the module the rest
    total = 0.0
    for _ in range(steps):
        loss = rnd(module.replay_sample(generator), generator)
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
        total += float(loss.detach())
    return total / steps
