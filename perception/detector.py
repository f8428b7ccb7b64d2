"""The OOI detector: torchvision Faster R-CNN, fine-tuned few-shot on a handful of labelled shots.

As in "frustratingly simple few-shot detection" (TFA, Wang et al. 2020) the backbone of a
COCO-trained model stays frozen and only the heads (RPN and box head, with a new predictor for the
game's classes) are trained; base-class shots can be mixed in (see `DetectionDataModule`).
Without pretrained weights (`pretrained="none"`) a frozen random backbone would be useless, so it
is trained too (said in the log). Where no COCO weights can be had, the `compact` backbone
(`compact_backbone.py`: GroupNorm, two fine levels, anchors fitted to the shots) is the one that
learns from random init in CPU minutes; `resolve_pretrained` picks it for `--pretrained auto`.

- `DetectorConfig`: the hyper-parameters, saved in the checkpoint.
- `Detector`: the plain `nn.Module` core, with `predict(frames)` for the live agent.
- `DetectorModule`: the LightningModule (losses, AdamW, val AP).
- `load_detector(path)`: a `Detector` rebuilt from its checkpoint alone.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import numpy as np
import torch
from torch import nn

from playtester.errors import UserError
from playtester.datasets.detection import SPLIT_RULES
from playtester.perception.compact_backbone import BLOCKS, WIDTHS
from playtester.perception.training import read_checkpoint, read_checkpoint_with_notes, tag_checkpoint

log = logging.getLogger(__name__)

BACKBONES = ("resnet50", "mobilenet", "compact")
BACKBONE_STAGES = {"resnet50": 5, "mobilenet": 6, "compact": 4}
SCHEDULES = ("constant", "cosine")


@dataclass
class DetectorConfig:
    """Hyper-parameters of a detector; a checkpoint stores them, so it alone rebuilds the model."""

    classes: list[str] = field(default_factory=list)
    """Class names; label i+1 is `classes[i]` (0 is the background)."""
    backbone: str = "resnet50"
    """`resnet50` (ResNet-50-FPN), `mobilenet` (MobileNet-v3-Large-FPN), both for COCO weights,
    or `compact` (`CompactBackbone`: GroupNorm, two levels, made to train from random init)."""
    pretrained: str = "coco"
    """`coco` (torchvision's COCO weights), `none` (random init) or the path of weights to start
    from (a torchvision COCO state dict, or a playtester detector checkpoint)."""
    pretrained_used: str = ""
    """What the weights actually started from, in words (`--pretrained auto` decides it): report
    headers read it."""
    compact_widths: list[int] = field(default_factory=lambda: list(WIDTHS))
    """`compact`: channels of the stem and of its three stages (strides 2, 4, 8, 16)."""
    compact_blocks: list[int] = field(default_factory=lambda: list(BLOCKS))
    """`compact`: basic blocks in each stage."""
    fpn_channels: int = 32
    """`compact`: channels of its two FPN levels (and of the RPN head)."""
    finest_stride: int = 2
    """`compact`: stride of its finer level, 2 (levels at strides 2 and 4, for objects of a few
    pixels: the park's tires are 2–5 px at 128 px) or 4 (4 and 8)."""
    anchor_sizes: list[list[float]] | None = None
    """`compact`: anchor sides in input pixels, per level (stride 4, stride 8), fitted to the
    training boxes (`fit_anchors`); None: a generic 4–64 px ladder."""
    aspect_ratios: list[float] | None = None
    """`compact`: anchor aspect ratios h/w, fitted like the sizes; None: 1, 2, 4."""
    box_head_units: int = 128
    """`compact`: width of the two-layer box head (torchvision's: 1024)."""
    roi_sampling_ratio: int = 1
    """`compact`: RoIAlign sampling points per bin side (torchvision: 2). RoIAlign's backward pass
    is most of a CPU training step; 1 makes it 4× cheaper."""
    detections_per_image: int = 50
    """Most detections kept per image."""
    rpn_fg_iou: float = 0.7
    """An anchor overlapping a box by this IoU trains the RPN as foreground (torchvision: 0.7;
    small objects match few anchors that well)."""
    image_size: int = 128
    """Frames are scaled (aspect kept) so that they fit in image_size×image_size."""
    anchor_scale: float = 0.25
    """Multiplies torchvision's anchor sizes (32–512 px, made for 800-px images)."""
    trainable_layers: int | None = None
    """Backbone stages trained, counted from the top (torchvision's `trainable_backbone_layers`:
    0 freezes the whole backbone body; resnet50 has 5, mobilenet 6). The FPN, RPN and box head
    always train. None: 0 with pretrained weights (few-shot: heads only), all without."""
    rpn_proposals: int = 100
    """Region proposals kept per image after NMS (twice as many before); game frames hold few
    objects, and torchvision's 1000–2000 made for COCO cost most of the CPU time."""
    rois_per_image: int = 64
    """Proposals sampled per image to train the box head (torchvision: 512)."""
    lr: float = 3e-4
    """AdamW learning rate (the paper's)."""
    schedule: str = "constant"
    """`constant`, or `cosine`: linear warm-up over `warmup_fraction` of the steps, then cosine to 0
    (what from-scratch training wants)."""
    warmup_fraction: float = 0.05
    weight_decay: float = 1e-4
    batch_size: int = 8
    """Images per step (the paper used 128 on a GPU)."""
    score_threshold: float = 0.5
    """`predict` keeps detections at least this confident (evaluation keeps all)."""
    split_seed: int = 0
    """Seed of the split of the shots, so evaluation finds the same held-out images."""
    split: str = "70/10/20"
    """How the training file was split (`detection.detector_splits`): `held-out` (what `train
    detector` does), `none` (every image trained; the held-out shots were another file) or
    `70/10/20` (detectors trained before the adaptive rule; their checkpoints lack this field)."""
    held_out_boxes: int = 15
    """`held-out`: the boxes of every class the held-out images should hold."""

    def __post_init__(self) -> None:
        self.classes = [str(c) for c in self.classes]
        if not self.classes:
            raise UserError("detector: give at least one class (the COCO file's categories)")
        if len(set(self.classes)) != len(self.classes):
            raise UserError(f"detector: class names must differ, got {self.classes}")
        if self.backbone not in BACKBONES:
            raise UserError(f"--backbone {self.backbone!r}: use {', '.join(BACKBONES)}")
        if self.pretrained == "coco" and self.backbone == "compact":
            raise UserError("--pretrained coco: torchvision has no COCO weights for --backbone compact; use none, auto, a weights file or an encoder trained with --trunk compact")
        if self.schedule not in SCHEDULES:
            raise UserError(f"schedule {self.schedule!r}: use {' or '.join(SCHEDULES)}")
        if len(self.compact_widths) != 4 or len(self.compact_blocks) != 3 or min(self.compact_widths + self.compact_blocks) < 1:
            raise UserError(f"compact backbone {self.compact_widths} / {self.compact_blocks}: 4 widths and 3 block counts, all positive")
        if any(w % 8 for w in self.compact_widths + [self.fpn_channels]):
            raise UserError(f"compact backbone widths {self.compact_widths + [self.fpn_channels]}: multiples of 8 (GroupNorm)")
        if self.finest_stride not in (2, 4):
            raise UserError(f"finest stride {self.finest_stride}: 2 or 4")
        if self.anchor_sizes is not None:
            self.anchor_sizes = [[float(v) for v in level] for level in self.anchor_sizes]
            if len(self.anchor_sizes) != 2 or len(set(map(len, self.anchor_sizes))) != 1 or min(map(min, self.anchor_sizes)) <= 0:
                raise UserError(f"anchor sizes {self.anchor_sizes}: two levels of as many positive sizes")
        if self.aspect_ratios is not None:
            self.aspect_ratios = [float(v) for v in self.aspect_ratios]
            if not self.aspect_ratios or min(self.aspect_ratios) <= 0:
                raise UserError(f"aspect ratios {self.aspect_ratios}: positive numbers")
        if not 32 <= self.image_size <= 2048:
            raise UserError(f"--image-size {self.image_size}: use 32 to 2048 pixels")
        if not self.anchor_scale > 0:
            raise UserError(f"anchor scale {self.anchor_scale}: must be positive")
        if self.rpn_proposals < 1 or self.rois_per_image < 1:
            raise UserError(f"rpn proposals {self.rpn_proposals} / rois per image {self.rois_per_image}: at least 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UserError(f"--lr {self.lr}: must be a positive number")
        if self.batch_size < 1:
            raise UserError(f"--batch-size {self.batch_size}: at least 1")
        if self.split not in SPLIT_RULES:
            raise UserError(f"split rule {self.split!r}: one of {', '.join(SPLIT_RULES)}")
        if not 0 <= self.score_threshold <= 1:
            raise UserError(f"score threshold {self.score_threshold}: between 0 and 1")
        most = BACKBONE_STAGES[self.backbone]
        if self.trainable_layers is None:  # the compact body is small and its starts are not COCO's: it all trains
            self.trainable_layers = 0 if self.pretrained != "none" and self.backbone != "compact" else most
        if not 0 <= self.trainable_layers <= most:
            raise UserError(f"--trainable-layers {self.trainable_layers}: {self.backbone} has 0 to {most}")

    @property
    def num_classes(self) -> int:
        """Including the background."""
        return len(self.classes) + 1

    @property
    def frozen_batchnorm(self) -> bool:
        """Pretrained backbones keep their BatchNorm statistics fixed (torchvision's rule); the
        compact one has GroupNorm, which keeps no statistics."""
        return self.pretrained != "none" and self.backbone != "compact"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DetectorConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def _coco_weights(backbone: str):
    from torchvision.models.detection import FasterRCNN_MobileNet_V3_Large_FPN_Weights, FasterRCNN_ResNet50_FPN_Weights

    return FasterRCNN_ResNet50_FPN_Weights.COCO_V1 if backbone == "resnet50" else FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1


def coco_weights_cached(backbone: str) -> Path | None:
    """The file of torchvision's COCO weights for `backbone` in its cache, if it is there."""
    if backbone not in ("resnet50", "mobilenet"):
        return None
    from torch.hub import get_dir

    path = Path(get_dir()) / "checkpoints" / _coco_weights(backbone).url.rsplit("/", 1)[-1]
    return path if path.is_file() else None


def resolve_pretrained(backbone: str, pretrained: str) -> tuple[str, str, str]:
    """`(backbone, pretrained, one line saying what was chosen)` for `--pretrained auto`: the
    COCO weights of `backbone` where torchvision's cache holds them, else the compact backbone
    from random init (the only one that learns from scratch in minutes). Other values pass."""
    if pretrained != "auto":
        return backbone, pretrained, ""
    if backbone != "compact" and coco_weights_cached(backbone) is not None:
        return backbone, "coco", f"--pretrained auto: COCO weights for {backbone} found in torchvision's cache; fine-tuning them"
    if backbone == "compact":
        return "compact", "none", "--pretrained auto: the compact backbone trains from random init"
    return "compact", "none", (f"--pretrained auto: no COCO weights for {backbone} in torchvision's cache; "
                               "training the compact backbone from random init instead")


def _freeze_batchnorm(module: nn.Module) -> nn.Module:
    """Replace every BatchNorm2d below `module` by a FrozenBatchNorm2d (what torchvision does
    for pretrained backbones), so a checkpoint of either kind rebuilds to the same modules."""
    from torchvision.ops import FrozenBatchNorm2d

    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(module, name, FrozenBatchNorm2d(child.num_features, eps=child.eps))
        else:
            _freeze_batchnorm(child)
    return module


def build_compact_faster_rcnn(cfg: DetectorConfig, num_classes: int | None = None) -> nn.Module:
    """torchvision's `FasterRCNN` (RPN, MultiScaleRoIAlign, two-layer box head) on a
    `CompactBackbone`, with the config's anchors."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    from playtester.perception.compact_backbone import CompactBackbone

    backbone = CompactBackbone(cfg.compact_widths, cfg.compact_blocks, cfg.fpn_channels, cfg.finest_stride)
    sizes = cfg.anchor_sizes or [[4.0, 6.0, 10.0], [16.0, 28.0, 48.0]]
    ratios = tuple(cfg.aspect_ratios or [1.0, 2.0, 4.0])
    anchors = AnchorGenerator(tuple(tuple(level) for level in sizes), (ratios,) * len(sizes))
    resolution = 7
    return FasterRCNN(
        backbone, None, min_size=cfg.image_size, max_size=cfg.image_size,
        rpn_anchor_generator=anchors,
        rpn_pre_nms_top_n_train=2 * cfg.rpn_proposals, rpn_pre_nms_top_n_test=cfg.rpn_proposals,
        rpn_post_nms_top_n_train=cfg.rpn_proposals, rpn_post_nms_top_n_test=cfg.rpn_proposals // 2,
        rpn_fg_iou_thresh=cfg.rpn_fg_iou, rpn_batch_size_per_image=128,
        box_roi_pool=MultiScaleRoIAlign(["0", "1"], output_size=resolution, sampling_ratio=cfg.roi_sampling_ratio),
        box_head=TwoMLPHead(cfg.fpn_channels * resolution**2, cfg.box_head_units),
        box_predictor=FastRCNNPredictor(cfg.box_head_units, num_classes or cfg.num_classes),
        box_batch_size_per_image=cfg.rois_per_image, box_detections_per_img=cfg.detections_per_image,
    )


def build_faster_rcnn(cfg: DetectorConfig, num_classes: int | None = None) -> nn.Module:
    """The torchvision model, untrained: architecture only (weights come from `load_pretrained`
    or a checkpoint). `num_classes` overrides the config's (91 to take COCO weights)."""
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn, fasterrcnn_resnet50_fpn
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    if cfg.backbone == "compact":
        return build_compact_faster_rcnn(cfg, num_classes)
    builder = fasterrcnn_resnet50_fpn if cfg.backbone == "resnet50" else fasterrcnn_mobilenet_v3_large_fpn
    model = builder(
        weights=None, weights_backbone=None, num_classes=num_classes or cfg.num_classes,
        min_size=cfg.image_size, max_size=cfg.image_size,
        rpn_pre_nms_top_n_train=2 * cfg.rpn_proposals, rpn_pre_nms_top_n_test=2 * cfg.rpn_proposals,
        rpn_post_nms_top_n_train=cfg.rpn_proposals, rpn_post_nms_top_n_test=cfg.rpn_proposals,
        box_batch_size_per_image=cfg.rois_per_image, box_detections_per_img=cfg.detections_per_image,
    )
    old = model.rpn.anchor_generator
    sizes = tuple(tuple(max(2, int(round(s * cfg.anchor_scale))) for s in level) for level in old.sizes)
    model.rpn.anchor_generator = AnchorGenerator(sizes, old.aspect_ratios)  # same anchors per cell
    if cfg.frozen_batchnorm:
        _freeze_batchnorm(model.backbone)
    return model


class Detector(nn.Module):
    """Faster R-CNN over game frames; `predict` turns uint8 frames into boxes, labels and scores."""

    def __init__(self, config: DetectorConfig) -> None:
        super().__init__()
        self.config = config
        self.model = build_faster_rcnn(config)
        self.set_trainable()

    @property
    def classes(self) -> list[str]:
        return self.config.classes

    def set_trainable(self) -> None:
        """Train the top `trainable_layers` stages of the backbone body, freeze the rest
        (torchvision's rule, which its builders skip without pretrained weights)."""
        body = self.model.backbone.body
        n = self.config.trainable_layers
        children = list(body.named_children())
        if self.config.backbone == "compact":
            parts = [body.stem, *body.stages]
            frozen = parts[:len(parts) - n]
        elif self.config.backbone == "resnet50":
            train = ["layer4", "layer3", "layer2", "layer1", "conv1"][:n] + (["bn1"] if n == 5 else [])
            frozen = [m for name, m in children if name not in train]
        else:
            stages = [0] + [i for i, (_, b) in enumerate(children) if getattr(b, "_is_cn", False)] + [len(children) - 1]
            first_trained = len(children) if n == 0 else stages[len(stages) - n]
            frozen = [m for _, m in children[:first_trained]]
        body.requires_grad_(True)
        for m in frozen:
            m.requires_grad_(False)

    @property
    def frozen_fraction(self) -> float:
        """Share of the backbone body's parameters that do not train."""
        ps = list(self.model.backbone.body.parameters())
        total = sum(p.numel() for p in ps)
        return sum(p.numel() for p in ps if not p.requires_grad) / max(1, total)

    def load_pretrained(self) -> str:
        """Load the starting weights the config names; returns what was loaded, for the log.

        COCO weights come through torchvision's cache (downloaded when the network allows);
        where they cannot be had, a `UserError` says so and names `--pretrained none`.
        """
        cfg = self.config
        if cfg.pretrained == "none":
            return "random init"
        if cfg.pretrained == "coco":
            weights = _coco_weights(cfg.backbone)
            try:
                state = weights.get_state_dict(progress=True, check_hash=True)
            except Exception as e:
                from torch.hub import get_dir

                raise UserError(
                    f"--pretrained coco: the COCO weights for {cfg.backbone} ({weights.url.rsplit('/', 1)[-1]}) are not in "
                    f"torchvision's cache ({get_dir()}/checkpoints) and cannot be downloaded ({type(e).__name__}); "
                    f"copy them there, pass their path to --pretrained, or use --pretrained none"
                ) from None
            self._load_coco_state(state)
            return f"COCO weights ({weights.url.rsplit('/', 1)[-1]})"
        path = Path(cfg.pretrained)
        if not path.is_file():
            raise UserError(f"--pretrained {cfg.pretrained!r}: use coco, none or the path of a weights file (not found)")
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            raise UserError(f"--pretrained {path}: cannot be read as weights ({type(e).__name__})") from None
        if isinstance(raw, dict) and (raw.get("playtester") or {}).get("model") == "encoder":
            return self._load_encoder_body(path)
        if isinstance(raw, dict) and "playtester" in raw:
            old_cfg, state = read_checkpoint(path, "detector")
            if DetectorConfig.from_dict(old_cfg).backbone != cfg.backbone:
                raise UserError(f"--pretrained {path}: a {old_cfg['backbone']} detector, but --backbone is {cfg.backbone}")
            state = {k.removeprefix("model."): v for k, v in state.items()}
            same = old_cfg.get("classes") == cfg.classes
            self._load_coco_state(state, keep_predictor=same)
            return f"detector checkpoint {path}" + ("" if same else " (new box predictor for the new classes)")
        state = raw.get("state_dict", raw) if isinstance(raw, dict) else None
        if not isinstance(state, dict):
            raise UserError(f"--pretrained {path}: not a state dict of a torchvision Faster R-CNN")
        self._load_coco_state(state)
        return f"weights from {path}"

    def _load_encoder_body(self, path: Path) -> str:
        """Domain pretraining: the compact body of an encoder trained by masked inverse dynamics
        on unlabelled play (`train encoder --trunk compact`) starts this detector's body; the FPN
        and heads start from random init, and everything trains."""
        from playtester.perception.encoder import EncoderConfig

        old_cfg, state = read_checkpoint(path, "encoder")
        trunk = EncoderConfig.from_dict(old_cfg).trunk
        if trunk != "compact" or self.config.backbone != "compact":
            raise UserError(f"--pretrained {path}: an encoder starts a detector only when trained with --trunk compact and "
                            f"the detector is --backbone compact (here: trunk {trunk}, backbone {self.config.backbone})")
        body = {k.removeprefix("encoder.trunk.body."): v for k, v in state.items() if k.startswith("encoder.trunk.body.")}
        try:
            self.model.backbone.body.load_state_dict(body)
        except RuntimeError:
            raise UserError(f"--pretrained {path}: its compact body does not fit this detector's "
                            f"(widths {self.config.compact_widths}, blocks {self.config.compact_blocks})") from None
        return f"the compact body of the inverse-dynamics encoder {path}"

    def _load_coco_state(self, state: dict[str, torch.Tensor], keep_predictor: bool = False) -> None:
        """Load everything but the box predictor (whose classes differ) unless `keep_predictor`."""
        if not keep_predictor:
            state = {k: v for k, v in state.items() if not k.startswith("roi_heads.box_predictor.")}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.startswith("roi_heads.box_predictor.") or keep_predictor]
        if missing or unexpected:
            raise UserError(
                f"--pretrained {self.config.pretrained}: the weights do not fit a {self.config.backbone} Faster R-CNN "
                f"({len(missing)} missing, {len(unexpected)} unexpected, e.g. {(missing + unexpected)[0]})"
            )

    def forward(self, images: list[torch.Tensor], targets: list[dict[str, Any]] | None = None):
        """torchvision's contract: losses in train mode (with targets), detections in eval mode."""
        return self.model(images, targets)

    @torch.inference_mode()
    def predict(
        self, frames: np.ndarray | Sequence[np.ndarray], score_threshold: float | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """For each uint8 H×W×3 RGB frame: `(boxes n×4 [x0,y0,x1,y1] pixels, labels n (1…K,
        see `classes`), scores n)`, most confident first, those below the threshold dropped."""
        threshold = self.config.score_threshold if score_threshold is None else score_threshold
        was_training = self.training
        if was_training:  # eval() walks every submodule: a run's detector is in eval mode already
            self.eval()
        device = next(self.parameters()).device
        # read-only frames (a memory-mapped episode, a replay) are copied: torch warns on them
        images = [torch.from_numpy(np.require(f, requirements=["C", "W"])).to(device).permute(2, 0, 1).float().div_(255.0)
                  for f in frames]
        out = self.model(images) if images else []
        if was_training:
            self.train()
        results = []
        for det in out:
            keep = det["scores"] >= threshold
            results.append((
                det["boxes"][keep].cpu().numpy().astype(np.float32),
                det["labels"][keep].cpu().numpy().astype(np.int64),
                det["scores"][keep].cpu().numpy().astype(np.float32),
            ))
        return results


class DetectorModule(L.LightningModule):
    """Trains a `Detector`: summed Faster R-CNN losses, AdamW on the trainable heads, val AP."""

    def __init__(self, **config: Any) -> None:
        super().__init__()
        cfg = DetectorConfig(**config)
        self.save_hyperparameters(asdict(cfg))
        self.config = cfg
        self.model = Detector(cfg)
        self.diverged = False
        self.held_out: dict[str, Any] | None = None
        """AP on the held-out shots, when measured before saving; the checkpoint keeps it."""
        self.val_history: list[tuple[int, float, float]] = []
        """`(step, mAP, mAP50)` of every validation, in order."""
        self._val_map = None

    def training_step(self, batch, batch_idx: int):
        images, targets = batch
        losses = self.model(images, targets)
        loss = sum(losses.values())
        if not torch.isfinite(loss):
            log.error("non-finite detector loss at step %d (%s); stopping: lower --lr", self.global_step,
                      ", ".join(f"{k}={v.item():.3g}" for k, v in losses.items()))
            self.diverged = True
            self.trainer.should_stop = True
            return None
        bs = len(images)
        self.log("train/loss", loss, prog_bar=True, batch_size=bs)
        for k, v in losses.items():
            self.log(f"train/{k}", v, batch_size=bs)
        return loss

    def on_validation_epoch_start(self) -> None:
        from torchmetrics.detection import MeanAveragePrecision

        self._val_map = MeanAveragePrecision(iou_type="bbox").to(self.device)

    def validation_step(self, batch, batch_idx: int) -> None:
        """Crowd boxes (where the targets carry them) are ignored, as in `detector_eval.ap_table`."""
        images, targets = batch
        preds = self.model(images)
        gts = []
        for t in targets:
            boxes, labels = t["boxes"].as_subclass(torch.Tensor), t["labels"]
            crowd = t.get("crowd_boxes", boxes[:0])
            gts.append({"boxes": torch.cat([boxes, crowd.to(boxes)]),
                        "labels": torch.cat([labels, t.get("crowd_labels", labels[:0]).to(labels)]),
                        "iscrowd": torch.cat([torch.zeros(len(boxes)), torch.ones(len(crowd))]).long().to(labels.device)})
        self._val_map.update(preds, gts)

    def on_validation_epoch_end(self) -> None:
        res = self._val_map.compute()
        self.log("val/map", res["map"].float(), prog_bar=True)
        self.log("val/map_50", res["map_50"].float(), prog_bar=True)
        self.val_history.append((int(self.global_step), float(res["map"]), float(res["map_50"])))
        self._val_map = None

    def configure_optimizers(self):
        params = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=self.config.lr, weight_decay=self.config.weight_decay)
        if self.config.schedule == "constant":
            return optimizer
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = max(1, int(self.config.warmup_fraction * total))

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        tag_checkpoint(checkpoint, "detector")
        checkpoint["playtester"]["pretrained_used"] = self.config.pretrained_used
        if self.held_out is not None:
            checkpoint["playtester"]["held_out"] = self.held_out
        checkpoint["playtester"]["val_history"] = [list(h) for h in self.val_history]
        if getattr(self, "thresholds", None):  # per-class score thresholds (perception/calibration.py)
            checkpoint["playtester"]["thresholds"] = self.thresholds


def detector_memory(config: DetectorConfig, batch_size: int, training: bool = True) -> int:
    """Bytes that a detector of this config takes on a batch (`train detector` trains it with
    AdamW, `eval detector` only runs it; checked before either starts): its weights, and the
    activations of its backbone and box head for each image, counted on the meta device."""
    from playtester.perception.training import FLOAT_BYTES, activation_count, on_meta, parameter_count, training_bytes

    model = on_meta(lambda: build_faster_rcnn(config))
    side = config.image_size
    per_image = activation_count(model.backbone, (1, 3, side, side))
    per_image += config.rois_per_image * model.backbone.out_channels * 7 * 7  # the box head's pooled regions
    if training:
        return training_bytes(parameter_count(model), activations=batch_size * per_image)
    return FLOAT_BYTES * (parameter_count(model) + batch_size * per_image)


def load_detector(path: str | Path, map_location: str | torch.device = "cpu") -> Detector:
    """The detector of a checkpoint, in eval mode, rebuilt from the checkpoint alone."""
    return load_detector_with_notes(path, map_location)[0]


def load_detector_with_notes(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[Detector, dict[str, Any]]:
    """`load_detector`'s detector and what its checkpoint notes beside it (its held-out scores and
    per-class thresholds: `read_checkpoint_with_notes`), from one read of the file."""
    config, state, notes = read_checkpoint_with_notes(path, "detector", map_location)
    cfg = DetectorConfig.from_dict(config)
    detector = Detector(cfg)
    missing, unexpected = detector.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise UserError(f"checkpoint {path}: its weights do not fit its own config ({len(missing)} missing, {len(unexpected)} unexpected)")
    # The body and FPN in NHWC memory layout: their convolutions then all take oneDNN's kernels
    # (in NCHW several fall back to im2col); the same boxes to 1e-4 px (docs/benchmarks/detector.md).
    detector.model.backbone.to(memory_format=torch.channels_last)
    return detector.to(map_location).eval(), notes
