"""The training recipes of the perception models: what `train detector` and `train encoder` do,
from their options to a checkpoint written atomically and its held-out scores.

A recipe is its options (a dataclass: the command's options, one field each) and a function that
reads and checks the data before any model is built, trains in Lightning, saves and scores. The
commands (playtester/commands/perception.py) parse options, call the recipe and print its result.
Bad input raises a `UserError`; `about` (the command's `about(option)`, a no-op by default) puts
the option that a piece of input came from in front of its message.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import lightning as L
import numpy as np
import torch

from playtester.errors import UserError
from playtester.files import inputs_checked
from playtester.perception.training import make_trainer, read_checkpoint, resolve_device, save_checkpoint_atomic

log = logging.getLogger("playtester.perception")

About = Callable[[str], AbstractContextManager]
Memory = Callable[[float, str], None]
"""The command's `check_memory(bytes, what)`: refuses a model and batch that would not fit (a no-op by default)."""


def _fits(needed: float, what: str) -> None:
    """The default `Memory`: every estimate fits (a caller outside the command line decides itself)."""

MIN_BOXES_PER_CLASS = 5
"""A class with fewer training boxes than this cannot be learned or scored; training refuses it."""


@dataclass
class Trained:
    """What a recipe leaves: the fitted Trainer and LightningModule, and the held-out score
    (`detector_eval.APTable` or `encoder.IdmReport`; None without held-out data)."""

    trainer: Any
    module: Any
    held_out: Any = None
    held_out_images: int = 0


@dataclass
class DetectorRecipe:
    """`train detector`'s options (see its help for each)."""

    coco: Path
    out: Path
    images: Path | None = None
    backbone: str = "resnet50"
    pretrained: str = "auto"
    image_size: int = 128
    epochs: int = 4
    max_minutes: float | None = None
    batch_size: int = 8
    lr: float | None = None
    """AdamW peak rate; None: 2e-3 from scratch, 3e-4 otherwise."""
    schedule: str = "cosine"
    trainable_layers: int | None = None
    base_coco: Path | None = None
    base_images: Path | None = None
    base_shots: int = 10
    augment: bool = True
    seed: int = 0
    threads: int = 0
    logdir: Path | None = None
    workers: int = 0
    accelerator: str = "auto"
    negatives: tuple[Path, ...] = ()
    """Frames with no object in them, added to the training split (`playtester.datasets.negatives`)."""


