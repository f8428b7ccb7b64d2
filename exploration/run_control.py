"""What happens around the PPO loop (`playtester.exploration.ppo.train`): where a run's checkpoint
lives and whether it resumes (`open_run`, `restore`), the last completed update saved every
`checkpoint_every` updates, at the end and on Ctrl-C, early stop and the time limit
(`RunControl`), and Ctrl-C held back while an update runs (`defer_interrupt`)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn as nn

from playtester.errors import UserError
from playtester.exploration.checkpoints import load_checkpoint, load_into, rng_state, save_checkpoint, set_rng_state
from playtester.exploration.hook import RewardHook
from playtester.exploration.ppo_config import PPOConfig, check_resumable, saved_ppo_config

CHECKPOINT_NAME = "last.ckpt"


class TrainResult(NamedTuple):
    global_step: int
    iteration: int
    episode_returns: list[float]
    """Returns of the episodes finished during this call, in order."""
    sps: float
    """Environment steps per second over this call."""
    checkpoint: Path
    agent: nn.Module
    stopped_early: bool = False
    """Training ended before `total_timesteps` (early stop or time limit)."""


def open_run(cfg: PPOConfig) -> tuple[Path, bool]:
    """The run's checkpoint path, and whether the run resumes from it (with `resume`: the file
    is checked, and its config against `cfg`); a fresh run never overwrites one."""
    checkpoint_path = Path(cfg.run_dir) / "checkpoints" / CHECKPOINT_NAME
    if not cfg.resume and checkpoint_path.exists():
        raise UserError(f"{checkpoint_path} exists: pass --resume to continue that run, or choose another run directory")
    if cfg.resume:
        check_resumable(saved_ppo_config(load_checkpoint(checkpoint_path)["config"]), cfg)
    return checkpoint_path, cfg.resume


def restore(fabric: Any, checkpoint_path: Path, agent: nn.Module, optimizer: torch.optim.Optimizer,
            reward_hook: RewardHook | None) -> tuple[int, int]:
    """Load a resumed run's weights, optimiser, hook state and random state into the objects
    Fabric set up (so that each lands on their device); the first iteration to run and the
    step count so far."""
    state: dict[str, Any] = {"agent": agent, "optimizer": optimizer, "iteration": 0, "global_step": 0, "rng": None}
    if reward_hook is not None:
        state["reward_hook"] = reward_hook
    load_into(fabric, checkpoint_path, state)
    set_rng_state(state["rng"])
    return state["iteration"] + 1, state["global_step"]


class RunControl:
    """What happens around the PPO loop: the last completed update (saved every
    `checkpoint_every` updates, at the end and on Ctrl-C), early stop and the time limit, the
    returns of the episodes trained on and the speed."""

    def __init__(
        self, cfg: PPOConfig, fabric: Any, checkpoint_path: Path, agent_spec: dict[str, Any], module: nn.Module,
        optimizer: torch.optim.Optimizer, reward_hook: RewardHook | None, start_iteration: int, global_step: int,
    ):
        self.cfg, self.fabric, self.checkpoint_path = cfg, fabric, checkpoint_path
        self.agent_spec, self.module, self.optimizer, self.reward_hook = agent_spec, module, optimizer, reward_hook
        self.start_time, self.start_step = time.time(), global_step
        # What is saved: the last completed update, with the random state it ended with.
        self.completed, self.completed_step, self.completed_rng = start_iteration - 1, global_step, rng_state()
        self.saved_through = start_iteration - 1
        self.finished_returns: list[float] = []
        self.best_return, self.stale = -np.inf, 0
        self.stopped_early = False
        """By early stop or the time limit."""
        self.stopped = False
        """By the caller's `stop`."""

    def save(self) -> Path:
        """Save the last completed update, with what rebuilds the reward hook (`reward_spec`)."""
        spec = getattr(self.reward_hook, "checkpoint_spec", None)
        return save_checkpoint(self.checkpoint_path, {
            "config": asdict(self.cfg), "agent_spec": self.agent_spec, "agent": self.module,
            "optimizer": self.optimizer, "iteration": self.completed, "global_step": self.completed_step,
            "reward_hook": self.reward_hook, "reward_spec": spec() if spec is not None else None,
            "rng": self.completed_rng,
        }, self.fabric)

    def sps(self, global_step: int) -> float:
        return (global_step - self.start_step) / max(time.time() - self.start_time, 1e-9)

    def update_done(self, iteration: int, global_step: int, returns: list[float]) -> None:
        """Update `iteration` is complete: it is what a save holds from now on."""
        self.finished_returns.extend(returns)
        self.completed, self.completed_step, self.completed_rng = iteration, global_step, rng_state()

    def checkpoint(self, iteration: int) -> None:
        """Save every `checkpoint_every` updates."""
        if self.cfg.checkpoint_every and iteration % self.cfg.checkpoint_every == 0:
            self.save()
            self.saved_through = iteration

    def should_stop(self, iteration: int, returns: list[float]) -> bool:
        """Early stop (`early_stop_patience` updates without a better mean return) or the time limit."""
        cfg = self.cfg
        if returns:
            mean_return = float(np.mean(returns))
            self.best_return, self.stale = (mean_return, 0) if mean_return > self.best_return else (self.best_return, self.stale + 1)
        if (cfg.early_stop_patience and self.stale >= cfg.early_stop_patience) or (
                cfg.max_train_seconds and time.time() - self.start_time >= cfg.max_train_seconds):
            self.stopped_early = iteration < cfg.num_iterations
            return True
        return False

    @contextlib.contextmanager
    def saving_on_interrupt(self):
        """On Ctrl-C, save the last completed update (unless saved already) and say so."""
        try:
            yield
        except KeyboardInterrupt:
            if self.completed > self.saved_through:
                self.save()
            if self.checkpoint_path.exists():  # written by this run or the one it resumes: the last completed update
                self.fabric.print(f"interrupted: {self.checkpoint_path} holds the update of step "
                                  f"{self.completed_step}; resume continues from it")
            raise

    def finish(self, global_step: int) -> TrainResult:
        """Save the last completed update, close the logs and report."""
        path = self.save()
        for lg in self.fabric.loggers:
            lg.finalize("success")
        sps = self.sps(global_step)
        if self.stopped:
            self.fabric.print(f"stopped at step {global_step}: the run's budget is spent; the update of step {self.completed_step} is saved")
        return TrainResult(self.completed_step, self.completed, self.finished_returns, sps, path, self.module, self.stopped_early or self.stopped)


@contextlib.contextmanager
def defer_interrupt():
    """Hold back Ctrl-C (SIGINT) until the block ends, then raise it: an update interrupted
    half-way would leave weights that belong to no step. Outside the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
