"""The explorer's decisions in int8 while PPO learns in fp32 (`PPOConfig.acting = "int8"`).

Two parts, both from perception/int8.py:

- `int8_frozen_encoder`: the actor-critic's frozen encoder, quantised once for the whole run (its
  convolutions int8 once they have seen the run's first frames). It is the one encoder of the
  run: the features the rollout stores, the update learns from and the preference policy reads
  all come from it, so acting and learning see the same features. Its weights, and the
  checkpoint, stay fp32.
- `int8_actor`: a copy of the actor-critic with its GRUs and linear layers dynamically quantised
  (weights int8, per tensor; activations quantised as they come). A decision at the paper's shape
  reads about 30 MB of recurrent and head weights for one frame: on a CPU it waits on memory,
  not on arithmetic, and int8 reads a quarter of the bytes. The frozen encoder is shared, not
  copied.

PPO collects with the copy and learns with the fp32 network: the rollout's log-probabilities
and values are the copy's, so the update's probability ratio starts at the copy's small error
from the fp32 policy instead of at exactly 1, and PPO's clip bounds it like any other gap
between the policy that acted and the one being updated. The copy is made anew before every
rollout, so it always acts with the weights of the last update. `scripts/bench_int8.py` measures
how far its actions are from the fp32 policy's on the demos, and its time (docs/benchmarks/ppo-and-loop.md).
"""

from __future__ import annotations

import copy

import torch.nn as nn

from playtester.perception.int8 import CALIBRATION_FRAMES, int8_layers


def int8_actor(module: nn.Module) -> nn.Module:
    """A copy of the actor-critic `module` for a rollout's decisions: every GRU, LSTM and linear
    layer outside a frozen encoder in int8 (`int8_layers`); the frozen encoder (`frozen_trunk`) is
    the very module of `module`. `module` is not changed."""
    actor = fp32_actor(module)
    shared = actor.encoder if getattr(actor, "frozen_trunk", False) else None
    for name, child in list(actor.named_children()):
        if child is not shared:
            setattr(actor, name, int8_layers(child))
    return actor


def fp32_actor(module: nn.Module) -> nn.Module:
    """A copy of the actor-critic `module` that plays a rollout while `module` itself is updated
    (`PPOConfig.overlap_update`): the weights as they stand now, in eval mode; the frozen encoder
    (`frozen_trunk`), which no update changes, is the very module of `module`."""
    shared = module.encoder if getattr(module, "frozen_trunk", False) else None
    memo = {id(shared): shared} if shared is not None else {}
    return copy.deepcopy(module, memo).eval()


def int8_frozen_encoder(module: nn.Module, calibration_frames: int = CALIBRATION_FRAMES) -> bool:
    """Quantise `module`'s frozen encoder in place (`FeatureEncoder.quantise`: int8 once it has
    encoded `calibration_frames` frames), for the rest of the run; False, and nothing done, for a
    network that trains its whole trunk."""
    if not getattr(module, "frozen_trunk", False):
        return False
    module.encoder.quantise(calibration_frames)
    return True