def train_detector(r: DetectorRecipe, *, say: Callable[[str], None] = log.info, about: About = nullcontext,
                   memory: Memory = _fits) -> Trained:
    """Train the OOI detector (Faster R-CNN) on labelled shots split 70/10/20; score its test AP."""
    from playtester.datasets.detection import DetectionDataModule, load_coco
    from playtester.perception.compact_backbone import anchors_for_coco
    from playtester.perception.detector import BACKBONE_STAGES, DetectorConfig, DetectorModule, detector_memory, resolve_pretrained
    from playtester.perception.detector_eval import evaluate_detector

    if r.base_images is not None and r.base_coco is None:
        raise UserError("--base-images needs --base-coco")
    if r.threads < 0:
        raise UserError(f"--threads {r.threads}: 0 (torch's default) or more")
    backbone, pretrained, chosen = resolve_pretrained(r.backbone, r.pretrained)
    lr = r.lr if r.lr is not None else (2e-3 if pretrained == "none" or backbone == "compact" else 3e-4)
    options = dict(backbone=backbone, pretrained=pretrained, image_size=r.image_size, lr=lr, batch_size=r.batch_size,
                   trainable_layers=r.trainable_layers, schedule=r.schedule)
    memory(detector_memory(DetectorConfig(classes=["_"], **options), r.batch_size),
           f"--batch-size {r.batch_size} at --image-size {r.image_size} ({backbone} backbone)")
    with about("--coco"):
        load_coco(r.coco, r.images, check_images=False)
    dm = DetectionDataModule(
        r.coco, r.images, base_labels=r.base_coco, base_images=r.base_images, base_shots=r.base_shots if r.base_coco else 0,
        batch_size=r.batch_size, augment=r.augment, seed=r.seed, workers=r.workers,
    )
    dm.setup("fit")
    if r.negatives:
        add_negatives(dm, r.negatives, say)
    sizes = {s: len(dm.splits[s].images) for s in dm.splits}
    if sizes["train"] == 0:
        raise UserError(f"COCO file {r.coco}: too few images to train on ({sum(sizes.values())}); label more shots")
    counts = dm.splits["train"].counts()
    check_class_counts(r.coco, counts)
    log.info("shots: %s images train / %s val / %s test; training boxes: %s", sizes["train"], sizes["val"], sizes["test"],
             ", ".join(f"{c} {n}" for c, n in counts.items()))
    say_mixed_sizes(dm.coco, r.image_size, say)
    if chosen:
        say(chosen)
    if backbone == "compact":
        options["anchor_sizes"], options["aspect_ratios"] = anchors_for_coco(dm.splits["train"], r.image_size)
        log.info("anchors fitted to the training boxes at %d px: sizes %s, aspect ratios (h/w) %s", r.image_size,
                 options["anchor_sizes"], options["aspect_ratios"])
    inputs_checked()
    if r.threads:
        torch.set_num_threads(r.threads)
    cfg = DetectorConfig(classes=dm.classes, split_seed=r.seed, **options)
    L.seed_everything(r.seed, verbose=False)
    module = DetectorModule(**asdict(cfg))
    started_from = module.model.load_pretrained()
    module.config.pretrained_used = module.hparams["pretrained_used"] = f"{backbone}, {started_from}"
    log.info("detector %s at %d px starts from %s; %d of %d backbone stages trained (%.0f %% of its weights frozen)",
             backbone, r.image_size, started_from, cfg.trainable_layers, BACKBONE_STAGES[backbone], 100 * module.model.frozen_fraction)
    trainer = make_trainer(
        name="detector", logdir=r.logdir or r.out.parent / "logs", epochs=r.epochs, max_minutes=r.max_minutes,
        accelerator=r.accelerator, val_every=1 if sizes["val"] else 10**6,
    )
    trainer.fit(module, datamodule=dm)
    if module.diverged:
        raise UserError("detector training diverged (non-finite loss); nothing was saved; try a lower --lr")
    table = None
    if sizes["test"]:
        table = evaluate_detector(module.model, dm.splits["test"], batch_size=r.batch_size)
        module.held_out = {"map50": table.map50, "map": table.map, "images": table.images, **table.to_json()}
        module.thresholds = calibrate_on_held_out(module.model, dm.splits["test"].images, r.batch_size)
    save_checkpoint_atomic(trainer, r.out)
    return Trained(trainer, module, table, sizes["test"])


def calibrate_on_held_out(model: Any, images: list[Any], batch_size: int) -> dict[str, Any]:
    """Per-class score thresholds for `calibration.TARGET_PRECISION` on the held-out shots, for the checkpoint."""
    from playtester.perception.calibration import calibrate

    return calibrate(model, images, batch_size=batch_size)


def add_negatives(dm: Any, negatives: tuple[Path, ...], say: Callable[[str], None]) -> None:
    """`--negatives`: their frames join the training split as background images (checked first:
    a folder without images, another size than the shots, a listed folder that is gone)."""
    from playtester.datasets.negatives import with_backgrounds

    train = dm.splits["train"]
    dm.splits["train"] = with_backgrounds(train, negatives)
    say(f"--negatives: {len(dm.splits['train'].images) - len(train.images)} background images join the "
        f"{len(train.images)} training shots")


def check_class_counts(coco: Path, counts: dict[str, int]) -> None:
    """Refuse a class with too few training boxes to learn (one line, before any model is built)."""
    few = {c: n for c, n in counts.items() if n < MIN_BOXES_PER_CLASS}
    if few:
        listed = ", ".join(f"{c} {n}" for c, n in few.items())
        raise UserError(f"COCO file {coco}: too few training boxes for {listed} (at least {MIN_BOXES_PER_CLASS} a class "
                        "in the 70 % training split); label more, or remove the class from the file's categories")


def say_mixed_sizes(coco, image_size: int, say: Callable[[str], None]) -> None:
    """Images of several sizes train fine (each is scaled to fit image_size): say so in one line."""
    seen = sorted({(im.width, im.height) for im in coco.images}, reverse=True)
    if len(seen) > 1:
        listed = ", ".join(f"{w}×{h}" for w, h in seen[:4]) + (" …" if len(seen) > 4 else "")
        say(f"images of {len(seen)} sizes ({listed}): each is scaled so its longer side is {image_size} px, "
            "boxes with it; frames at run time are scaled the same way")


