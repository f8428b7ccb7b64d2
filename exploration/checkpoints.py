"""Checkpoints: atomic writes, random number generator state, rebuilding an agent from a file."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from playtester.capture.errors import UserError
from playtester.exploration.actor_critic import build_actor_critic


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(path: Path, state: dict[str, Any]) -> Path:
    """Write atomically: `NAME.partial`, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint {path}: no such file; train first, or check --run-dir")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # a truncated or foreign file
        raise UserError(f"checkpoint {path}: cannot be read ({type(e).__name__}); it may be damaged") from None


def load_agent(path: str | Path) -> nn.Module:
    """The actor-critic of a checkpoint, rebuilt from the checkpoint alone."""
    ckpt = load_checkpoint(path)
    agent = build_actor_critic(ckpt["agent_spec"])
    agent.load_state_dict(ckpt["agent"])
    return agent
