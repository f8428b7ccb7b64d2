"""ConfirmTracker: a detection is confirmed once found in k of the last n passes, near where it
was and of a similar size; hand-worked sequences. texel_size and close_surface on drawn textures."""

import numpy as np
import pytest

from playtester.perception.candidates import ConfirmConfig, ConfirmTracker, close_surface, texel_size, view_shift


def det(x: float, h: float = 40.0, kind: str = "tire", score: float = 0.8) -> dict:
    """A detection under the sure score (0.9): it needs every hit of its k."""
    return {"box": [x, 100.0, x + 30.0, 100.0 + h], "class": kind, "score": score}


def test_found_in_every_pass_it_is_confirmed_at_the_kth():
    tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3))
    for i, x in enumerate((100, 110, 120)):  # moves 10 px a pass: a quarter of its height
        found = tracker.update([det(x)])
        assert len(found) == 1 and found[0].found == i + 1
        assert found[0].confirmed == (i == 2)
    assert len(tracker.candidates) == 1  # one object followed, not three


def test_a_miss_ends_a_candidate_that_needs_every_pass():
    tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3))
    tracker.update([det(100)])
    tracker.update([det(100)])
    assert tracker.update([]) == []
    ended = tracker.take_ended()
    assert len(ended) == 1 and not ended[0].confirmed and ended[0].found == 2 and ended[0].passes == 3
    assert tracker.candidates == []


def test_two_of_three_bridges_one_miss():
    tracker = ConfirmTracker(ConfirmConfig(hits=2, window=3))
    tracker.update([det(100)])
    tracker.update([])  # one miss: 3 - 2 + 1 = 2 misses in a row would end it
    found = tracker.update([det(105)])
    assert len(found) == 1 and found[0].confirmed and found[0].found == 2


def test_a_sure_candidate_needs_one_hit_fewer():
    """Every box at 0.9 or above: confirmed at the second of three passes; one box under it and the
    third is needed; with `sure` None never sooner."""
    tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3))
    tracker.update([det(100, score=0.95)])
    assert tracker.update([det(105, score=0.9)])[0].confirmed
    tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3))
    tracker.update([det(100, score=0.95)])
    found = tracker.update([det(105, score=0.89)])
    assert not found[0].confirmed and tracker.needed(found[0]) == 3
    assert tracker.update([det(110, score=0.99)])[0].confirmed
    tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3, sure=None))
    tracker.update([det(100, score=0.99)])
    assert not tracker.update([det(105, score=0.99)])[0].confirmed


def test_a_sure_candidate_outlives_one_miss_in_four_of_four():
    """4 of 4: a miss ends a candidate that needs every pass; one whose boxes all scored 0.9 or
    above needs 3, so it lives through one miss and is confirmed at its third hit. Its sure hits
    leave the window with time: a box under 0.9 counts as long as it is among the last four passes."""
    for score, confirmed in ((0.97, True), (0.8, False)):
        tracker = ConfirmTracker(ConfirmConfig(hits=4, window=4))
        tracker.update([det(100, score=score)])
        tracker.update([det(100, score=score)])
        tracker.update([])
        assert len(tracker.candidates) == int(confirmed)
        found = tracker.update([det(100, score=score)])
        assert [c.confirmed for c in found] == [confirmed]
    tracker = ConfirmTracker(ConfirmConfig(hits=4, window=4))
    tracker.update([det(100, score=0.5)])
    for _ in range(3):
        found = tracker.update([det(100, score=0.95)])
    assert tracker.needed(found[0]) == 4 and found[0].confirmed  # 4 hits all the same


def test_a_jump_a_resize_or_another_class_is_another_candidate():
    for moved in (det(200), det(100, h=80), det(100, kind="chair")):  # 100 px = 2.5 heights; twice as tall; class
        tracker = ConfirmTracker(ConfirmConfig(hits=2, window=2))
        tracker.update([det(100)])
        found = tracker.update([moved])
        assert len(found) == 1 and not found[0].confirmed and found[0].found == 1
        assert len(tracker.take_ended()) == 1  # the first one ended with its miss


def test_each_detection_follows_its_nearest_candidate():
    tracker = ConfirmTracker(ConfirmConfig(hits=2, window=2))
    a, b = tracker.update([det(100), det(160)])
    found = tracker.update([det(150), det(95)])  # listed the other way round, each moved a little
    assert {c.id for c in found} == {a.id, b.id}
    assert next(c for c in found if c.id == a.id).box[0] == 95 and all(c.confirmed for c in found)


def scene(width: int = 320, height: int = 240, seed: int = 0) -> np.ndarray:
    """A textured RGB picture (blurred noise: structure at several scales, as a game's walls have)."""
    import cv2

    noise = np.random.default_rng(seed).integers(0, 256, (height * 2, width * 2, 3)).astype(np.uint8)
    return cv2.GaussianBlur(noise, (0, 0), 3)


