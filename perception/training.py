"""What the perception models share for training: the Trainer, atomic checkpoints, reading them back.

A checkpoint is Lightning's own (`LightningModule.load_from_checkpoint` works on it) with the
model's dataclass config as `hyper_parameters` and a `playtester` entry naming the model kind, so
`read_checkpoint` can say "this is an encoder, not a detector" instead of failing on keys.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from playtester.files import partial_path
from playtester.errors import UserError

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 1


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in record.getMessage()


def _quiet_lightning() -> None:
    """One copy of each Lightning message (through the app's handler, when it has one), no ads."""
    import warnings

    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        lg = logging.getLogger(name)
        if logging.getLogger().handlers:
            for h in list(lg.handlers):
                if isinstance(h, logging.StreamHandler):
                    lg.removeHandler(h)
        if not any(isinstance(f, _DropTips) for f in lg.filters):
            lg.addFilter(_DropTips())
        for sub in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
            if not any(isinstance(f, _DropTips) for f in logging.getLogger(sub).filters):
                logging.getLogger(sub).addFilter(_DropTips())


def make_trainer(
    *,
    name: str,
    logdir: str | Path,
    epochs: int | None = None,
    max_minutes: float | None = None,
    progress: bool = True,
    accelerator: str = "auto",
    callbacks: list[Any] | None = None,
    val_every: int = 1,
    steps: int | None = None,
    val_every_steps: int | None = None,
    **extra: Any,
):
    """A Lightning Trainer with TensorBoard logs under `logdir/name`, honouring both budgets:
    it stops after `epochs`, `steps` optimizer steps or `max_minutes`, whichever comes first (with
    both, `epochs` only numbers the progress bar's passes). It validates every `val_every` epochs, or
    every `val_every_steps` steps where given (None with `steps`: never). It writes checkpoints only through a `ModelCheckpoint`
    among `callbacks`. `extra` goes to the Trainer."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    _quiet_lightning()
    if epochs is None and steps is None:
        raise ValueError("make_trainer: give epochs, steps or both")
    if epochs is not None and epochs < 1:
        raise UserError(f"--epochs {epochs}: train for at least one epoch")
    if steps is not None and steps < 1:
        raise UserError(f"--steps {steps}: train for at least one step")
    if max_minutes is not None and max_minutes <= 0:
        raise UserError(f"--max-minutes {max_minutes}: give a positive number of minutes")
    logger = TensorBoardLogger(save_dir=str(logdir), name=name, default_hp_metric=False)
    if steps is not None:
        extra.update(max_steps=steps)
        if val_every_steps is None:
            extra.update(limit_val_batches=0)
    validation = dict(val_check_interval=val_every_steps, check_val_every_n_epoch=None) if val_every_steps else dict(
        check_val_every_n_epoch=val_every)
    return L.Trainer(
        max_epochs=epochs if epochs is not None else -1,
        max_time=timedelta(minutes=max_minutes) if max_minutes else None,
        accelerator=accelerator,
        devices=1,
        logger=logger,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks or []),  # only where asked for
        enable_progress_bar=progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
        callbacks=callbacks or [],
        **validation,
        **extra,
    )


def stalled(values: list[float], patience: int, min_rise: float) -> bool:
    """Whether the last `patience` of `values` (a validation score, higher is better, in order)
    all failed to rise by `min_rise` over the best before them."""
    if len(values) <= patience:
        return False
    last_rise = 0
    for i in range(1, len(values)):
        if values[i] > max(values[:i]) + min_rise:
            last_rise = i
    return len(values) - 1 - last_rise >= patience


def stop_when_converged(monitor: str, *, patience: int, min_rise: float, min_steps: int):
    """A Lightning callback that stops training once `monitor` (logged by each validation, higher
    is better) has `stalled`, and not before `min_steps` steps. (Lightning's EarlyStopping, once
    it has asked to stop during `min_steps`, stops there even if the score rose meanwhile.)"""
    from lightning.pytorch.callbacks import Callback

    class StopWhenConverged(Callback):
        def __init__(self) -> None:
            self.values: list[float] = []

        def on_validation_end(self, trainer, pl_module) -> None:
            if trainer.sanity_checking or monitor not in trainer.callback_metrics:
                return
            self.values.append(float(trainer.callback_metrics[monitor]))
            if trainer.global_step >= min_steps and stalled(self.values, patience, min_rise):
                trainer.should_stop = True

    return StopWhenConverged()


def save_checkpoint_atomic(trainer, path: str | Path) -> Path:
    """Write the trained weights and config to `path` through `path.partial` (never half a file)."""
    path = Path(path)
    tmp = partial_path(path)
    trainer.save_checkpoint(tmp, weights_only=True)
    os.replace(tmp, path)
    return path


def keep_last(path: str | Path):
    """A Lightning callback that writes the whole training state (weights, optimiser, schedule,
    the early-stopping and best-checkpoint callbacks' state) to `path` at the end of every epoch,
    through `path.partial`, so that a training stopped at any moment goes on from its last finished
    epoch with `trainer.fit(..., ckpt_path=path)`."""
    from lightning.pytorch.callbacks import Callback

    class KeepLast(Callback):
        """Also keeps the random streams (dropout, the teacher's masks): with a loader that shuffles
        by epoch (`playtester.imitation.data.EpochShuffle`) the resumed training is the
        uninterrupted one's."""

        def on_train_epoch_end(self, trainer, pl_module) -> None:  # after the epoch's validation
            tmp = partial_path(Path(path))
            trainer.save_checkpoint(tmp)
            os.replace(tmp, path)

        def state_dict(self) -> dict[str, Any]:
            import random

            import numpy as np

            kind, keys, pos, has_gauss, gauss = np.random.get_state()  # as tensors and numbers: loads with weights_only
            return {"torch": torch.get_rng_state(), "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
                    "python": random.getstate()}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            import random

            import numpy as np

            torch.set_rng_state(state["torch"])
            kind, keys, pos, has_gauss, gauss = state["numpy"]
            np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
            random.setstate(state["python"])

    return KeepLast()


def load_torch_file(path: str | Path, what: str = "checkpoint", map_location: str | torch.device = "cpu",
                    allow: tuple[Any, ...] = ()) -> Any:
    """What `torch.save` wrote to `path`, loaded with `weights_only=True`: tensors, numbers,
    strings and containers, plus the types in `allow` (torch's allow-list), so that a file from
    elsewhere cannot run code as it loads. A missing, empty, cut-short or foreign file raises a
    `UserError` that names `what` and the file."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path}: is a folder; give the checkpoint file")
    if not path.is_file():
        raise UserError(f"{what} {path}: not found")
    size = path.stat().st_size
    if size == 0:
        raise UserError(f"{what} {path}: the file is empty (0 bytes), so it was never written to the end; "
                        "give a complete checkpoint (train again if need be)")
    try:
        with torch.serialization.safe_globals(list(allow)):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
        if found:
            raise UserError(f"{what} {path}: it holds a {found.group(1)} object, which no playtester checkpoint holds, "
                            "so it is not loaded (loading it could run code); give a checkpoint that playtester wrote") from None
        raise UserError(f"{what} {path}: not a PyTorch checkpoint ({size} bytes that torch cannot read: cut short, or "
                        "another kind of file); give a checkpoint that playtester wrote") from None
    except Exception:  # a zip cut short, random bytes, a foreign format
        raise UserError(f"{what} {path}: not a PyTorch checkpoint ({size} bytes that torch cannot read: cut short, or "
                        "another kind of file); give a checkpoint that playtester wrote") from None


def read_checkpoint(path: str | Path, kind: str, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The config dict and the core's state dict (keys without the `model.` prefix) of a
    playtester checkpoint of `kind`; a `UserError` names the file when it is not one."""
    config, state, _ = read_checkpoint_with_notes(path, kind, map_location)
    return config, state


def read_checkpoint_with_notes(path: str | Path, kind: str, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], dict[str, torch.Tensor], dict[str, Any]]:
    """`read_checkpoint`'s config and state, and what playtester noted in the file beside them
    (`checkpoint["playtester"]`: a detector's held-out scores and thresholds), from one read."""
    ckpt = load_torch_file(path, f"{kind} checkpoint", map_location)
    info = ckpt.get("playtester") if isinstance(ckpt, dict) else None
    if not isinstance(info, dict) or not isinstance(ckpt.get("hyper_parameters"), dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise UserError(f"{kind} checkpoint {path}: a PyTorch file, but not a playtester checkpoint (no model config in it); "
                        f"give the {kind} checkpoint that playtester wrote")
    if info.get("model") != kind:
        raise UserError(f"{kind} checkpoint {path}: it is {_article(str(info.get('model')))} checkpoint, not {_article(kind)} "
                        f"checkpoint; give the {kind} checkpoint")
    if info.get("version", 0) > CHECKPOINT_VERSION:
        raise UserError(f"{kind} checkpoint {path}: written by a newer playtester (format {info.get('version')}); upgrade")
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    return dict(ckpt["hyper_parameters"]), state, dict(info)


def _article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def tag_checkpoint(checkpoint: dict[str, Any], kind: str) -> None:
    """Mark a checkpoint being saved (call from `on_save_checkpoint`)."""
    checkpoint["playtester"] = {"model": kind, "version": CHECKPOINT_VERSION}


def resolve_device(device: str | None) -> torch.device:
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# -- what training will take in memory, estimated before anything is allocated -------------------

FLOAT_BYTES = 4
TRAINING_COPIES = 4
"""A trained weight in memory while training with AdamW: the weight, its gradient and the
optimiser's two moments."""


def on_meta(build: Any) -> torch.nn.Module:
    """`build()`'s module on torch's meta device: its shapes without its memory (a model of
    hundreds of gigabytes is built in milliseconds, to be measured and refused)."""
    with torch.device("meta"):
        return build()


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def activation_count(module: torch.nn.Module, *shapes: tuple[int, ...]) -> int:
    """Elements of every leaf module's output in one forward pass of `module` (made by `on_meta`)
    on inputs of `shapes`: what autograd keeps for the backward pass, about."""
    total = 0

    def count(_module: Any, _inputs: Any, output: Any) -> None:
        nonlocal total
        total += sum(t.numel() for t in (output if isinstance(output, (tuple, list)) else [output]) if torch.is_tensor(t))

    hooks = [m.register_forward_hook(count) for m in module.modules() if not list(m.children())]
    try:
        with torch.device("meta"):
            module(*(torch.zeros(shape) for shape in shapes))
    finally:
        for hook in hooks:
            hook.remove()
    return total


def training_bytes(trained: int, frozen: int = 0, activations: int = 0, resumable: bool = False) -> int:
    """Memory of training `trained` parameters with AdamW beside `frozen` ones: the weights
    (`TRAINING_COPIES` of each trained one), and the larger of what comes and goes on top of
    them: a step's `activations`, kept for the backward pass (their gradients a layer at a time),
    or a checkpoint being written, which Lightning serialises whole in memory before it writes the
    file (`_atomic_save`): the weights (and the `frozen` ones), and with `resumable` (the whole
    training state kept at each epoch's end, `keep_last`) the optimiser's two moments too.
    Measured against peak memory in docs/benchmarks/cli.md."""
    checkpoint = (TRAINING_COPIES - 1 if resumable else 1) * trained + frozen
    return FLOAT_BYTES * (TRAINING_COPIES * trained + frozen + max(activations, checkpoint))


def recompute_batchnorm(model: torch.nn.Module, batches: Any, limit: int) -> int:
    """Set every BatchNorm layer's running statistics anew from up to `limit` training batches
    (`batches` yields `(images, targets)`), as the plain average over them, with the weights as
    trained ("precise BN"). Training keeps them as a moving average that lags weights that are
    still changing: a detector trained from random init for 49 steps scored a held-out loss of
    2.20 with those and 0.35 with batch statistics. The forward passes run in training mode (a
    detector's needs its targets), without gradients and with torch's generator put back after
    (the RPN samples at random). Returns the batches seen (0: no BatchNorm to set)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms or limit < 1:
        return 0
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average
    was_training = model.training
    device = next(model.parameters()).device
    seen = 0
    model.train()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            for images, targets in batches:
                if seen == limit:
                    break
                model([im.to(device) for im in images], [{k: v.to(device) if torch.is_tensor(v) else v for k, v in t.items()} for t in targets])
                seen += 1
    finally:
        for m, momentum in zip(norms, momenta):
            m.momentum = momentum
        model.train(was_training)
    return seen
