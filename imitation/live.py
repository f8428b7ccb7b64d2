"""The policy live, one frame at a time: what the tester loop and `eval policy` call.

`reset()` at the start of a test, then `step(frame, box)` gives the action distribution for the
newest frame, with `box` the OOI under test (None: no object, the frame goes all grayscale). It
computes exactly what the batched forward computes on the same trajectory: the window starts
with the first frame repeated, and the global GRU carries its state step to step.
`step_many(frames, boxes, states)` is the same for several trajectories at once, each with its
own `LiveState`, in one batched pass (what the model server does for every game instance).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from playtester.capture.keymap import KeyMap
from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder, to_input
from playtester.perception.int8 import CALIBRATION_FRAMES, int8_layers
from playtester.perception.od_mask import od_mask


class LivePolicy:
    """`channels_last` keeps the encoder's convolutions in NHWC memory layout: about 15 % faster
    on a CPU (scripts/bench_imitation.py --latency), the same features to float precision."""

    def __init__(self, policy: ImitationPolicy, *, device: str | torch.device = "cpu", channels_last: bool = True) -> None:
        self.policy = policy.to(device).eval()
        self.device = torch.device(device)
        self.cfg: PolicyConfig = policy.cfg
        self.scoring: dict = {}
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.policy.encoder.to(memory_format=self.memory_format)
        self.reset()

    def quantise(self, calibration_frames: int = CALIBRATION_FRAMES) -> "LivePolicy":
        """The whole network in int8 from now on (perception/int8.py): its GRUs and action head
        at once, its encoder's convolutions once they have seen `calibration_frames` frames. A
        step ×0.48 the time on 2 CPU cores, the same most likely action as fp32 on 96 % of the
        demos' steps (docs/benchmarks/ppo-and-loop.md). CPU only; returns itself."""
        if self.device.type != "cpu":
            raise ValueError(f"int8 layers run on the CPU; this policy is on {self.device}")
        self.policy.core = int8_layers(self.policy.core)
        self.policy.encoder.quantise(calibration_frames)
        return self

    @property
    def keymap(self) -> KeyMap:
        return KeyMap.from_dict(self.cfg.keymap, where="policy checkpoint")

    def reset(self) -> None:
        self.state = self.new_state()

    def new_state(self) -> "LiveState":
        """A trajectory's state before its first frame (what `reset` starts; a server keeps one
        per game instance)."""
        return LiveState(window=deque(maxlen=self.cfg.k))

    @torch.inference_mode()
    def features(self, frame: np.ndarray, box=None) -> torch.Tensor:
        return self.features_batch([frame], [box])[0]

    @torch.inference_mode()
    def features_batch(self, frames: list[np.ndarray], boxes: list) -> torch.Tensor:
        """B×D features of frames, each OD-masked by its own box, in one encoder pass."""
        masked = np.stack([od_mask(frame, box) for frame, box in zip(frames, boxes)])
        x = to_input(torch.from_numpy(masked), self.cfg.frames).to(self.device)
        return self.policy.encoder(x.contiguous(memory_format=self.memory_format))

    @torch.inference_mode()
    def step_features(self, feat: torch.Tensor) -> torch.Tensor:
        """Logits for the newest frame given its features (D)."""
        return self.step_states(feat[None], [self.state])[0]

    @torch.inference_mode()
    def step_states(self, feats: torch.Tensor, states: list["LiveState"]) -> torch.Tensor:
        """B×A logits of B trajectories' newest frames (features B×D), each carrying on its own
        state, in one pass of the GRUs; the states move on."""
        for feat, state in zip(feats, states):
            if not state.window:
                state.window.extend([feat] * (self.cfg.k - 1))
            state.window.append(feat)
        windows = torch.stack([torch.stack(list(s.window)) for s in states])[:, None]  # B×1×K×D
        if all(s.h is None for s in states):
            h = None
        else:
            zeros = feats.new_zeros(1, 1, self.cfg.global_hidden)
            h = torch.cat([zeros if s.h is None else s.h for s in states], dim=1)
        logits, _, h_last = self.policy.core.forward_windows(windows, h)
        for i, state in enumerate(states):
            state.h = h_last[:, i : i + 1]
        return logits[:, 0]

    @torch.inference_mode()
    def step(self, frame: np.ndarray, box=None) -> np.ndarray:
        """The action distribution (probabilities) for the newest frame."""
        return self.step_many([frame], [box], [self.state])[0]

    @torch.inference_mode()
    def step_many(self, frames: list[np.ndarray], boxes: list, states: list["LiveState"]) -> np.ndarray:
        """B×A action distributions for B trajectories' newest frames (what `step` computes for
        each, batched: one encoder pass and one GRU pass for all)."""
        logits = self.step_states(self.features_batch(frames, boxes), states)
        return torch.softmax(logits, -1).cpu().numpy()


@dataclass
class LiveState:
    """Where one trajectory stands: the global GRU's state and the window of the last K features."""

    window: deque
    h: torch.Tensor | None = None


def load_policy(path: str | Path, map_location: str | torch.device = "cpu") -> LivePolicy:
    """Rebuild a trained policy from its checkpoint alone (encoder included)."""
    from playtester.perception.training import read_checkpoint

    hp, state = read_checkpoint(path, "policy", map_location)
    cfg = PolicyConfig(**hp["policy"])
    policy = ImitationPolicy(cfg, build_encoder(cfg.encoder))
    policy.load_state_dict(state)
    live = LivePolicy(policy, device=map_location)
    live.scoring = dict(hp.get("scoring") or {})
    return live
