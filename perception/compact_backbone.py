"""A small Faster R-CNN backbone that trains from random init on a CPU, and anchors fitted to the shots.

COCO-pretrained ResNet-50/MobileNet bodies need their weights: from scratch they are too big
for minutes of CPU, and their frozen BatchNorm is wrong without them. `CompactBackbone` is a
ResNet-style body of basic blocks with GroupNorm (no batch statistics, so batches of 4–8
images train it as well as large ones), strides 2–16, and a GroupNorm FPN that returns two
levels, stride 4 and 8 or stride 2 and 4: game objects are 2–60 px at a 128-px input, and a
stride-16 or coarser level holds none of them at all.

`fit_anchors` reads the box sizes and aspects of a COCO set (scaled as the model will see them)
and gives anchor sizes per level (equal-count bins of sqrt(area), smallest on the finest level)
and aspect ratios (h/w quantiles); the detector's config stores them, so a checkpoint rebuilds
its own anchors.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np
import torch
from torch import nn

GROUPS = 8
"""GroupNorm groups (every width here is a multiple of 8)."""


def group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(GROUPS, channels), channels)


def conv_gn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), group_norm(cout), nn.ReLU(inplace=True))


class BasicBlock(nn.Module):
    """ResNet's basic block (two 3×3 convs and a shortcut) with GroupNorm."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.gn1 = group_norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.gn2 = group_norm(cout)
        nn.init.zeros_(self.gn2.weight)  # each block starts as the identity (Goyal et al. 2017)
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), group_norm(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.gn1(self.conv1(x)))
        return self.relu(self.gn2(self.conv2(y)) + self.shortcut(x))


WIDTHS = (32, 48, 96, 160)
"""Channels of the stem and the three stages (the detector's default, and the encoder's compact trunk)."""
BLOCKS = (1, 2, 2)
"""Basic blocks in each stage."""


class CompactBody(nn.Module):
    """Stem (stride 2) and three stages of basic blocks (strides 4, 8, 16); returns the stem's
    map and each stage's."""

    def __init__(self, widths: Sequence[int], blocks: Sequence[int]) -> None:
        super().__init__()
        stem, *stages = widths
        self.stem = conv_gn_relu(3, stem, stride=2)
        layers, cin = [], stem
        for cout, n in zip(stages, blocks):
            layers.append(nn.Sequential(BasicBlock(cin, cout, 2), *[BasicBlock(cout, cout) for _ in range(n - 1)]))
            cin = cout
        self.stages = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        out = [x]
        for stage in self.stages:
            x = stage(x)
            out.append(x)
        return out


class CompactBackbone(nn.Module):
    """`CompactBody` + FPN (GroupNorm) → two levels `{"0": finest, "1": twice as coarse}` of
    `out_channels` each: strides 4 and 8, or with `finest_stride=2` strides 2 and 4 (for objects
    of 2–5 px, which a stride-4 map holds in less than one cell: the stride-2 level takes the stem's
    edges and the deeper stages' meaning from the FPN's top-down path).

    The coarser stages only feed context down the FPN; the RPN and RoIAlign see two levels."""

    def __init__(self, widths: Sequence[int] = WIDTHS, blocks: Sequence[int] = BLOCKS, out_channels: int = 64,
                 finest_stride: int = 4) -> None:
        super().__init__()
        from torchvision.ops import FeaturePyramidNetwork

        if len(widths) != 4 or len(blocks) != 3:
            raise ValueError("compact backbone: 4 widths (stem + 3 stages) and 3 block counts")
        if finest_stride not in (2, 4):
            raise ValueError(f"compact backbone: finest stride {finest_stride}: 2 or 4")
        self.body = CompactBody(widths, blocks)
        self.first = 0 if finest_stride == 2 else 1  # the stem's map feeds the FPN only for stride 2
        self.fpn = FeaturePyramidNetwork(list(widths[self.first:]), out_channels, norm_layer=group_norm)
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> "OrderedDict[str, torch.Tensor]":
        maps = self.body(x)[self.first:]
        feats = self.fpn(OrderedDict((str(i), f) for i, f in enumerate(maps)))
        return OrderedDict((k, feats[k]) for k in ("0", "1"))


def box_scales(image_wh: np.ndarray, image_size: int) -> np.ndarray:
    """The factor torchvision's transform (min_size = max_size = image_size) scales each image
    (`n×2` width, height) by: its longer side becomes image_size."""
    image_wh = np.asarray(image_wh, np.float64).reshape(-1, 2)
    return image_size / np.maximum(image_wh[:, 0], image_wh[:, 1])


def fit_anchors(boxes_wh: np.ndarray, scales: np.ndarray, *, sizes_per_level: int = 3, levels: int = 2,
                ratios: int = 3) -> tuple[list[list[float]], list[float]]:
    """Anchor sizes per level and aspect ratios (h/w) fitted to boxes (`n×2` width, height in
    source pixels, each multiplied by its `scales` entry).

    Sizes: the medians of `levels × sizes_per_level` equal-count bins of sqrt(area) (the
    quantiles at (2i+1)/(2k)), the smallest `sizes_per_level` on the finest level. Ratios: the
    quantiles of h/w at (2j+1)/(2·ratios). Every value is rounded to 2 decimals."""
    boxes_wh = np.asarray(boxes_wh, np.float64).reshape(-1, 2)
    if len(boxes_wh) == 0:
        raise ValueError("fit_anchors: no boxes")
    side = np.sqrt(boxes_wh[:, 0] * boxes_wh[:, 1]) * np.asarray(scales, np.float64)
    aspect = boxes_wh[:, 1] / boxes_wh[:, 0]
    k = levels * sizes_per_level
    sizes = np.quantile(side, [(2 * i + 1) / (2 * k) for i in range(k)])
    sizes = np.maximum.accumulate(np.maximum(sizes, 1.0))
    for i in range(1, k):  # anchors of one size twice would be wasted: keep them apart by 5 %
        sizes[i] = max(sizes[i], sizes[i - 1] * 1.05)
    aspects = np.quantile(aspect, [(2 * j + 1) / (2 * ratios) for j in range(ratios)])
    per_level = [[round(float(s), 2) for s in sizes[lv * sizes_per_level:(lv + 1) * sizes_per_level]] for lv in range(levels)]
    return per_level, [round(float(a), 2) for a in aspects]


def anchors_for_coco(coco, image_size: int) -> tuple[list[list[float]], list[float]]:
    """`fit_anchors` on every box of a `CocoSet`, each scaled as its image will be."""
    wh, scales = [], []
    for im in coco.images:
        if len(im.boxes):
            wh.append(np.stack([im.boxes[:, 2] - im.boxes[:, 0], im.boxes[:, 3] - im.boxes[:, 1]], 1))
            scales.append(np.repeat(box_scales(np.array([[im.width, im.height]]), image_size), len(im.boxes)))
    if not wh:
        raise ValueError("anchors_for_coco: the set has no boxes")
    return fit_anchors(np.concatenate(wh), np.concatenate(scales))
