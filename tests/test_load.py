"""Load testing maths: the threshold and its quartile shift, the low-FPS rule, the statistics."""

from __future__ import annotations

import json
import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from playtester.errors import UserError
from playtester.load.reward import FrameTimeStats, LoadThreshold
from playtester.load.stats import cliffs_delta, compare_agents, holm, magnitude, spearman_reliability
from playtester.load.lowfps import VisitLog, confidence_summary, is_low_fps, low_fps_points


def test_threshold_is_mean_plus_five_sample_sd():
    t = LoadThreshold.from_baseline([1, 2, 3, 4, 5])
    # mean 3, sd with n − 1 = sqrt(10 / 4) = 1.58114
    assert t.baseline.mean == pytest.approx(3.0)
    assert t.baseline.sd == pytest.approx(math.sqrt(2.5))
    assert t.base == pytest.approx(3 + 5 * math.sqrt(2.5))
    assert t.value == pytest.approx(10.905694, abs=1e-6)
    assert (t.baseline.q1, t.baseline.q3) == (2.0, 4.0)


def test_quartile_shift_takes_the_larger_difference():
    base = LoadThreshold.from_baseline([1, 2, 3, 4, 5])  # Q1 2, Q3 4
    # Q3 wins: training Q1 3 (+1), Q3 6 (+2)
    t = base.shifted([2, 3, 5, 6, 9])
    assert t.shift == pytest.approx(2.0)
    assert t.value == pytest.approx(12.905694, abs=1e-6)
    # Q1 wins: training Q1 5 (+3), Q3 6 (+2)
    assert base.shifted([5, 5, 5, 6, 6]).shift == pytest.approx(3.0)
    # a lighter load lowers it, as the formula says
    assert base.shifted([0, 1, 2, 3, 4]).shift == pytest.approx(-1.0)
    assert t.base == base.base and t.training.q3 == 6.0


def test_threshold_round_trip_and_bad_files(tmp_path):
    t = LoadThreshold.from_baseline([1.0, 1.5, 2.0, 8.0]).shifted([2.0, 2.5, 3.0])
    path = t.save(tmp_path / "threshold.json")
    assert LoadThreshold.load(path) == t
    (tmp_path / "bad.json").write_text("{\"base\": 1}")
    with pytest.raises(UserError, match="bad.json: malformed"):
        LoadThreshold.load(tmp_path / "bad.json")
    with pytest.raises(UserError, match="at least 2"):
        FrameTimeStats.of([3.0])
    for base, shift in ((-3.0, 0.0), (2.0, -5.0), (float("nan"), 0.0)):
        (tmp_path / "odd.json").write_text(json.dumps(LoadThreshold(base, t.baseline, shift).to_dict()))
        with pytest.raises(UserError, match=r"odd.json: t = .* ms is no frame time; a threshold is a positive number"):
            LoadThreshold.load(tmp_path / "odd.json")


def test_low_fps_rule_needs_more_than_half_of_the_visits():
    log = VisitLog(cell=100.0)
    visits = {
        (50, 50): [10, 12, 3],    # 2 of 3 over: low, confidence 2/3
        (150, 50): [10, 3],       # exactly half: not low
        (250, 50): [6],           # 1 of 1: low, confidence 1
        (350, 50): [1, 2, 7, 1],  # 1 of 4: not low
        (450, 50): [5, 5, 6],     # equal to t is not over: 1 of 3
    }
    for (x, y), times in visits.items():
        for ft in times:
            log.add(ft, position=(x, y, 0))
    points = low_fps_points(log, threshold=5.0)
    assert [p.key for p in points] == [(2, 0), (0, 0)]
    assert points[0].confidence == 1.0 and points[0].centre == (250.0, 50.0)
    assert points[1].confidence == pytest.approx(2 / 3) and (points[1].visits, points[1].over) == (3, 2)
    assert is_low_fps([6, 6, 1], 5) and not is_low_fps([6, 1], 5)
    summary = confidence_summary(points)
    assert summary["points"] == 2 and summary["confidence_median"] == pytest.approx(5 / 6)
    assert low_fps_points(log, 5.0, min_visits=2)[0].key == (0, 0)