def moved(picture: np.ndarray, dx: int, dy: int, width: int = 320, height: int = 240) -> np.ndarray:
    """The window of `picture` a view `dx` right and `dy` down of the first one sees: the picture
    in it moves by (-dx, -dy)."""
    x0, y0 = width // 2 + dx, height // 2 + dy
    return np.ascontiguousarray(picture[y0:y0 + height, x0:x0 + width])


@pytest.mark.parametrize("width, height", [(320, 240), (640, 480)])  # 640 is shrunk to 320 before measuring
def test_view_shift_measures_how_far_the_picture_moved(width, height):
    picture = scene(width, height)
    before = moved(picture, 0, 0, width, height)
    for dx, dy in ((0, 0), (-21, 0), (0, 40), (13, -38)):  # a turn, a look down, a jump and a turn
        sx, sy = view_shift(before, moved(picture, dx, dy, width, height))
        assert abs(sx + dx) <= 1.0 and abs(sy + dy) <= 1.0, (dx, dy, sx, sy)
    assert view_shift(before, before[:100]) is None  # frames of different sizes


def test_a_box_carried_by_the_views_shift_stays_one_candidate():
    """A 30 px object whose picture moves 40 px up a pass (a look down): followed as one object
    and confirmed when the tracker sees the frames, a new candidate every pass when it does not."""
    picture = scene()
    for with_frames in (True, False):
        tracker = ConfirmTracker(ConfirmConfig(hits=3, window=3))
        for i in range(3):
            frame = moved(picture, 0, 40 * i)
            box = [150.0, 150.0 - 40 * i, 170.0, 180.0 - 40 * i]
            found = tracker.update([{"box": box, "class": "tire", "score": 0.8}], frame=frame if with_frames else None)
        assert found[0].confirmed == with_frames and found[0].found == (3 if with_frames else 1)
    tracker.reset()  # a new episode: no shift is measured against the last episode's frame
    assert tracker.update([det(100)], frame=picture[:240, :320])[0].found == 1


def test_hits_of_one_confirms_every_detection():
    tracker = ConfirmTracker(ConfirmConfig(hits=1, window=1))
    assert tracker.update([det(100)])[0].confirmed


def test_reset_ends_everything_followed():
    tracker = ConfirmTracker()
    tracker.update([det(100), det(200)])
    assert len(tracker.reset()) == 2 and tracker.candidates == []


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        ConfirmConfig(hits=3, window=2)
    with pytest.raises(ValueError):
        ConfirmConfig(hits=0, window=2)
    with pytest.raises(ValueError):
        ConfirmConfig(sure=1.5)


def texture(texel: int, width: int = 320, height: int = 240) -> np.ndarray:
    """A texture drawn with square texels of `texel` pixels (nearest texel, as Doom draws it): texel
    (i, j) is grey 50 × ((i + j) mod 3), so neighbouring texels always differ, by 50 or 100."""
    j, i = np.indices((height, width)) // texel
    grey = (50 * ((i + j) % 3)).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def test_texel_size_of_drawn_textures():
    """A box with one box width beside it: 96 × 96 pixels from (64, 64). At texel 8 (the frame's
    1/40, `far`) a pair of pixels 8 apart always spans one texel edge and a pair of neighbours
    does at 11 of the 95 places a row (or column): ratio 95/11 = 8.6, capped at 8. At texel 4 every
    pair 8 apart differs (two texels on, never the same grey) with the same mean as a neighbour pair
    across an edge, which 23 of 95 neighbour pairs are: 95/23 = 4.13."""
    box = [96, 64, 128, 160]
    assert texel_size(texture(8), box) == 8
    assert texel_size(texture(4), box) == pytest.approx(95 / 23, abs=1e-4)
    assert texel_size(texture(1), box) < 1.5


def test_a_close_surface_has_texels_of_a_80th_of_the_frame_or_more():
    """At 320 px wide the bar is 4 px: texel 6 is a wall at arm's length, texel 3 is not; at 160 px
    wide (`far` 4) the same texel 3 is. A flat region or a box too thin for `far` is not judged."""
    box = [96, 64, 128, 160]
    assert close_surface(texture(6), box)
    assert not close_surface(texture(3), box)
    assert close_surface(texture(3, width=160, height=120), [40, 30, 60, 90])
    flat = np.full((240, 320, 3), 90, dtype=np.uint8)
    assert texel_size(flat, box) is None and not close_surface(flat, box)
    assert texel_size(texture(8), [100, 100, 130, 106]) is None, "6 rows: too few for pixels 8 apart"
