"""`od_mask`: exact pixels inside and outside the box, at the edges, and for boxes off the frame."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from playtester.perception.od_mask import grayscale, od_mask, od_mask_batch, od_mask_torch, pixel_box


def _frame(h: int = 6, w: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_grayscale_hand_worked_values():
    px = np.array([[[10, 200, 30], [255, 0, 0], [0, 0, 255], [1, 1, 1], [255, 255, 255], [0, 255, 0]]], dtype=np.uint8)
    # 0.299·10 + 0.587·200 + 0.114·30 = 123.81 → 124; pure red 76.245 → 76; blue 29.07 → 29;
    # green 149.685 → 150.
    assert grayscale(px).tolist() == [[124, 76, 29, 1, 255, 150]]


def test_inside_is_the_frame_and_outside_is_gray_exactly():
    frame = _frame()
    out = od_mask(frame, [2, 1, 5, 4])
    gray = grayscale(frame)
    inside = np.zeros(frame.shape[:2], bool)
    inside[1:4, 2:5] = True  # end-exclusive: columns 2,3,4 and rows 1,2,3
    assert np.array_equal(out[inside], frame[inside])
    for c in range(3):
        assert np.array_equal(out[..., c][~inside], gray[~inside])
    assert out.dtype == np.uint8 and out.shape == frame.shape
    # the edges: the last column/row inside is colour, the first past the end is gray
    assert np.array_equal(out[1, 4], frame[1, 4]) and np.array_equal(out[1, 5], [gray[1, 5]] * 3)
    assert np.array_equal(out[3, 2], frame[3, 2]) and np.array_equal(out[4, 2], [gray[4, 2]] * 3)
    assert np.array_equal(out[0, 2], [gray[0, 2]] * 3) and np.array_equal(out[1, 1], [gray[1, 1]] * 3)


def test_the_input_frame_is_not_changed():
    frame = _frame()
    before = frame.copy()
    od_mask(frame, [0, 0, 3, 3])
    assert np.array_equal(frame, before)


def test_box_partly_outside_and_wholly_outside_and_none():
    frame = _frame()
    gray3 = np.repeat(grayscale(frame)[..., None], 3, axis=2)
    out = od_mask(frame, [-3, 4, 2, 99])  # left and bottom edges off the frame
    expected = gray3.copy()
    expected[4:6, 0:2] = frame[4:6, 0:2]
    assert np.array_equal(out, expected)
    assert np.array_equal(od_mask(frame, [20, 20, 30, 30]), gray3)
    assert np.array_equal(od_mask(frame, [5, 2, 5, 4]), gray3)  # zero width
    assert np.array_equal(od_mask(frame, None), gray3)
    assert np.array_equal(od_mask(frame, [-10, -10, 100, 100]), frame)


def test_fractional_boxes_widen_to_whole_pixels():
    assert pixel_box([1.2, 0.9, 3.1, 2.0], 8, 6) == (1, 0, 4, 2)
    frame = _frame()
    assert np.array_equal(od_mask(frame, [1.2, 0.9, 3.1, 2.0]), od_mask(frame, [1, 0, 4, 2]))


def test_batch_matches_one_at_a_time():
    frames = np.stack([_frame(seed=s) for s in range(5)])
    boxes = [[2, 1, 5, 4], None, [-3, 4, 2, 99], [0, 0, 8, 6], [7.5, 5.5, 9, 9]]
    out = od_mask_batch(frames, boxes)
    for i in range(5):
        assert np.array_equal(out[i], od_mask(frames[i], boxes[i])), i
    arr = np.array([[2, 1, 5, 4], [np.nan] * 4, [-3, 4, 2, 99], [0, 0, 8, 6], [7.5, 5.5, 9, 9]])
    assert np.array_equal(od_mask_batch(frames, arr), out)
    with pytest.raises(ValueError, match="5 frames but 2 boxes"):
        od_mask_batch(frames, boxes[:2])


def test_torch_form_matches_numpy_up_to_rounding():
    frames = np.stack([_frame(seed=s) for s in range(3)])
    boxes = [[2, 1, 5, 4], None, [-3, 4, 2, 99]]
    ref = od_mask_batch(frames, boxes).astype(np.float32)
    t = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
    box_t = torch.tensor([[2, 1, 5, 4], [float("nan")] * 4, [-3, 4, 2, 99]])
    out = od_mask_torch(t, box_t).permute(0, 2, 3, 1).numpy()
    assert np.abs(out - ref).max() <= 0.5  # numpy rounds luma, torch does not
    src = t.permute(0, 2, 3, 1).numpy()
    assert np.array_equal(out[0, 1:4, 2:5], src[0, 1:4, 2:5])  # inside: the exact input floats
    y = 0.299 * src[1, ..., 0] + 0.587 * src[1, ..., 1] + 0.114 * src[1, ..., 2]
    assert np.allclose(out[1], y[..., None].repeat(3, axis=2), atol=1e-4)
