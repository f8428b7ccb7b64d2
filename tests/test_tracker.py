"""The box tracker: template matching finds a patch where it moved, at its new size, and says
when it is gone."""

import cv2
import numpy as np
import pytest

from playtester.perception.tracker import BoxTracker, TrackerConfig
from playtester.tester.identity import iou


def scene(seed: int, h: int = 240, w: int = 320) -> np.ndarray:
    """A smooth random background (blurred noise), like a level's walls and floor."""
    noise = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return cv2.GaussianBlur(noise, (0, 0), 3)


def stamp(frame: np.ndarray, patch: np.ndarray, x: int, y: int) -> np.ndarray:
    out = frame.copy()
    out[y : y + patch.shape[0], x : x + patch.shape[1]] = patch
    return out


@pytest.fixture
def barrel():
    """A 20×32 object with its own texture (sharp noise: nothing like the background)."""
    return np.random.default_rng(7).integers(0, 256, (32, 20, 3), dtype=np.uint8)


def test_follows_the_object_where_it_moved(barrel):
    tracker = BoxTracker()
    tracker.anchor(stamp(scene(1), barrel, 100, 80), [100, 80, 120, 112])
    # turning moves it sideways by more than its width; walking shifts it a little up or down
    for x, y in [(127, 84), (160, 80), (150, 70), (101, 88)]:
        box = tracker.follow(stamp(scene(1), barrel, x, y))
        assert box == [x, y, x + 20, y + 32]
        assert tracker.score > 0.99


def test_follows_a_closer_object_at_its_new_size(barrel):
    tracker = BoxTracker()
    tracker.anchor(stamp(scene(2), barrel, 100, 80), [100, 80, 120, 112])
    bigger = cv2.resize(barrel, (22, 35), interpolation=cv2.INTER_LINEAR)  # about 1.08 times as large
    box = tracker.follow(stamp(scene(2), bigger, 130, 78))
    assert box is not None and iou(box, [130, 78, 152, 113]) > 0.85
    assert box[2] - box[0] > 20.5, "the box grew with the object"


def test_answers_none_when_the_object_is_gone_and_finds_it_again(barrel):
    tracker = BoxTracker()
    tracker.anchor(stamp(scene(3), barrel, 100, 80), [100, 80, 120, 112])
    assert tracker.follow(scene(3)) is None
    assert tracker.score < TrackerConfig().min_score
    assert tracker.follow(stamp(scene(3), barrel, 110, 82)) == [110, 82, 130, 114], "the patch and last box are kept"


def test_does_not_look_beyond_its_reach(barrel):
    tracker = BoxTracker(TrackerConfig(reach_x=1.0, reach_y=0.5))
    tracker.anchor(stamp(scene(4), barrel, 100, 80), [100, 80, 120, 112])
    # the search window is the box widened by 1 width + 2 px each side: x from 78 to 142
    assert tracker.follow(stamp(scene(4), barrel, 122, 80)) == [122, 80, 142, 112]
    assert tracker.follow(stamp(scene(4), barrel, 200, 80)) is None


def test_nothing_to_follow_without_a_box_or_with_a_tiny_one(barrel):
    frame = stamp(scene(5), barrel, 100, 80)
    tracker = BoxTracker()
    tracker.anchor(frame, None)
    assert tracker.follow(frame) is None and tracker.patch is None
    tracker.anchor(frame, [100, 80, 104, 112])  # 4 px wide: under min_side
    assert tracker.follow(frame) is None and tracker.patch is None
    tracker.anchor(frame, [300, 200, 400, 300])  # partly outside: the part inside is the patch
    assert tracker.patch is not None and tracker.patch.shape == (40, 20)
