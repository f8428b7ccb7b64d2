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


def _numpy_globals() -> tuple[Any, ...]:
    """What an explorer checkpoint holds beyond tensors: numpy arrays and scalars (numpy's random
    state, running statistics), allowed by name for `torch.load(weights_only=True)`."""
    multiarray = getattr(np, "_core", None) or np.core  # numpy 2 moved it
    dtypes = (np.uint8, np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64, np.bool_)
    return (multiarray.multiarray._reconstruct, multiarray.multiarray.scalar, np.ndarray, np.dtype,
            *(type(np.dtype(t)) for t in dtypes))


def load_checkpoint(path: str | Path, what: str = "explorer checkpoint") -> dict[str, Any]:
    """An explorer or evolution checkpoint, loaded without running code from the file (tensors,
    numbers and numpy arrays only); a bad file is a `UserError` naming it."""
    from playtester.perception.training import load_torch_file

    if not Path(path).exists():
        raise UserError(f"{what} {path}: no such file; train first, or check --run-dir")
    ckpt = load_torch_file(path, what, "cpu", allow=_numpy_globals())
    if not isinstance(ckpt, dict) or "agent_spec" not in ckpt:
        raise UserError(f"{what} {path}: a PyTorch file, but not one the explorer wrote (no agent in it); "
                        "give the run's explorer checkpoint")
    spec_class = str(ckpt["agent_spec"].get("class", "")) if isinstance(ckpt["agent_spec"], dict) else ""
    if not spec_class.startswith("playtester."):
        raise UserError(f"{what} {path}: its agent class {spec_class!r} is not one of playtester's; not loaded")
    return ckpt


def load_agent(path: str | Path) -> nn.Module:
    """The actor-critic of a checkpoint, rebuilt from the checkpoint alone."""
    ckpt = load_checkpoint(path)
    agent = build_actor_critic(ckpt["agent_spec"])
    agent.load_state_dict(ckpt["agent"])
    return agent
