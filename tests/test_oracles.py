"""Oracles: stuck, crash, assertions, and the texture oracle's precision and recall on the park."""

import numpy as np
import pytest

from playtester.errors import UserError
from playtester.capture.experts import Inspector, inspect_start, ooi_on_screen
from playtester.bugs.oracles import AssertionOracle, CrashOracle, StuckOracle, TextureOracle, crop_measures, load_assertion


def test_stuck_fires_on_a_frozen_game_and_not_on_a_moving_one(park_env):
    layout = park_env.scenario.layout
    start = next(s for s in layout.starts if s.on_path)
    frame, info = park_env.reset(seed=0, options={"start": (start.x, start.y, 0.0)})
    moving = StuckOracle(patience=5)
    fired = []
    for t in range(30):
        action = park_env.keymap.index("turn_left")
        frame, _, _, _, info = park_env.step(action)
        fired += moving.observe(frame, info, action, 0, t)
    assert fired == []
    frozen = StuckOracle(patience=5)
    fired = []
    for t in range(12):  # the game stopped drawing: the same frame comes back whatever is pressed
        fired += frozen.observe(frame.copy(), info, 0, 0, t)
    assert len(fired) == 1 and fired[0].kind == "stuck" and fired[0].step == 5
    # no input sent: a still picture is not "stuck"
    idle = StuckOracle(patience=3)
    assert sum((idle.observe(frame, info, None, 0, t) for t in range(10)), []) == []


def test_a_small_sprite_moving_under_the_keys_is_not_stuck():
    """A 2D game's paddle (60×10 of a 640×480 screen) moved 5 pixels a step changes the frame's
    mean by about 0.05: the picture changed all the same. With the paddle held still it is stuck."""
    oracle = StuckOracle(patience=5)
    fired = []
    for t in range(30):
        frame = np.zeros((480, 640, 3), np.uint8)
        x = 100 + 5 * (t % 20)
        frame[440:450, x:x + 60] = 255
        assert np.abs(frame.astype(int) - np.roll(frame, -5, axis=1).astype(int)).mean() < 0.1
        fired += oracle.observe(frame, {}, 1, 0, t)
    assert fired == []
    fired = sum((oracle.observe(frame, {}, 1, 0, t) for t in range(30, 40)), [])
    assert [(f.kind, f.step) for f in fired] == [("stuck", 34)]


def test_crash_oracle_reads_the_signal():
    oracle = CrashOracle()
    assert oracle.observe(np.zeros((4, 4, 3), np.uint8), {}, 0, 0, 1) == []
    [f] = oracle.observe(np.zeros((4, 4, 3), np.uint8), {"crashed": True, "crash_reason": "process 42 exited"}, 0, 2, 7)
    assert (f.kind, f.episode, f.step, f.message) == ("crash", 2, 7, "process 42 exited")


def test_assertions_from_a_file(tmp_path):
    path = tmp_path / "checks.py"
    path.write_text(
        "def not_black(frame, info):\n    return bool(frame.max() > 0) or 'the screen is black'\n"
        "def boom(frame, info):\n    raise KeyError('health')\n"
    )
    oracle = AssertionOracle([load_assertion(f"{path}:not_black"), load_assertion(f"{path}:boom")])
    found = oracle.observe(np.zeros((4, 4, 3), np.uint8), {}, 0, 0, 3)
    assert [f.message for f in found] == ["the screen is black", f"{path}:boom raised KeyError: 'health'"]
    assert len(oracle.observe(np.full((4, 4, 3), 9, np.uint8), {}, 0, 0, 4)) == 1
    with pytest.raises(UserError, match="no function 'nope'"):
        load_assertion(f"{path}:nope")
    with pytest.raises(UserError, match="module:function"):
        load_assertion("justaname")


