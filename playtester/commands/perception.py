"""Perception commands: `train detector`, `eval detector`, `train encoder`.

Each parses its options, calls its recipe (perception/recipes.py: data read and checked before
any model is built, bad input one line naming the record and the option) and prints the result.
Heavy libraries load inside the functions so that `playtester --help` stays quick.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.cores import THREADS_HELP, give as give_cores
from playtester.errors import UserError
from playtester.commands.options import MANY, WIDE, about

console = Console()


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
    backbone: str = typer.Option(
        "resnet50", "--backbone", help="resnet50 or mobilenet (for COCO weights), or compact (GroupNorm, trains from scratch in minutes)."),
    pretrained: str = typer.Option(
        "auto", "--pretrained", help="auto (COCO weights where torchvision's cache has them, else the compact backbone from "
        "random init), coco, none, or the path of weights to start from: a detector checkpoint, a torchvision state dict, "
        "or an encoder trained with --trunk compact on unlabelled play (domain pretraining for --backbone compact)."),
    image_size: int = typer.Option(128, "--image-size", min=32, max=2048, help="Frames are scaled to fit in this many pixels a side."),
    epochs: int = typer.Option(4, "--epochs", min=1, max=MANY, help="Passes over the training split."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = typer.Option(8, "--batch-size", min=1, max=WIDE, help="Images per step."),
    lr: Optional[float] = typer.Option(None, "--lr", help="AdamW peak learning rate (default: 2e-3 from scratch, 3e-4 otherwise)."),
    schedule: str = typer.Option("cosine", "--schedule", help="cosine (warm-up, then cosine to 0) or constant."),
    trainable_layers: Optional[int] = typer.Option(
        None, "--trainable-layers", help="Backbone stages to train from the top (default: 0 with pretrained weights, all with none)."),
    base_coco: Optional[Path] = typer.Option(None, "--base-coco", help="Base-class shots (COCO) to mix into training (few-shot, TFA)."),
    base_images: Optional[Path] = typer.Option(None, "--base-images", help="Image folder of --base-coco."),
    base_shots: int = typer.Option(10, "--base-shots", help="Base-class images per class to mix in."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Box-aware augmentation (albumentations)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the 70/10/20 split and of training."),
    threads: int = typer.Option(0, "--threads", min=0, help=THREADS_HELP),
    logdir: Optional[Path] = typer.Option(None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = typer.Option(0, "--workers", help="Data-loading worker processes."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
) -> None:
    """Train the OOI detector (Faster R-CNN) on labelled shots; print its test AP per class."""
    _check_out(out)
    _check_coco_path(coco)
    threads = give_cores(threads)
    from playtester.perception import recipes

    recipe = recipes.DetectorRecipe(
        coco=coco, out=out, images=images, backbone=backbone, pretrained=pretrained, image_size=image_size, epochs=epochs,
        max_minutes=max_minutes, batch_size=batch_size, lr=lr, schedule=schedule, trainable_layers=trainable_layers,
        base_coco=base_coco, base_images=base_images, base_shots=base_shots, augment=augment, seed=seed, threads=threads,
        logdir=logdir, workers=workers, accelerator=_accelerator(device),
    )
    done = recipes.train_detector(recipe, say=console.print, about=about)
    _say_written(out, done.trainer)
    if done.held_out is not None:
        _print_ap_table(done.held_out, f"test AP ({done.held_out_images} held-out images)")


def _say_written(out: Path, trainer) -> None:
    console.print(f"wrote {out} (epochs {trainer.current_epoch}, steps {trainer.global_step}); TensorBoard logs in {trainer.logger.log_dir}")


def _check_coco_path(coco: Path) -> None:
    """`--coco` given a shots folder: point at its labels.json, or say there is none."""
    if coco.is_dir():
        hint = f"give {coco / 'labels.json'}" if (coco / "labels.json").is_file() else "it holds no labels.json (make shots with `playtester shots`)"
        raise UserError(f"--coco {coco}: is a folder; {hint}")


def eval_detector(
    ckpt: Path = typer.Option(..., "--ckpt", help="Detector checkpoint."),
    coco: Path = typer.Option(..., "--coco", help="COCO labels.json to evaluate on."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image folder (default: the folder of --coco)."),
    split: str = typer.Option("test", "--split", help="test, val or train (the 70/10/20 split of training), or all."),
    batch_size: int = typer.Option(8, "--batch-size", help="Images per batch."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the table as JSON here."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
) -> None:
    """Per-class AP50 and AP@[.5:.95] of a detector on labelled shots (the paper's Table I), also
    for the healthy and the bugged boxes apart when the file marks bugs."""
    from playtester.datasets.detection import load_coco, split_images
    from playtester.perception.detector import load_detector
    from playtester.perception.detector_eval import evaluate_variants
    from playtester.perception.recipes import MIN_BOXES_PER_CLASS
    from playtester.perception.training import resolve_device

    if split not in ("test", "val", "train", "all"):
        raise UserError(f"--split {split!r}: use test, val, train or all")
    if json_out is not None:
        _check_out(json_out, ".json")
    _check_coco_path(coco)
    _accelerator(device)
    with about("--ckpt"):
        detector = load_detector(ckpt, resolve_device(None if device == "auto" else device))
    _check_eval_classes(coco, ckpt, detector.classes)
    data = load_coco(coco, images, classes=detector.classes)
    if split != "all":
        data = data.subset(split_images(data, seed=detector.config.split_seed)[split])
    if not data.images:
        raise UserError(f"COCO file {coco}: its {split} split is empty; use --split all")
    few = {c: n for c, n in data.counts().items() if n < MIN_BOXES_PER_CLASS}
    if few:
        console.print(f"few boxes to score ({', '.join(f'{c} {n}' for c, n in few.items())}; fewer than "
                      f"{MIN_BOXES_PER_CLASS}): their AP says little")
    tables = evaluate_variants(detector, data, batch_size=batch_size, progress=True)
    table = tables["all"]
    _print_ap_table(table, f"{ckpt.name} on {coco.name} ({split}: {table.images} images)")
    marked = any(im.bugged.any() for im in data.images)
    if marked:
        for variant in ("healthy", "bugged"):
            _print_ap_table(tables[variant], f"{variant} boxes only (the others ignored)")
    if json_out is not None:
        from playtester.files import write_text_atomic

        doc = table.to_json()
        if marked:
            doc["variants"] = {v: tables[v].to_json() for v in ("healthy", "bugged")}
        write_text_atomic(json_out, json.dumps(doc, indent=1))
        console.print(f"wrote {json_out}")


def _check_eval_classes(coco: Path, ckpt: Path, classes: list[str]) -> None:
    """A file whose boxes name a class the detector lacks cannot be scored by it: one line."""
    try:
        doc = json.loads(coco.read_text())
        names = {int(c["id"]): str(c["name"]) for c in doc["categories"]}
        used = {names.get(int(a["category_id"])) for a in doc["annotations"] if not a.get("iscrowd", 0)}
    except Exception:
        return  # load_coco names what is wrong with the file
    unknown = sorted(n for n in used if n is not None and n not in classes)
    if unknown:
        raise UserError(f"--coco {coco}: boxes of {', '.join(repr(n) for n in unknown)}, which detector {ckpt} does not know "
                        f"(its classes: {', '.join(classes)}); evaluate on shots of its classes, or train it on these")


def train_encoder(
    demos: Path = typer.Option(..., "--demos", help="Folder of demo episodes (any behaviours)."),
    out: Path = typer.Option(..., "--out", help="Checkpoint to write, e.g. models/encoder.ckpt."),
    detector: Optional[Path] = typer.Option(None, "--detector", help="Detector checkpoint: OOI boxes for episodes without ground truth."),
    image_size: int = typer.Option(128, "--image-size", min=32, max=2048, help="Frames are resized to this many pixels a side."),
    epochs: int = typer.Option(10, "--epochs", min=1, max=MANY, help="Most passes over the training transitions."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = typer.Option(32, "--batch-size", min=1, max=WIDE, help="Frame pairs per step."),
    lr: float = typer.Option(3e-4, "--lr", help="AdamW learning rate."),
    pretrained: str = typer.Option("imagenet", "--pretrained", help="imagenet, none, or an encoder checkpoint to continue from."),
    feature_dim: int = typer.Option(512, "--feature-dim", help="Length of the feature vector."),
    trunk: str = typer.Option(
        "alexnet", "--trunk", help="alexnet (the paper's), or compact: the detector's compact body, which the trained encoder "
                                   "can then start (train detector --backbone compact --pretrained THIS.ckpt)."),
    mask_prob: float = typer.Option(1.0, "--mask-prob", help="Chance that one frame of a pair is OD-masked."),
    balance: bool = typer.Option(True, "--balance/--no-balance", help="Weight the loss by inverse action frequency."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Share of each behaviour's episodes held out."),
    seed: int = typer.Option(0, "--seed", help="Seed of the episode split and of training."),
    logdir: Optional[Path] = typer.Option(None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = typer.Option(0, "--workers", help="Data-loading worker processes."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
    threads: int = typer.Option(0, "--threads", min=0, help=THREADS_HELP),
) -> None:
    """Train the feature encoder by masked inverse dynamics; report held-out accuracy per action."""
    _check_out(out)
    give_cores(threads)
    from playtester.perception import recipes

    recipe = recipes.EncoderRecipe(
        demos=demos, out=out, detector=detector, image_size=image_size, epochs=epochs, max_minutes=max_minutes,
        batch_size=batch_size, lr=lr, pretrained=pretrained, feature_dim=feature_dim, trunk=trunk, mask_prob=mask_prob,
        balance=balance, val_fraction=val_fraction, seed=seed, logdir=logdir, workers=workers,
        accelerator=_accelerator(device), device=device,
    )
    done = recipes.train_encoder(recipe, about=about)
    _say_written(out, done.trainer)
    if done.held_out is not None:
        _print_idm_report(done.held_out)


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
