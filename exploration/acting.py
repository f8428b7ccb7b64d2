"""The explorer's decisions in int8 while PPO learns in fp32 (`PPOConfig.acting = "int8"`).

A decision at the paper's network shape reads about 30 MB of recurrent and head weights for one
frame: on a CPU it waits on memory, not on arithmetic. `int8_actor` copies the actor-critic with
its GRUs and linear layers dynamically quantised (weights int8, per tensor; activations quantised
as they come), about a quarter of the bytes; the frozen encoder is shared, not copied, so the
features the rollout stores, and the preference policy's, stay the fp32 encoder's.

PPO collects with the copy and learns with the fp32 network: the rollout's log-probabilities
and values are the copy's, so the update's probability ratio starts at the copy's small error
from the fp32 policy instead of at exactly 1, and PPO's clip bounds it like any other gap
between the policy that acted and the one being updated. The copy is made anew before every
rollout, so it always acts with the weights of the last update. `scripts/bench_int8.py` measures
how far its actions are from the fp32 policy's on the demos, and its time (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import copy

import torch.nn as nn

from playtester.imitation.policy import int8_layers


def int8_actor(module: nn.Module) -> nn.Module:
    """A copy of the actor-critic `module` for a rollout's decisions: every GRU, LSTM and linear
    layer outside a frozen encoder in int8 (`int8_layers`); the frozen encoder (`frozen_trunk`) is
    the very module of `module`. `module` is not changed."""
    shared = module.encoder if getattr(module, "frozen_trunk", False) else None
    memo = {id(shared): shared} if shared is not None else {}
    actor = copy.deepcopy(module, memo).eval()
    for name, child in list(actor.named_children()):
        if child is not shared:
            setattr(actor, name, int8_layers(child))
    return actor
