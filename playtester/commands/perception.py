"""Perception commands: `train detector`, `eval detector`, `train encoder`.

Each parses its options, calls its recipe (perception/recipes.py: data read and checked before
any model is built, bad input one line naming the record and the option) and prints the result.
Heavy libraries load inside the functions so that `playtester --help` stays quick.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from playtester.cores import busy_cores, give as give_cores, leave_to_others, spin_when_alone
from playtester.errors import UserError
from playtester.options import (
    DETECTOR_CHECKPOINT,
    MANY, Choice, Count, InFile, InFolder, NameOrFile, Number, OutFile, OutFolder, Seed, Size, about, check_memory, inputs_checked, option,
    threads_option,
)

console = Console()


DEVICE = Choice("auto", "cpu", "cuda", "mps")
COCO = InFile("COCO labels.json", inside="labels.json")
IMAGES = InFolder("folder of images")
CHECKPOINT = OutFile(".ckpt")
LOGDIR = OutFolder()
WORKERS = Count(0, 64)
LR = Number(0.0, 10.0, above=True)
MINUTES = Number(0.0, 10_000_000.0, above=True)


def _accelerator(device: str) -> str:
    return "gpu" if device == "cuda" else device


def _print_ap_table(table, title: str) -> None:
    """The AP table; with the AP50's bootstrap interval where the table has one (over fewer than
    `MIN_BOXES_PER_CLASS` boxes a resampling cannot show how uncertain the AP is: it says so)."""
    from playtester.perception.recipes import MIN_BOXES_PER_CLASS

    t = Table(title=title)
    interval = table.ap50_interval
    for col in ("class", "test boxes", "AP50", "AP@[.5:.95]") + (("AP50, 90 % interval",) if interval else ()):
        t.add_column(col, justify="left" if col == "class" else "right")

    def pct(v: float) -> str:
        return "–" if v != v else f"{100 * v:.1f} %"

    few = MIN_BOXES_PER_CLASS

    def spread(i: int, n: int) -> tuple[str, ...]:
        if not interval or i == len(interval):
            return ("",) if interval else ()
        return ("–" if n == 0 else f"too few boxes (< {few})" if n < few else f"{pct(interval[i][0])} – {pct(interval[i][1])}",)

    for i, (c, n, a50, a) in enumerate(table.rows()):
        t.add_row(c, str(n), pct(a50), pct(a), *spread(i, n))
    console.print(t)


def train_detector(
    coco: Path = option(COCO, ..., "--coco", help="COCO labels.json (as CVAT or Label Studio export it)."),
    out: Path = option(CHECKPOINT, ..., "--out", help="Checkpoint to write, e.g. models/detector.ckpt."),
    images: Optional[Path] = option(IMAGES, None, "--images", help="Image folder (default: the folder of --coco)."),
    val_coco: Optional[Path] = option(
        COCO, None, "--val-coco", help="COCO labels.json of separate held-out shots of the same classes (images beside it): they "
        "stop and score the training, and every image of --coco trains. Default: a share of --coco is held out "
        "(enough for 15 boxes a class, 10–20 % of the images)."),
    backbone: str = option(
        Choice("resnet50", "mobilenet", "compact"), "resnet50", "--backbone", help="resnet50 or mobilenet (for COCO weights), or compact (GroupNorm, trains from scratch in minutes)."),
    pretrained: str = option(
        NameOrFile(("auto", "coco", "none"), "weights file"), "auto", "--pretrained", help="auto (COCO weights where torchvision's cache has them, else the compact backbone from "
        "random init), coco, none, or the path of weights to start from: a detector checkpoint, a torchvision state dict, "
        "or an encoder trained with --trunk compact on unlabelled play (domain pretraining for --backbone compact)."),
    image_size: int = option(Size(2048, 32), 128, "--image-size", help="Frames are scaled to fit in this many pixels a side."),
    steps: Optional[int] = option(
        Count(1, MANY), None, "--steps", help="Optimizer steps to train for (default 1000, whatever the set's size: a "
        "small set is seen many times, augmented); training stops sooner once the held-out mAP has stopped rising."),
    epochs: Optional[int] = option(Count(1, MANY), None, "--epochs", help="Passes over the training images, instead of --steps."),
    max_minutes: Optional[float] = option(MINUTES, None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = option(Size(), 8, "--batch-size", help="Images per step."),
    lr: Optional[float] = option(LR, None, "--lr", help="AdamW peak learning rate (default: 2e-3 from scratch, 3e-4 otherwise)."),
    schedule: str = option(Choice("cosine", "constant"), "cosine", "--schedule", help="cosine (warm-up, then cosine to 0) or constant."),
    trainable_layers: Optional[int] = option(
        Count(0, 6), None, "--trainable-layers", help="Backbone stages to train from the top (default: 0 with pretrained weights, all with none)."),
    base_coco: Optional[Path] = option(COCO, None, "--base-coco", help="Base-class shots (COCO) to mix into training (few-shot, TFA)."),
    base_images: Optional[Path] = option(IMAGES, None, "--base-images", help="Image folder of --base-coco."),
    base_shots: int = option(Count(1, MANY), 10, "--base-shots", help="Base-class images per class to mix in."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Box-aware augmentation (albumentations)."),
    seed: int = option(Seed(), 0, "--seed", help="Seed of the held-out split and of training."),
    threads: int = threads_option(" With 0, cores that other work keeps busy as it starts are left to it (beside a "
                                  "busy job this stage took x0.85 the time on one thread fewer)."),
    logdir: Optional[Path] = option(LOGDIR, None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = option(WORKERS, 0, "--workers", help="Data-loading worker processes."),
    device: str = option(DEVICE, "auto", "--device", help="auto, cpu, cuda or mps."),
    negatives: Optional[List[Path]] = option(
        InFile("run folder, image folder or list of folders", folder_ok=True), None, "--negatives",
        help="Frames with no object in them, trained on as background images (repeatable): a run "
        "folder (the candidate negatives its run wrote in negatives/), a folder of images (frames you marked empty), or a "
        "text file naming such folders one a line. They must have the shots' size."),
) -> None:
    """Train the OOI detector (Faster R-CNN) on labelled shots for a budget of optimizer steps, holding some out to stop
    and score it; print its held-out AP per class, with how uncertain that is, and say when the shots or the budget
    are too few to learn."""
    others = busy_cores()  # one busy process: on idle cores its threads need not sleep, on busy ones it takes fewer
    spin_when_alone(busy=lambda: others)
    threads = give_cores(leave_to_others(threads, others))
    from playtester.perception import recipes

    recipe = recipes.DetectorRecipe(
        coco=coco, out=out, images=images, val_coco=val_coco, backbone=backbone, pretrained=pretrained, image_size=image_size,
        steps=steps, epochs=epochs, max_minutes=max_minutes, batch_size=batch_size, lr=lr, schedule=schedule, trainable_layers=trainable_layers,
        base_coco=base_coco, base_images=base_images, base_shots=base_shots, augment=augment, seed=seed, threads=threads,
        logdir=logdir, workers=workers, accelerator=_accelerator(device), negatives=tuple(negatives or ()),
    )
    done = recipes.train_detector(recipe, say=console.print, about=about, memory=check_memory)
    _say_written(out, done.trainer)
    if done.held_out is not None:
        _print_ap_table(done.held_out, f"held-out AP ({done.held_out_images} images)")


def _say_written(out: Path, trainer) -> None:
    console.print(f"wrote {out} (epochs {trainer.current_epoch}, steps {trainer.global_step}); TensorBoard logs in {trainer.logger.log_dir}")


def eval_detector(
    ckpt: Path = option(DETECTOR_CHECKPOINT, ..., "--ckpt", help="Detector checkpoint."),
    coco: Path = option(COCO, ..., "--coco", help="COCO labels.json to evaluate on."),
    images: Optional[Path] = option(IMAGES, None, "--images", help="Image folder (default: the folder of --coco)."),
    split: str = option(
        Choice("test", "val", "train", "all"), "test", "--split", help="test (the images training held out; val is the same "
        "for detectors trained with the adaptive split), train, or all."),
    batch_size: int = option(Size(), 8, "--batch-size", help="Images per batch."),
    json_out: Optional[Path] = option(OutFile(".json"), None, "--json", help="Also write the table as JSON here."),
    device: str = option(DEVICE, "auto", "--device", help="auto, cpu, cuda or mps."),
    target_precision: Optional[float] = option(
        Number(0.0, 1.0), None, "--target-precision",
        help="Pick each class's score threshold for this precision on these shots (the lowest that reaches it) and show "
             "them beside the ones the checkpoint keeps; `train detector` keeps those of 0.9 on its held-out shots, which a "
             "run uses only when those held 20 background images or more (`shots --background`)."),
    store: bool = typer.Option(False, "--store", help="With --target-precision: keep the thresholds picked in the checkpoint "
                               "(a tester run then uses them instead of one --min-score); the shots must hold 20 background images or more "
                               "(`shots --background`), or the thresholds come out too low for free play."),
) -> None:
    """Per-class AP50 and AP@[.5:.95] of a detector on labelled shots (the paper's Table I), also
    for the healthy and the bugged boxes apart when the file marks bugs; the per-class score
    thresholds the checkpoint keeps, and with --target-precision those these shots give."""
    from playtester.perception.detector import detector_memory, load_detector
    from playtester.perception.training import resolve_device

    if store and target_precision is None:
        raise UserError("--store keeps the thresholds --target-precision picks; give --target-precision too (e.g. 0.9)")
    with about("--ckpt"):
        detector = load_detector(ckpt, resolve_device(None if device == "auto" else device))
    check_memory(detector_memory(detector.config, batch_size, training=False), f"--batch-size {batch_size}")
    data = _eval_shots(ckpt, coco, images, split, store, detector)
    inputs_checked()
    _report_ap(detector, data, f"{ckpt.name} on {coco.name}", split, batch_size, json_out)
    _show_thresholds(ckpt, detector, data, target_precision, store, batch_size)


def _eval_shots(ckpt: Path, coco: Path, images: Path | None, split: str, store: bool, detector):
    """The labelled shots `eval detector` scores, checked before any work: the detector's classes,
    a split the checkpoint can name (its own held-out shots, the same way training drew them), not
    empty, and enough background images when --store will keep thresholds picked on them."""
    from playtester.datasets.detection import detector_splits, load_coco
    from playtester.perception.recipes import too_few_to_score

    _check_eval_classes(coco, ckpt, detector.classes)
    data = load_coco(coco, images, classes=detector.classes)
    if split != "all":
        cfg = detector.config
        if cfg.split == "none" and split != "train":
            raise UserError(f"--split {split}: detector {ckpt} trained on every image of its training file (its held-out "
                            "shots were a --val-coco file); use --split all on shots it never saw")
        data = detector_splits(data, cfg.split, cfg.split_seed, cfg.held_out_boxes)[split]
    if not data.images:
        raise UserError(f"COCO file {coco}: its {split} split is empty; use --split all")
    if store:
        from playtester.perception.calibration import MIN_BACKGROUNDS, background_count

        if background_count(data.images) < MIN_BACKGROUNDS:
            raise UserError(f"--store: {coco} ({split}) has {background_count(data.images)} background images (no box), fewer "
                            f"than {MIN_BACKGROUNDS}: thresholds picked on framed shots alone come out too low for free play "
                            f"and a run would not use them; make shots with `shots --background N` (docs/benchmarks/real-tests.md)")
    scant = too_few_to_score(data.counts(), f"boxes in the {split} split", "score on more shots")
    if scant:
        console.print(scant)
    return data


def _report_ap(detector, data, title: str, split: str, batch_size: int, json_out: Path | None) -> None:
    """Print the AP table of every box, and of the healthy and the bugged boxes apart when the
    shots mark bugs; write them as JSON to `json_out` when given."""
    from playtester.perception.detector_eval import evaluate_variants

    tables = evaluate_variants(detector, data, batch_size=batch_size, progress=True)
    table = tables["all"]
    _print_ap_table(table, f"{title} ({split}: {table.images} images)")
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


def _show_thresholds(ckpt: Path, detector, data, target: float | None, store: bool, batch_size: int) -> None:
    """The per-class thresholds the checkpoint keeps, and those `target` picks on `data` (kept with `store`)."""
    import torch

    from playtester.perception.calibration import KEY, RUN_FLOOR, calibrate, store_thresholds, thresholds_of, unused_why, usable

    kept = (torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True).get("playtester") or {}).get(KEY)
    picked = calibrate(detector, data.images, target, batch_size) if target is not None else None
    if kept is None and picked is None:
        console.print("no per-class score thresholds in this checkpoint (trained before them): a run uses --min-score 0.6; "
                      "pick them with --target-precision 0.9 --store")
        return
    t = Table(title="per-class score thresholds")
    t.add_column("class")
    for entry, source in ((kept, "kept"), (picked, "these shots")):
        if entry is not None:
            what = f"{source}: for precision {entry['target_precision']:.2f} on {entry['images']} images"
            for col in ("threshold", "precision", "recall"):
                t.add_column(f"{col} ({what})" if col == "threshold" else col, justify="right")
    for c in detector.classes:
        row = [c]
        for entry in (kept, picked):
            if entry is not None:
                v = entry["classes"].get(c)
                row += ["–", "–", "–"] if v is None else [
                    f"{v['threshold']:.2f}" + ("" if v["reached"] else " (target not reached)"),
                    "–" if v["precision"] is None else f"{100 * v['precision']:.1f} %", f"{100 * v['recall']:.1f} %"]
        t.add_row(*row)
    console.print(t)
    for entry, source in ((kept, "the checkpoint's"), (picked, "these shots'")):
        if entry is not None and not usable(entry):
            console.print(f"{source} thresholds: not used by a run, {unused_why(entry)}")
    stored = picked if store and picked is not None else kept
    if stored is not None and usable(stored):
        runs = ", ".join(f"{c} {t:.2f}" for c, t in thresholds_of(stored).items())
        console.print(f"a run takes (each kept threshold, {RUN_FLOOR} where that is lower: in free play objects are rarer "
                      f"than in shots): {runs}")
    if store and picked is not None:
        store_thresholds(ckpt, picked)
        console.print(f"kept these thresholds in {ckpt}")


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
    demos: Path = option(InFolder("folder of demo episodes"), ..., "--demos", help="Folder of demo episodes (any behaviours)."),
    out: Path = option(CHECKPOINT, ..., "--out", help="Checkpoint to write, e.g. models/encoder.ckpt."),
    detector: Optional[Path] = option(DETECTOR_CHECKPOINT, None, "--detector", help="Detector checkpoint: OOI boxes for episodes without ground truth."),
    image_size: int = option(Size(2048, 64), 128, "--image-size", help="Frames are resized to this many pixels a side."),
    epochs: int = option(Count(1, MANY), 10, "--epochs", help="Most passes over the training transitions."),
    max_minutes: Optional[float] = option(MINUTES, None, "--max-minutes", help="Stop training after this long, whatever the epoch."),
    batch_size: int = option(Size(), 32, "--batch-size", help="Frame pairs per step."),
    lr: float = option(LR, 3e-4, "--lr", help="AdamW learning rate."),
    pretrained: str = option(NameOrFile(("imagenet", "none"), "encoder checkpoint"), "imagenet", "--pretrained", help="imagenet, none, or an encoder checkpoint to continue from."),
    feature_dim: int = option(Size(), 512, "--feature-dim", help="Length of the feature vector."),
    trunk: str = option(
        Choice("alexnet", "compact"), "alexnet", "--trunk", help="alexnet (the paper's), or compact: the detector's compact body, which the trained encoder "
                                   "can then start (train detector --backbone compact --pretrained THIS.ckpt)."),
    mask_prob: float = option(Number(0.0, 1.0), 1.0, "--mask-prob", help="Chance that one frame of a pair is OD-masked."),
    balance: bool = typer.Option(True, "--balance/--no-balance", help="Weight the loss by inverse action frequency."),
    val_fraction: float = option(Number(0.0, 1.0, below=True), 0.2, "--val-fraction", help="Share of each behaviour's episodes held out."),
    seed: int = option(Seed(), 0, "--seed", help="Seed of the episode split and of training."),
    logdir: Optional[Path] = option(LOGDIR, None, "--logdir", help="TensorBoard logs (default: logs/ beside --out)."),
    workers: int = option(WORKERS, 0, "--workers", help="Data-loading worker processes."),
    device: str = option(DEVICE, "auto", "--device", help="auto, cpu, cuda or mps."),
    threads: int = threads_option(),
) -> None:
    """Train the feature encoder by masked inverse dynamics; report held-out accuracy per action."""
    give_cores(threads)
    from playtester.capture.frames import FrameSpec
    from playtester.perception import recipes

    recipe = recipes.EncoderRecipe(
        demos=demos, out=out, detector=detector, frames=FrameSpec.square(image_size), epochs=epochs, max_minutes=max_minutes,
        batch_size=batch_size, lr=lr, pretrained=pretrained, feature_dim=feature_dim, trunk=trunk, mask_prob=mask_prob,
        balance=balance, val_fraction=val_fraction, seed=seed, logdir=logdir, workers=workers,
        accelerator=_accelerator(device), device=device,
    )
    done = recipes.train_encoder(recipe, about=about, memory=check_memory)
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
    caution = report.learnt_little()
    if caution:
        console.print(caution)