def test_crop_measures_hand_worked():
    frame = np.zeros((100, 100, 3), np.uint8)
    # a 40×20 box whose inside alternates colour every 2 columns: runs of 2 pixels
    box = (10, 10, 30, 50)
    stripes = (np.arange(20) // 2 % 2 * 200).astype(np.uint8)
    frame[10:50, 10:30] = stripes[None, :, None]
    m = crop_measures(frame, box)
    assert m["aspect"] == pytest.approx(2.0)
    assert m["texel"] == pytest.approx(2.0 / 20)
    assert crop_measures(frame, (0, 10, 20, 50)) is None  # cut by the frame edge
    assert crop_measures(frame, (10, 3, 30, 50)) is None  # 3 px from it: a detector's box of a cut object
    assert crop_measures(frame, (10, 5, 30, 50))["aspect"] == pytest.approx(45 / 20)  # 5 px (4 % of 100 is 4): whole
    assert crop_measures(frame, (10, 10, 20, 20)) is None  # too small


@pytest.mark.slow
def test_texture_oracle_precision_and_recall_on_the_park(tmp_path, park_env):
    """Calibrate on shots of another park, then judge every reachable OOI of the test park from
    the crops an inspection collects; compare with the park's known bugs."""
    from playtester.commands.scenario import _shots_from_game

    labels, _ = _shots_from_game("doom:park:2:24x24", tmp_path / "ref", 120, 10, 0, "320x240", None)
    oracle = TextureOracle.from_coco(labels)
    layout = park_env.scenario.layout
    truth, said = [], []
    for k, ooi in enumerate(o for o in layout.oois if o.reachable):
        rng = np.random.default_rng(k)
        frame, info = park_env.reset(seed=k, options={"start": inspect_start(layout, ooi, rng)})
        expert = Inspector(layout, park_env.keymap, rng, ooi)
        expert.reset(info)
        crops = []
        for _ in range(300):
            seen = ooi_on_screen(info, ooi.id)
            if seen:
                crops.append((frame, seen["box"]))
            frame, _, _, _, info = park_env.step(expert.act(info))
            if expert.done:
                break
        verdict = oracle.judge(ooi.kind, crops)
        assert verdict is not None, f"OOI {ooi.id}: too few usable crops"
        truth.append(ooi.bug)
        said.append(verdict.bug)
    pairs = list(zip(truth, said))
    for bug in ("stretched", "lowres"):
        tp = sum(t == bug and s == bug for t, s in pairs)
        fp = sum(t != bug and s == bug for t, s in pairs)
        fn = sum(t == bug and s != bug for t, s in pairs)
        assert tp + fn > 0
        precision = tp / max(1, tp + fp)
        recall = tp / (tp + fn)
        assert precision >= 0.8 and recall >= 0.8, f"{bug}: precision {precision:.2f} recall {recall:.2f} ({pairs})"


def _sky_grass_sprite(sprite: tuple[int, int, int, int]) -> np.ndarray:
    """160×120: a sky (rows 0–59) over grass, and a light grey sprite at `sprite` (x0, y0, x1, y1)."""
    frame = np.zeros((120, 160, 3), np.uint8)
    frame[:60] = (20, 40, 60)
    frame[60:] = (40, 90, 40)
    x0, y0, x1, y1 = sprite
    frame[y0:y1, x0:x1] = 200
    return frame


def test_the_sprites_own_shape_counts_where_it_runs_past_its_box():
    """A 20×60 sprite (aspect 3). Its exact box measures 3. A detector's box regressed to 16×40
    (aspect 2.5) is widened by 30 % to x 67–93, y 28–92, where the sprite stands clear of the
    background columns: its silhouette is 20×60, more than 1.1 times the box, so the aspect is 3
    again. The same sprite reaching the top of the frame, under a box 5 px short of it, is cut."""
    from playtester.bugs.oracles import silhouette

    frame = _sky_grass_sprite((70, 30, 90, 90))
    assert crop_measures(frame, (70, 30, 90, 90))["aspect"] == pytest.approx(3.0)
    assert silhouette(frame, (72, 40, 88, 80)) == (70, 30, 90, 90)
    assert crop_measures(frame, (72, 40, 88, 80))["aspect"] == pytest.approx(3.0)
    cut = _sky_grass_sprite((70, 0, 90, 60))
    assert silhouette(cut, (70, 5, 90, 60)) == "cut" and crop_measures(cut, (70, 5, 90, 60)) is None
    assert silhouette(np.full((120, 160, 3), 90, np.uint8), (70, 30, 90, 90)) is None  # nothing to tell apart
