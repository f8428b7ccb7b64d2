"""Networks that play, in int8 on the CPU (`acting: int8`).

Two kinds of layer, two kinds of quantisation:

- `int8_layers`: GRUs, LSTMs and linear layers dynamically quantised (weights int8 per tensor,
  activations quantised as they come). No calibration. At the paper's shape the GRUs and heads
  are ~27 MB of fp32 weights read for every frame; int8 reads a quarter of that.
- `Int8Convolutions`: a `FeatureEncoder`'s convolutions statically quantised (weights int8 per
  channel, activations int8 with ranges observed beforehand, torch.ao's FX graph mode). Static
  quantisation needs activation ranges, and a run's frames are only known once it runs: the first
  `calibration_frames` frames go through the fp32 network with observers (their features are
  fp32's), then the network is converted and every later frame runs in int8. The trunk is the
  larger half of every decision and test step; int8 runs it in about 0.4 of the time with
  features within about 1 % of fp32's (scripts/bench_int8.py, docs/benchmarks/ppo-and-loop.md).

Both are for networks that act and do not learn. The fp32 weights stay where they were: a
checkpoint saved afterwards holds fp32, and `FeatureEncoder.state_dict()` does not change.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

INT8_LAYERS = {nn.GRU, nn.LSTM, nn.Linear}
CALIBRATION_FRAMES = 64
"""Frames observed before an encoder's convolutions turn int8 (`Int8Convolutions`)."""


def int8_layers(module: nn.Module) -> nn.Module:
    """`module` with every GRU, LSTM and linear layer in it dynamically quantised to int8, in place;
    returned, since a bare layer is replaced, not changed. For networks that act and do not learn:
    the live test policy (`LivePolicy.quantise`), the explorer's rollout copy
    (exploration/acting.py)."""
    with warnings.catch_warnings():  # torch.ao.quantization's notice that torchao is its successor
        warnings.simplefilter("ignore")
        # quantize_dynamic swaps children; a wrapper lets a bare layer be swapped too
        wrapped = torch.ao.quantization.quantize_dynamic(nn.Sequential(module), INT8_LAYERS, dtype=torch.qint8, inplace=True)
    return wrapped[0].eval()


class Int8Convolutions:
    """A frozen copy of `body` (a module mapping float frames to features, traceable by torch.fx),
    observed on its first `calibration_frames` frames, then converted to int8.

    Called like the module: float B×3×H×W → B×D float features. Until `calibrated`, the answers
    are the fp32 copy's. Deliberately not an `nn.Module`: the encoder that holds it keeps its own
    parameters and state dict, and this copy never travels with `.to()` or a checkpoint."""

    def __init__(self, body: nn.Module, example: torch.Tensor, calibration_frames: int = CALIBRATION_FRAMES) -> None:
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_fx

        if calibration_frames < 1:
            raise ValueError(f"calibration_frames={calibration_frames}: at least 1 frame is needed to observe the ranges")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mapping = get_default_qconfig_mapping(torch.backends.quantized.engine)
            self._observed: nn.Module | None = prepare_fx(copy.deepcopy(body).eval(), mapping, example_inputs=(example,))
        self._int8: nn.Module | None = None
        self.frames_left = calibration_frames

    @property
    def calibrated(self) -> bool:
        return self._int8 is not None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._int8 is not None:
            return self._int8(x)
        out = self._observed(x)
        self.frames_left -= len(x)
        if self.frames_left <= 0:
            self._convert()
        return out

    def _convert(self) -> None:
        from torch.ao.quantization.quantize_fx import convert_fx

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._int8 = convert_fx(self._observed)
        self._observed = None