@dataclass
class EncoderRecipe:
    """`train encoder`'s options (see its help for each)."""

    demos: Path
    out: Path
    detector: Path | None = None
    image_size: int = 128
    epochs: int = 10
    max_minutes: float | None = None
    batch_size: int = 32
    lr: float = 3e-4
    pretrained: str = "imagenet"
    feature_dim: int = 512
    trunk: str = "alexnet"
    mask_prob: float = 1.0
    balance: bool = True
    val_fraction: float = 0.2
    seed: int = 0
    logdir: Path | None = None
    workers: int = 0
    accelerator: str = "auto"
    device: str = "auto"
    """Where the --detector runs (auto, cpu, cuda, mps)."""


def train_encoder(r: EncoderRecipe, *, about: About = nullcontext, memory: Memory = _fits) -> Trained:
    """Train the feature encoder by masked inverse dynamics on demo transitions; score its
    held-out accuracy per action (an `IdmReport`)."""
    from playtester.datasets.transitions import TransitionDataModule
    from playtester.perception.encoder import (
        EncoderConfig, IdmReport, InverseDynamicsModule, action_accuracy, load_pretrained, training_memory,
    )

    options = dict(image_size=r.image_size, feature_dim=r.feature_dim, pretrained=r.pretrained, trunk=r.trunk,
                   mask_prob=r.mask_prob, lr=r.lr, batch_size=r.batch_size, val_fraction=r.val_fraction)
    EncoderConfig(action_names=["a", "b"], **options)
    memory(training_memory(r.image_size, r.feature_dim, r.trunk, r.batch_size),
           f"--feature-dim {r.feature_dim} with --image-size {r.image_size} and --batch-size {r.batch_size} ({r.trunk} trunk)")
    if r.pretrained not in ("imagenet", "none"):
        with about("--pretrained"):
            read_checkpoint(r.pretrained, "encoder")
    with about("--detector"):
        box_fn = detector_box_fn(r.detector, r.device) if r.detector is not None else None
    dm = TransitionDataModule(r.demos, image_size=r.image_size, batch_size=r.batch_size, val_fraction=r.val_fraction,
                              seed=r.seed, workers=r.workers, box_fn=box_fn)
    with about("--demos"):
        dm.setup("fit")
    if len(dm.train_set) == 0:
        raise UserError(f"--demos {r.demos}: no training transitions (each episode needs at least two frames)")
    counts = dm.action_counts("train").tolist()
    log.info("demos: %d training episodes (%d pairs), %d held out (%d pairs)", len(dm.train_set.episodes), len(dm.train_set),
             len(dm.val_set.episodes), len(dm.val_set))
    inputs_checked()
    cfg = EncoderConfig(action_names=dm.action_names, seed=r.seed, class_weights=class_weights(counts) if r.balance else None, **options)
    L.seed_everything(r.seed, verbose=False)
    module = InverseDynamicsModule(**asdict(cfg))
    log.info("encoder (%s trunk at %d px) starts from %s", r.trunk, r.image_size, load_pretrained(module.model))
    trainer = make_trainer(
        name="encoder", logdir=r.logdir or r.out.parent / "logs", epochs=r.epochs, max_minutes=r.max_minutes,
        accelerator=r.accelerator, val_every=1 if len(dm.val_set) else 10**6,
    )
    trainer.fit(module, datamodule=dm)
    if module.diverged:
        raise UserError("encoder training diverged (non-finite loss); nothing was saved; try a lower --lr")
    save_checkpoint_atomic(trainer, r.out)
    report = None
    if len(dm.val_set):
        total, correct = action_accuracy(module.model, dm.val_dataloader())
        report = IdmReport.from_counts(cfg.action_names, total, correct, train_counts=counts)
    return Trained(trainer, module, report)


def detector_box_fn(ckpt: Path, device: str) -> Callable[[Any], np.ndarray]:
    """A function giving, for an episode, the most confident detection's box in each frame."""
    from rich.progress import track

    from playtester.perception.detector import load_detector

    detector = load_detector(ckpt, resolve_device(None if device == "auto" else device))

    def boxes(ep) -> np.ndarray:
        out = np.full((len(ep), 4), np.nan, np.float32)
        for start in track(range(0, len(ep), 16), description=f"detecting OOIs in {ep.name}", transient=True):
            frames = np.asarray(ep.frames[start:start + 16])
            for i, (b, _, _) in enumerate(detector.predict(frames)):
                if len(b):
                    out[start + i] = b[0]
        return out

    return boxes


def class_weights(counts: list[int], cap: float = 10.0) -> list[float]:
    """Inverse-frequency weights (mean 1 over the actions seen), capped; 1 for unseen actions."""
    present = [c for c in counts if c > 0]
    total = sum(present)
    return [min(cap, total / (len(present) * c)) if c > 0 else 1.0 for c in counts]