def test_visits_without_telemetry_use_frame_cells_and_unplaced_records_are_counted():
    log = VisitLog.from_records([{"frame_time_ms": 9.0, "frame_cell": "ab"}, {"fps": 50.0, "frame_cell": "ab"},
                                 {"position": [10, 10], "frame_time_ms": 1.0}, {"position": [10, 10]},
                                 {"frame_time_ms": 7.0, "cell": "cd"}], cell=64)  # `cell`: runs written before frame_cell
    assert log.times == {"ab": [9.0, 20.0], (0, 0): [1.0], "cd": [7.0]}
    assert [p.key for p in low_fps_points(log, 8.0)] == ["ab"]
    # the last step of an episode that ended has a frame time and no position: counted, not placed
    ended = VisitLog.from_records([{"frame_time_ms": 3.0, "position": [10, 10]}, {"frame_time_ms": 3.0}], cell=64)
    assert ended.times == {(0, 0): [3.0]} and ended.unplaced == 1


def test_holm_matches_a_hand_worked_adjustment():
    # sorted 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])


def test_cliffs_delta_hand_worked_and_against_mann_whitney_u():
    # pairs of [3, 4, 5] vs [1, 4]: 3>1 3<4 4>1 4=4 5>1 5>4 → (4 − 1) / 6
    assert cliffs_delta([3, 4, 5], [1, 4]) == pytest.approx(0.5)
    assert cliffs_delta([1, 4], [3, 4, 5]) == pytest.approx(-0.5)
    rng = np.random.default_rng(0)
    a, b = rng.normal(10, 2, 60).round(1), rng.normal(11, 2, 45).round(1)  # rounding makes ties
    u = stats.mannwhitneyu(a, b).statistic
    assert cliffs_delta(a, b) == pytest.approx(2 * u / (a.size * b.size) - 1)
    assert [magnitude(d) for d in (0.05, -0.2, 0.4, -0.5)] == ["negligible", "small", "medium", "large"]


def test_agent_comparison_is_mann_whitney_with_holm():
    rng = np.random.default_rng(1)
    times = {"load": rng.normal(14, 3, 80), "explorer": rng.normal(11, 3, 70), "random": rng.normal(11.2, 3, 50)}
    out = compare_agents(times)
    assert [(c.a, c.b) for c in out] == list(combinations(times, 2))
    raw = [stats.mannwhitneyu(times[c.a], times[c.b], alternative="two-sided") for c in out]
    assert [c.u for c in out] == pytest.approx([r.statistic for r in raw])
    assert [c.p for c in out] == pytest.approx([r.pvalue for r in raw])
    assert [c.p_holm for c in out] == pytest.approx(holm([r.pvalue for r in raw]))
    assert out[0].p_holm < 0.01 and out[0].cliffs_delta > 0.33
    assert out[2].p_holm > 0.05  # explorer vs random: drawn from nearly the same distribution


def test_spearman_reliability_against_scipy():
    rng = np.random.default_rng(2)
    trend = np.where(np.arange(40) % 10 < 3, 12.0, 2.0) + np.linspace(0, 1, 40)
    replays = trend + rng.normal(0, 0.6, (4, 40))
    rel = spearman_reliability(replays)
    expected = [stats.spearmanr(replays[i], replays[j]).statistic for i, j in combinations(range(4), 2)]
    assert rel.rho == pytest.approx(expected)
    assert rel.rho_min > 0.5 and rel.significant_share == 1.0
    noise = spearman_reliability(rng.normal(5, 1, (4, 40)))
    assert noise.rho_median < 0.4
    with pytest.raises(UserError, match="2 replays"):
        spearman_reliability(replays[:1])
