"""Checkpoints: atomic writes through Fabric, random number generator state, rebuilding an agent
(`load_agent`) or the whole explorer, agent and exploration reward (`load_explorer`), from a file."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn

from playtester.files import partial_path
from playtester.errors import UserError
from playtester.exploration.actor_critic import build_actor_critic


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(path: Path, state: dict[str, Any], fabric: Any = None) -> Path:
    """Write atomically: `NAME.partial`, then rename. With `fabric`, through `fabric.save` (its
    modules, optimisers and other objects with a `state_dict` saved as their state); without
    (evolution, which trains no network), with `torch.save`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    if fabric is not None:
        fabric.save(tmp, state)
    else:
        torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_into(fabric: Any, path: Path, state: dict[str, Any]) -> dict[str, Any]:
    """`fabric.load(path, state)`: the objects in `state` restored in place, its plain values
    replaced by the file's; the file's other items returned. Tensors, numbers and numpy arrays
    only, as `load_checkpoint` (which checks the file first)."""
    with torch.serialization.safe_globals(list(_numpy_globals())):
        return fabric.load(path, state, weights_only=True)


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


class SavedExplorer(NamedTuple):
    """The explorer a PPO checkpoint holds, rebuilt from the file alone (on the CPU)."""

    agent: nn.Module
    reward: Any
    """Its exploration reward (`ExplorationReward`), trained state and α included."""


def load_explorer(path: str | Path) -> SavedExplorer:
    """The actor-critic and the exploration reward of a checkpoint, rebuilt from it alone: the
    reward's config, its number of games, its preference policy and its trained state (RND,
    its optimiser, α) are all in the file."""
    from importlib import import_module

    ckpt = load_checkpoint(path)
    agent = build_actor_critic(ckpt["agent_spec"])
    agent.load_state_dict(ckpt["agent"])
    spec = ckpt.get("reward_spec")
    if spec is None:
        raise UserError(f"explorer checkpoint {path}: it holds no exploration reward to rebuild (a run without one, one "
                        "with frames or an RND trunk of its own, or a checkpoint written before the reward was saved "
                        "with it); load_agent still rebuilds its agent")
    module_name, _, class_name = str(spec.get("class", "")).partition(":")
    if not module_name.startswith("playtester."):
        raise UserError(f"explorer checkpoint {path}: its reward class {spec.get('class')!r} is not one of playtester's; not loaded")
    reward = getattr(import_module(module_name), class_name).from_checkpoint(spec, ckpt["reward_hook"])
    return SavedExplorer(agent, reward)
