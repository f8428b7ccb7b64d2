"""Perception commands: `train detector`, `eval detector`, `train encoder`.

Heavy libraries load inside the functions so that `playtester --help` stays quick. Data are read
and checked before any model is built: bad input stops everything with one line naming the record.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.capture.errors import UserError

console = Console()
log = logging.getLogger("playtester.perception")


def _check_out(out: Path, suffix: str = ".ckpt") -> None:
    if not out.parent.exists():
        raise UserError(f"--out {out}: its parent folder {out.parent} does not exist; create it first")
    if out.is_dir():
        raise UserError(f"--out {out}: is a folder; give a file name such as {out / ('model' + suffix)}")


def _accelerator(device: str) -> str:
    if device not in ("auto", "cpu", "cuda", "gpu", "mps"):
        raise UserError(f"--device {device!r}: use auto, cpu, cuda or mps")
    return "gpu" if device == "cuda" else device


def _print_ap_table(table, title: str) -> None:
    t = Table(title=title)
    for col in ("class", "test boxes", "AP50", "AP@[.5:.95]"):
        t.add_column(col, justify="left" if col == "class" else "right")

    def pct(v: float) -> str:
        return "–" if v != v else f"{100 * v:.1f} %"

    for c, n, a50, a in table.rows():
        t.add_row(c, str(n), pct(a50), pct(a))
    console.print(t)


def train_detector(
    coco: Path = typer.Option(..., "--coco", help="COCO labels.json (as CVAT or Label Studio export it)."),
    out: Path = typer.Option(..., "--out", help="Checkpoint to write, e.g. models/detector.ckpt."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image folder (default: the folder of --coco)."),
    backbone: str = typer.Option("resnet50", "--backbone", help="resnet50 (ResNet-50-FPN) or mobilenet (MobileNet-v3-FPN, fast)."),
    pretrained: str = typer.Option("coco", "--pretrained", help="coco, none, or the path of weights to start from."),
    image_size: int = typer.Option(128, "--image-size", help="Frames are scaled to fit in this many pixels a side."),
    epochs: int = typer.Option(4, "--epochs", help="Most passes over the training split."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = typer.Option(8, "--batch-size", help="Images per step."),
    lr: float = typer.Option(3e-4, "--lr", help="AdamW learning rate."),
    trainable_layers: Optional[int] = typer.Option(
        None, "--trainable-layers", help="Backbone stages to train from the top (default: 0 with pretrained weights, all with none)."),
    base_coco: Optional[Path] = typer.Option(None, "--base-coco", help="Base-class shots (COCO) to mix into training (few-shot, TFA)."),
    base_images: Optional[Path] = typer.Option(None, "--base-images", help="Image folder of --base-coco."),
    base_shots: int = typer.Option(10, "--base-shots", help="Base-class images per class to mix in."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Box-aware augmentation (albumentations)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the 70/10/20 split and of training."),
    logdir: Optional[Path] = typer.Option(None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = typer.Option(0, "--workers", help="Data-loading worker processes."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
) -> None:
    """Fine-tune the OOI detector (Faster R-CNN) on labelled shots; print its test AP per class."""
    _check_out(out)
    accelerator = _accelerator(device)
    import lightning as L

    from playtester.datasets.detection import DetectionDataModule
    from playtester.perception.detector import BACKBONE_STAGES, DetectorConfig, DetectorModule
    from playtester.perception.detector_eval import evaluate_detector
    from playtester.perception.training import make_trainer, save_checkpoint_atomic

    if (base_coco is None) != (base_images is None) and base_images is not None:
        raise UserError("--base-images needs --base-coco")
    DetectorConfig(classes=["_"], backbone=backbone, pretrained=pretrained, image_size=image_size, lr=lr, batch_size=batch_size,
                   trainable_layers=trainable_layers)
    dm = DetectionDataModule(
        coco, images, base_labels=base_coco, base_images=base_images, base_shots=base_shots if base_coco else 0,
        batch_size=batch_size, augment=augment, seed=seed, workers=workers,
    )
    dm.setup("fit")
    sizes = {s: len(dm.splits[s].images) for s in dm.splits}
    if sizes["train"] == 0:
        raise UserError(f"COCO file {coco}: too few images to train on ({sum(sizes.values())}); label more shots")
    counts = dm.splits["train"].counts()
    log.info("shots: %s images train / %s val / %s test; training boxes: %s", sizes["train"], sizes["val"], sizes["test"],
             ", ".join(f"{c} {n}" for c, n in counts.items()))
    cfg = DetectorConfig(
        classes=dm.classes, backbone=backbone, pretrained=pretrained, image_size=image_size, lr=lr,
        batch_size=batch_size, split_seed=seed, trainable_layers=trainable_layers,
    )
    L.seed_everything(seed, verbose=False)
    module = DetectorModule(**asdict(cfg))
    log.info("detector %s at %d px starts from %s; %d of %d backbone stages trained (%.0f %% of its weights frozen), "
             "FPN and heads trained", backbone, image_size, module.model.load_pretrained(), cfg.trainable_layers,
             BACKBONE_STAGES[backbone], 100 * module.model.frozen_fraction)
    trainer = make_trainer(
        name="detector", logdir=logdir or out.parent / "logs", epochs=epochs, max_minutes=max_minutes,
        accelerator=accelerator, val_every=1 if sizes["val"] else 10**6,
    )
    trainer.fit(module, datamodule=dm)
    if module.diverged:
        raise UserError("detector training diverged (non-finite loss); nothing was saved; try a lower --lr")
    save_checkpoint_atomic(trainer, out)
    console.print(f"wrote {out} (epochs {trainer.current_epoch}, steps {trainer.global_step}); TensorBoard logs in {trainer.logger.log_dir}")
    if sizes["test"]:
        table = evaluate_detector(module.model, dm.splits["test"], batch_size=batch_size)
        _print_ap_table(table, f"test AP ({sizes['test']} held-out images)")


def eval_detector(
    ckpt: Path = typer.Option(..., "--ckpt", help="Detector checkpoint."),
    coco: Path = typer.Option(..., "--coco", help="COCO labels.json to evaluate on."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image folder (default: the folder of --coco)."),
    split: str = typer.Option("test", "--split", help="test, val or train (the 70/10/20 split of training), or all."),
    batch_size: int = typer.Option(8, "--batch-size", help="Images per batch."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the table as JSON here."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
) -> None:
    """Per-class AP50 and AP@[.5:.95] of a detector on labelled shots (the paper's Table I)."""
    from playtester.datasets.detection import load_coco, split_images
    from playtester.perception.detector import load_detector
    from playtester.perception.detector_eval import evaluate_detector
    from playtester.perception.training import resolve_device

    if split not in ("test", "val", "train", "all"):
        raise UserError(f"--split {split!r}: use test, val, train or all")
    if json_out is not None:
        _check_out(json_out, ".json")
    _accelerator(device)
    detector = load_detector(ckpt, resolve_device(None if device == "auto" else device))
    data = load_coco(coco, images, classes=detector.classes)
    if split != "all":
        data = data.subset(split_images(data, seed=detector.config.split_seed)[split])
    if not data.images:
        raise UserError(f"COCO file {coco}: its {split} split is empty; use --split all")
    table = evaluate_detector(detector, data, batch_size=batch_size, progress=True)
    _print_ap_table(table, f"{ckpt.name} on {coco.name} ({split}: {table.images} images)")
    if json_out is not None:
        from playtester.capture.atomic import write_text_atomic

        write_text_atomic(json_out, json.dumps(table.to_dict(), indent=1))
        console.print(f"wrote {json_out}")


def _detector_box_fn(ckpt: Path, device: str):
    """A function giving, for an episode, the most confident detection's box in each frame."""
    import numpy as np
    from tqdm import tqdm

    from playtester.perception.detector import load_detector
    from playtester.perception.training import resolve_device

    detector = load_detector(ckpt, resolve_device(None if device == "auto" else device))

    def boxes(ep) -> "np.ndarray":
        out = np.full((len(ep), 4), np.nan, np.float32)
        for start in tqdm(range(0, len(ep), 16), desc=f"detecting OOIs in {ep.name}", unit="batch", leave=False):
            frames = np.asarray(ep.frames[start:start + 16])
            for i, (b, _, _) in enumerate(detector.predict(frames)):
                if len(b):
                    out[start + i] = b[0]
        return out

    return boxes


def _class_weights(counts, cap: float = 10.0) -> list[float]:
    """Inverse-frequency weights (mean 1 over the actions seen), capped; 1 for unseen actions."""
    present = [c for c in counts if c > 0]
    total = sum(present)
    return [min(cap, total / (len(present) * c)) if c > 0 else 1.0 for c in counts]


def train_encoder(
    demos: Path = typer.Option(..., "--demos", help="Folder of demo episodes (any behaviours)."),
    out: Path = typer.Option(..., "--out", help="Checkpoint to write, e.g. models/encoder.ckpt."),
    detector: Optional[Path] = typer.Option(None, "--detector", help="Detector checkpoint: OOI boxes for episodes without ground truth."),
    image_size: int = typer.Option(128, "--image-size", help="Frames are resized to this many pixels a side."),
    epochs: int = typer.Option(10, "--epochs", help="Most passes over the training transitions."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = typer.Option(32, "--batch-size", help="Frame pairs per step."),
    lr: float = typer.Option(3e-4, "--lr", help="AdamW learning rate."),
    pretrained: str = typer.Option("imagenet", "--pretrained", help="imagenet, none, or an encoder checkpoint to continue from."),
    feature_dim: int = typer.Option(512, "--feature-dim", help="Length of the feature vector."),
    mask_prob: float = typer.Option(1.0, "--mask-prob", help="Chance that one frame of a pair is OD-masked."),
    balance: bool = typer.Option(True, "--balance/--no-balance", help="Weight the loss by inverse action frequency."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Share of each behaviour's episodes held out."),
    seed: int = typer.Option(0, "--seed", help="Seed of the episode split and of training."),
    logdir: Optional[Path] = typer.Option(None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = typer.Option(0, "--workers", help="Data-loading worker processes."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
) -> None:
    """Train the feature encoder by masked inverse dynamics; report held-out accuracy per action."""
    _check_out(out)
    accelerator = _accelerator(device)
    import lightning as L

    from playtester.datasets.transitions import TransitionDataModule
    from playtester.perception.encoder import EncoderConfig, InverseDynamicsModule, load_pretrained
    from playtester.perception.training import make_trainer, save_checkpoint_atomic

    EncoderConfig(action_names=["a", "b"], image_size=image_size, feature_dim=feature_dim, pretrained=pretrained,
                  mask_prob=mask_prob, lr=lr, batch_size=batch_size, val_fraction=val_fraction)
    box_fn = _detector_box_fn(detector, device) if detector is not None else None
    dm = TransitionDataModule(demos, image_size=image_size, batch_size=batch_size, val_fraction=val_fraction,
                              seed=seed, workers=workers, box_fn=box_fn)
    dm.setup("fit")
    if len(dm.train_set) == 0:
        raise UserError(f"demos {demos}: no training transitions")
    counts = dm.action_counts("train").tolist()
    log.info("demos: %d training episodes (%d pairs), %d held out (%d pairs)", len(dm.train_set.episodes), len(dm.train_set),
             len(dm.val_set.episodes), len(dm.val_set))
    cfg = EncoderConfig(
        action_names=dm.action_names, image_size=image_size, feature_dim=feature_dim, pretrained=pretrained,
        mask_prob=mask_prob, lr=lr, batch_size=batch_size, val_fraction=val_fraction, seed=seed,
        class_weights=_class_weights(counts) if balance else None,
    )
    L.seed_everything(seed, verbose=False)
    module = InverseDynamicsModule(**asdict(cfg))
    log.info("encoder (AlexNet trunk at %d px) starts from %s", image_size, load_pretrained(module.model))
    trainer = make_trainer(
        name="encoder", logdir=logdir or out.parent / "logs", epochs=epochs, max_minutes=max_minutes,
        accelerator=accelerator, val_every=1 if len(dm.val_set) else 10**6,
    )
    trainer.fit(module, datamodule=dm)
    if module.diverged:
        raise UserError("encoder training diverged (non-finite loss); nothing was saved; try a lower --lr")
    save_checkpoint_atomic(trainer, out)
    console.print(f"wrote {out} (epochs {trainer.current_epoch}, steps {trainer.global_step}); TensorBoard logs in {trainer.logger.log_dir}")
    if len(dm.val_set):
        from playtester.perception.encoder import IdmReport, action_accuracy

        total, correct = action_accuracy(module.model, dm.val_dataloader())
        _print_idm_report(IdmReport.from_counts(cfg.action_names, total, correct, train_counts=counts))


def _print_idm_report(report) -> None:
    t = Table(title=f"held-out inverse-dynamics accuracy ({sum(report.samples)} frame pairs)")
    for col in ("action", "held-out pairs", "accuracy"):
        t.add_column(col, justify="left" if col == "action" else "right")
    for name, n, acc in zip(report.actions, report.samples, report.accuracy):
        t.add_row(name, str(n), "–" if n == 0 else f"{100 * acc:.1f} %")
    console.print(t)
    console.print(
        f"accuracy {100 * report.overall:.1f} % (majority-action baseline {100 * report.majority:.1f} %); "
        f"balanced accuracy {100 * report.balanced:.1f} % (chance {100 * report.chance:.1f} %)"
    )
