"""ConfirmTracker: a detection is confirmed once found in k of the last n passes, near where it
was and of a similar size; hand-worked sequences."""

import pytest

from playtester.perception.candidates import ConfirmConfig, ConfirmTracker


def det(x: float, h: float = 40.0, kind: str = "tire", score: float = 0.9) -> dict:
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
