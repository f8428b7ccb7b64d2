"""The OD mask (PPGTA §IV-A): a frame in grayscale except inside the box of the object under test.

It tells the encoders which object matters while keeping the scene around it, so features stay
on the player's own motion and the OOI, not on the colours of the background.

Boxes are `[x0, y0, x1, y1]` in pixels, end-exclusive (the `info["objects"]` convention): the
pixels kept in colour are columns `x0 … x1-1` and rows `y0 … y1-1`. Fractional boxes (a detector's)
are widened to whole pixels (`floor` of the start, `ceil` of the end). A box may lie partly or
wholly outside the frame (only what is inside counts); `None` means no object: the whole frame is
grayscale.

Grayscale is ITU-R BT.601 luma, `Y = 0.299 R + 0.587 G + 0.114 B`, put in all three channels. The
uint8 forms round it exactly in integers, `(299 R + 587 G + 114 B + 500) // 1000`; the float
(torch) form leaves it unrounded.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from playtester.capture.frames import grayscale, pixel_box

Box = Sequence[float]


def od_mask(frame: np.ndarray, box: Box | None) -> np.ndarray:
    """One uint8 H×W×3 frame, grayscale outside `box`, unchanged inside; a new array."""
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"od_mask: frame of shape {frame.shape}, expected H×W×3")
    h, w = frame.shape[:2]
    out = np.repeat(grayscale(frame)[..., None], 3, axis=2)
    x0, y0, x1, y1 = pixel_box(box, w, h)
    out[y0:y1, x0:x1] = frame[y0:y1, x0:x1]
    return out


def boxes_array(boxes: Sequence[Box | None] | np.ndarray, n: int) -> np.ndarray:
    """`n` boxes as a float64 n×4 array, NaN rows for None."""
    if isinstance(boxes, np.ndarray):
        arr = boxes.astype(np.float64, copy=False).reshape(-1, 4)
    else:
        arr = np.array([[np.nan] * 4 if b is None else [float(v) for v in b] for b in boxes], dtype=np.float64).reshape(-1, 4)
    if len(arr) != n:
        raise ValueError(f"od_mask_batch: {n} frames but {len(arr)} boxes")
    return arr


def _inside(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """N×H×W booleans: which pixels lie in each frame's box (NaN box → none)."""
    valid = np.isfinite(boxes).all(axis=1)
    b = np.where(valid[:, None], boxes, 0.0)
    x0, y0 = np.floor(b[:, 0]), np.floor(b[:, 1])
    x1, y1 = np.ceil(b[:, 2]), np.ceil(b[:, 3])
    xs = np.arange(width)[None, :]
    ys = np.arange(height)[None, :]
    in_x = (xs >= x0[:, None]) & (xs < x1[:, None]) & valid[:, None]
    in_y = (ys >= y0[:, None]) & (ys < y1[:, None])
    return in_y[:, :, None] & in_x[:, None, :]


def od_mask_batch(frames: np.ndarray, boxes: Sequence[Box | None] | np.ndarray) -> np.ndarray:
    """uint8 N×H×W×3 frames, each masked around its own box (None or a NaN row: no object)."""
    if frames.ndim != 4 or frames.shape[3] != 3:
        raise ValueError(f"od_mask_batch: frames of shape {frames.shape}, expected N×H×W×3")
    n, h, w = frames.shape[:3]
    inside = _inside(boxes_array(boxes, n), h, w)
    gray = grayscale(frames)[..., None]
    return np.where(inside[..., None], frames, gray)


def od_mask_torch(frames, boxes):
    """Torch form: float B×3×H×W frames (any range) and a B×4 tensor of boxes (NaN row: none).

    Runs on the frames' device, keeps gradients and dtype; luma is not rounded.
    """
    import torch

    if frames.ndim != 4 or frames.shape[1] != 3:
        raise ValueError(f"od_mask_torch: frames of shape {tuple(frames.shape)}, expected B×3×H×W")
    boxes = torch.as_tensor(boxes, dtype=torch.float64, device=frames.device).reshape(-1, 4)
    if len(boxes) != len(frames):
        raise ValueError(f"od_mask_torch: {len(frames)} frames but {len(boxes)} boxes")
    _, _, h, w = frames.shape
    valid = torch.isfinite(boxes).all(dim=1)
    b = torch.where(valid[:, None], boxes, torch.zeros_like(boxes))
    x0, y0 = torch.floor(b[:, 0]), torch.floor(b[:, 1])
    x1, y1 = torch.ceil(b[:, 2]), torch.ceil(b[:, 3])
    xs = torch.arange(w, device=frames.device, dtype=torch.float64)[None, :]
    ys = torch.arange(h, device=frames.device, dtype=torch.float64)[None, :]
    in_x = (xs >= x0[:, None]) & (xs < x1[:, None]) & valid[:, None]
    in_y = (ys >= y0[:, None]) & (ys < y1[:, None])
    inside = (in_y[:, :, None] & in_x[:, None, :])[:, None]  # B×1×H×W
    weights = torch.tensor([0.299, 0.587, 0.114], device=frames.device, dtype=frames.dtype).view(1, 3, 1, 1)
    gray = (frames * weights).sum(dim=1, keepdim=True)
    return torch.where(inside, frames, gray.expand_as(frames))
