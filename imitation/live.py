"""The policy live, one frame at a time: what the tester loop and `eval policy` call.

`reset()` at the start of a test, then `step(frame, box)` gives the action distribution for the
newest frame, with `box` the OOI under test (None: no object, the frame goes all grayscale). It
computes exactly what the batched forward computes on the same trajectory: the window starts
with the first frame repeated, and the global GRU carries its state step to step.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import torch

from playtester.capture.keymap import KeyMap
from playtester.imitation.policy import ImitationPolicy, PolicyConfig, build_encoder, to_input
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

    @property
    def keymap(self) -> KeyMap:
        return KeyMap.from_dict(self.cfg.keymap, where="policy checkpoint")

    def reset(self) -> None:
        self._h: torch.Tensor | None = None
        self._window: deque[torch.Tensor] = deque(maxlen=self.cfg.k)

    @torch.inference_mode()
    def features(self, frame: np.ndarray, box=None) -> torch.Tensor:
        masked = od_mask(frame, box)
        x = to_input(torch.from_numpy(masked)[None], self.cfg.frames).to(self.device)
        return self.policy.encoder(x.contiguous(memory_format=self.memory_format))[0]

    @torch.inference_mode()
    def step_features(self, feat: torch.Tensor) -> torch.Tensor:
        """Logits for the newest frame given its features (D)."""
        if not self._window:
            for _ in range(self.cfg.k - 1):
                self._window.append(feat)
        self._window.append(feat)
        window = torch.stack(list(self._window))[None, None]  # 1×1×K×D
        logits, _, self._h = self.policy.core.forward_windows(window, self._h)
        return logits[0, 0]

    @torch.inference_mode()
    def step(self, frame: np.ndarray, box=None) -> np.ndarray:
        """The action distribution (probabilities) for the newest frame."""
        logits = self.step_features(self.features(frame, box))
        return torch.softmax(logits, -1).cpu().numpy()


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
