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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import lightning as L
import numpy as np
import torch

from playtester.capture.frames import FrameSpec
from playtester.errors import UserError
from playtester.files import inputs_checked
from playtester.perception.training import (make_trainer, read_checkpoint, recompute_batchnorm, resolve_device,
                                            save_checkpoint_atomic, stalled, stop_when_converged)

log = logging.getLogger("playtester.perception")

About = Callable[[str], AbstractContextManager]
Memory = Callable[[float, str], None]
"""The command's `check_memory(bytes, what)`: refuses a model and batch that would not fit (a no-op by default)."""


def _fits(needed: float, what: str) -> None:
    """The default `Memory`: every estimate fits (a caller outside the command line decides itself)."""

MIN_BOXES_PER_CLASS = 5
"""A class with fewer training boxes than this cannot be learned or scored; training refuses it."""
FEW_BOXES_PER_CLASS = 20
"""A class with fewer training boxes than this learns poorly: training says so."""
DETECTOR_STEPS = 1000
"""`train detector`'s default budget, in optimizer steps whatever the set's size (a small set is
seen many times, augmented): chosen by measurement across set sizes (docs/benchmarks/detector.md)."""
MIN_DETECTOR_STEPS = 400
"""Fewer steps than this and a detector from random init has not learned (AP stays near 0 below
~200 and far from its best below ~500): training says so."""
BATCHNORM_BATCHES = 50
"""Training batches that set the BatchNorm statistics anew after training (`recompute_batchnorm`):
about 5 % of the default budget's compute, forward passes only."""
VALIDATIONS = 10
"""The held-out mAP is measured this many times over the budget (on at most `VALIDATION_IMAGES`),
and at most every `VALIDATION_GAP` steps."""
VALIDATION_IMAGES = 96
VALIDATION_GAP = 50
PATIENCE = 3
"""Training stops once the held-out mAP has not risen by `MIN_RISE` for this many validations in
a row, and not before half the budget."""
MIN_RISE = 0.005
STILL_RISING = 0.02
"""A held-out mAP that rose by more than this over the last `PATIENCE` validations was still
rising at the end: training says more steps would help."""


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
    val_coco: Path | None = None
    backbone: str = "resnet50"
    pretrained: str = "auto"
    image_size: int = 128
    steps: int | None = None
    """None: `DETECTOR_STEPS`, unless `epochs` is given."""
    epochs: int | None = None
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
    """Train the OOI detector (Faster R-CNN) for a budget of optimizer steps on labelled shots,
    holding out what scores it (`detector_splits`, or `--val-coco`), stopping once its held-out
    mAP has converged; score it on the held-out images, with a bootstrap interval."""
    from playtester.perception.compact_backbone import anchors_for_coco

    _check_budget_options(r)
    backbone, chosen, options = _detector_options(r, memory)
    dm, train, held_out = _training_data(r, say, about)
    if chosen:
        say(chosen)
    if backbone == "compact":
        options["anchor_sizes"], options["aspect_ratios"] = anchors_for_coco(train, r.image_size)
        log.info("anchors fitted to the training boxes at %d px: sizes %s, aspect ratios (h/w) %s", r.image_size,
                 options["anchor_sizes"], options["aspect_ratios"])
    inputs_checked()
    if r.threads:
        torch.set_num_threads(r.threads)
    per_epoch = -(-len(train.images) // r.batch_size)
    steps = r.epochs * per_epoch if r.epochs is not None else (r.steps or DETECTOR_STEPS)
    say(describe_budget(r, steps, len(train.images), bool(held_out.images)))
    if steps < MIN_DETECTOR_STEPS:
        say(too_few_steps(r, steps))
    module = _new_detector(r, dm.classes, options)
    validated = bool(held_out.images)
    trainer = make_trainer(
        name="detector", logdir=r.logdir or r.out.parent / "logs", epochs=-(-steps // per_epoch), steps=steps,
        max_minutes=r.max_minutes, accelerator=r.accelerator, val_every_steps=validation_interval(steps) if validated else None,
        callbacks=[stop_when_converged("val/map", patience=PATIENCE, min_rise=MIN_RISE, min_steps=steps // 2)] if validated else [],
        limit_val_batches=max(1, VALIDATION_IMAGES // r.batch_size),
    )
    trainer.fit(module, datamodule=dm)
    if module.diverged:
        raise UserError("detector training diverged (non-finite loss); nothing was saved; try a lower --lr")
    seen = recompute_batchnorm(module.model, dm.train_dataloader(), BATCHNORM_BATCHES)
    if seen:
        log.info("BatchNorm statistics set anew from %d training batches", seen)
    for line in after_training(r, trainer.global_step, steps, module.val_history):
        say(line)
    table = _score_held_out(module, held_out, r.batch_size) if validated else None
    save_checkpoint_atomic(trainer, r.out)
    return Trained(trainer, module, table, len(held_out.images))


def _check_budget_options(r: DetectorRecipe) -> None:
    """Refuse in one line, before anything is read, options that contradict each other."""
    if r.base_images is not None and r.base_coco is None:
        raise UserError("--base-images needs --base-coco")
    if r.threads < 0:
        raise UserError(f"--threads {r.threads}: 0 (torch's default) or more")
    if r.steps is not None and r.epochs is not None:
        raise UserError(f"--steps {r.steps} and --epochs {r.epochs}: give one budget, not both")
    for option, value in (("--steps", r.steps), ("--epochs", r.epochs)):
        if value is not None and value < 1:
            raise UserError(f"{option} {value}: at least 1")


def _detector_options(r: DetectorRecipe, memory: Memory) -> tuple[str, str | None, dict[str, Any]]:
    """The backbone, what was said of its choice (when it was not the one asked for), and the
    detector's settings (the learning rate follows the backbone and its starting weights); refused
    before the data is read when the batch would not fit in memory."""
    from playtester.perception.detector import DetectorConfig, detector_memory, resolve_pretrained

    backbone, pretrained, chosen = resolve_pretrained(r.backbone, r.pretrained)
    lr = r.lr if r.lr is not None else (2e-3 if pretrained == "none" or backbone == "compact" else 3e-4)
    options = dict(backbone=backbone, pretrained=pretrained, image_size=r.image_size, lr=lr, batch_size=r.batch_size,
                   trainable_layers=r.trainable_layers, schedule=r.schedule)
    memory(detector_memory(DetectorConfig(classes=["_"], **options), r.batch_size),
           f"--batch-size {r.batch_size} at --image-size {r.image_size} ({backbone} backbone)")
    return backbone, chosen, options


def _training_data(r: DetectorRecipe, say: Callable[[str], None], about: About):
    """The shots split into training and held-out sets, checked (a trainable set, classes with
    boxes, the same classes in --val-coco) and described, with the warnings on scant boxes and
    mixed image sizes."""
    from playtester.datasets.detection import DetectionDataModule, load_coco

    with about("--coco"):
        whole = load_coco(r.coco, r.images, check_images=False)
    check_trainable_set(r.coco, whole)
    if r.val_coco is not None:
        with about("--val-coco"):
            check_same_classes(r.coco, whole.classes, load_coco(r.val_coco, check_images=False).classes)
    dm = DetectionDataModule(
        r.coco, r.images, base_labels=r.base_coco, base_images=r.base_images, base_shots=r.base_shots if r.base_coco else 0,
        batch_size=r.batch_size, augment=r.augment, seed=r.seed, workers=r.workers, val_labels=r.val_coco,
    )
    with about("--coco"):
        dm.setup("fit")
    if r.negatives:
        add_negatives(dm, r.negatives, say)
    train, held_out = dm.splits["train"], dm.splits["val"]
    counts = train.counts()
    check_class_counts(r.coco, counts)
    say(describe_split(r, whole, train, held_out))
    for line in box_warnings(counts, held_out.counts() if held_out.images else {}):
        say(line)
    say_mixed_sizes(dm.coco, r.image_size, say)
    return dm, train, held_out


def _new_detector(r: DetectorRecipe, classes: list[str], options: dict[str, Any]):
    """The detector to train, seeded by the recipe's seed, from its pretrained weights; its config
    names how the held-out set was drawn so that `eval detector` can draw it again."""
    from playtester.perception.detector import BACKBONE_STAGES, DetectorConfig, DetectorModule

    backbone = options["backbone"]
    cfg = DetectorConfig(classes=classes, split_seed=r.seed, split="none" if r.val_coco is not None else "held-out", **options)
    L.seed_everything(r.seed, verbose=False)
    module = DetectorModule(**asdict(cfg))
    started_from = module.model.load_pretrained()
    module.config.pretrained_used = module.hparams["pretrained_used"] = f"{backbone}, {started_from}"
    log.info("detector %s at %d px starts from %s; %d of %d backbone stages trained (%.0f %% of its weights frozen)",
             backbone, r.image_size, started_from, cfg.trainable_layers, BACKBONE_STAGES[backbone], 100 * module.model.frozen_fraction)
    return module


def _score_held_out(module, held_out, batch_size: int):
    """The trained detector's AP table on the held-out shots (with a bootstrap interval of AP50),
    kept in the module with the per-class thresholds calibrated there, so the checkpoint holds them."""
    from playtester.perception.detector_eval import ap50_intervals, ap_table, predict_set

    preds = predict_set(module.model, held_out, batch_size=batch_size)
    table = ap_table(preds, held_out)
    table.ap50_interval = ap50_intervals(preds, held_out)
    module.held_out = {"map50": table.map50, "map": table.map, "images": table.images, **table.to_json()}
    module.thresholds = calibrate_on_held_out(module.model, held_out.images, batch_size)
    return table


def check_trainable_set(coco_path: Path, coco) -> None:
    """Refuse, in one line, a set that cannot train a detector: one image, or a class of the file's
    categories with no box in any image."""
    if len(coco.images) < 2:
        raise UserError(f"COCO file {coco_path}: {len(coco.images)} image; a detector learns from many views of each class "
                        "(25 boxes a class is where the defaults start to work); label more shots")
    empty = [c for c, n in coco.counts().items() if n == 0]
    if empty:
        raise UserError(f"COCO file {coco_path}: no box of {', '.join(repr(c) for c in empty)} in any of its {len(coco.images)} "
                        "images, yet its categories ask for it; label some, or remove it from the categories")


def check_same_classes(coco_path: Path, classes: list[str], val_classes: list[str]) -> None:
    """The held-out file must name the training file's classes, no more, no fewer (any ids, any order)."""
    if set(classes) != set(val_classes):
        raise UserError(f"--val-coco: its classes ({', '.join(val_classes)}) differ from those of --coco {coco_path} "
                        f"({', '.join(classes)}); give held-out shots labelled with the same classes")


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
                        "among the training images); label more, or remove the class from the file's categories")


def box_warnings(trained: dict[str, int], held_out: dict[str, int]) -> list[str]:
    """Lines for classes with too few boxes to score (held out) or to learn well (trained)."""
    lines = [too_few_to_score(held_out, "held-out boxes", "label more shots, or give --val-coco with more")]
    few = {c: n for c, n in trained.items() if n < FEW_BOXES_PER_CLASS}
    if few:
        lines.append(f"few training boxes of {', '.join(f'{c} ({n})' for c, n in few.items())}: a class learns from about 25 "
                     f"(docs/benchmarks/detector.md); expect a weak detector of {'it' if len(few) == 1 else 'them'}, and label more")
    return [line for line in lines if line]


def too_few_to_score(counts: dict[str, int], what: str, remedy: str) -> str | None:
    """One line naming the classes with fewer than `MIN_BOXES_PER_CLASS` boxes among `counts`
    (their AP rests on one or two detections), or None."""
    scant = {c: n for c, n in counts.items() if n < MIN_BOXES_PER_CLASS}
    if not scant:
        return None
    return (f"{what} of {', '.join(f'{c} ({n})' for c, n in scant.items())} are too few to score "
            f"{'it' if len(scant) == 1 else 'them'} (under {MIN_BOXES_PER_CLASS} a class, an AP says little): {remedy}")


def describe_split(r: DetectorRecipe, whole, train, held_out) -> str:
    """The split in one line: what trains, what is held out and why."""
    from playtester.datasets.detection import HELD_OUT_BOXES, HELD_OUT_SHARE

    def boxes(coco) -> str:
        return ", ".join(f"{c} {n}" for c, n in coco.counts().items())

    trained = f"{len(train.images)} images trained ({boxes(train)} boxes)"
    if r.val_coco is not None:
        return f"split: all {trained}; held out: the {len(held_out.images)} images of --val-coco {r.val_coco} ({boxes(held_out)})"
    low, high = HELD_OUT_SHARE
    return (f"split: {trained}, {len(held_out.images)} held out ({boxes(held_out)}; the share of the images that gives "
            f"each class {HELD_OUT_BOXES} boxes, within {100 * low:.0f}–{100 * high:.0f} %) to stop and score the training")


def describe_budget(r: DetectorRecipe, steps: int, images: int, validated: bool) -> str:
    """The budget in one line: steps, what they come to in passes, and when training may stop."""
    source = f"--epochs {r.epochs}" if r.epochs is not None else ("--steps" if r.steps is not None else "the default")
    line = (f"budget: {steps} optimizer steps of {r.batch_size} images ({source}; {steps * r.batch_size / max(1, images):.0f} "
            f"passes over the {images} training images{', augmented' if r.augment else ''})")
    if validated:
        line += (f"; held-out mAP every {validation_interval(steps)} steps, stopping once it stops rising "
                 f"(after {steps // 2} steps at least)")
    return line


def validation_interval(steps: int) -> int:
    return max(VALIDATION_GAP, steps // VALIDATIONS)


def too_few_steps(r: DetectorRecipe, steps: int) -> str:
    how = f"--epochs {r.epochs}" if r.epochs is not None else f"--steps {steps}"
    return (f"{steps} optimizer steps ({how}) are too few for a detector to learn: from random init its AP stays near 0 "
            f"below ~200 steps and well short of its best below {MIN_DETECTOR_STEPS}; leave --epochs and --steps out for "
            f"the default {DETECTOR_STEPS} steps")


def after_training(r: DetectorRecipe, done: int, budget: int, history: list[tuple[int, float, float]]) -> list[str]:
    """Lines for a training that could not learn all it could: cut short by --max-minutes, or
    with its held-out mAP still rising at the end; and where it stopped early, why."""
    lines = []
    if done < budget and r.max_minutes is not None and done < MIN_DETECTOR_STEPS:
        lines.append(f"--max-minutes {r.max_minutes:g} stopped training after {done} of {budget} steps, too few to learn; "
                     "give it more minutes, or leave it out")
    elif done < budget and stalled([h[1] for h in history], PATIENCE, MIN_RISE):
        best_step, best, _ = max(history, key=lambda h: h[1])
        lines.append(f"stopped at step {done} of {budget}: the held-out mAP had stopped rising (best {best:.3f} at step "
                     f"{best_step}, {history[-1][1]:.3f} at the end)")
    if done >= budget and len(history) > PATIENCE:
        rise = history[-1][1] - history[-1 - PATIENCE][1]
        if rise > STILL_RISING:
            lines.append(f"the held-out mAP was still rising at the end (+{rise:.3f} over the last {done - history[-1 - PATIENCE][0]} "
                         f"steps, to {history[-1][1]:.3f}): more steps would help; try --steps {2 * budget}")
    return lines


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
    frames: FrameSpec = field(default_factory=lambda: FrameSpec.square(128))
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

    options = dict(frames=r.frames, feature_dim=r.feature_dim, pretrained=r.pretrained, trunk=r.trunk,
                   mask_prob=r.mask_prob, lr=r.lr, batch_size=r.batch_size, val_fraction=r.val_fraction)
    EncoderConfig(action_names=["a", "b"], **options)
    memory(training_memory(r.frames, r.feature_dim, r.trunk, r.batch_size),
           f"--feature-dim {r.feature_dim} with --image-size {r.frames.width} and --batch-size {r.batch_size} ({r.trunk} trunk)")
    if r.pretrained not in ("imagenet", "none"):
        with about("--pretrained"):
            read_checkpoint(r.pretrained, "encoder")
    with about("--detector"):
        box_fn = detector_box_fn(r.detector, r.device) if r.detector is not None else None
    dm = TransitionDataModule(r.demos, frames=r.frames, batch_size=r.batch_size, val_fraction=r.val_fraction,
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
    log.info("encoder (%s trunk at %d px) starts from %s", r.trunk, r.frames.width, load_pretrained(module.model))
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
