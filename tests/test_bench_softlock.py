"""scripts/bench_softlock.py: a budget it cannot play is refused in one line before any engine starts."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_softlock  # noqa: E402


def test_a_budget_of_no_steps_is_refused_in_one_line(capsys):
    assert bench_softlock.main(["--seeds", "2", "--steps", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --seeds 2 --steps 0 --first-seed 0: give 0 or more seeds from seed 0 on and at least 1 step"]
    assert bench_softlock.main(["--first-seed", "-1"]) == 2


def test_scores_count_a_finding_right_only_while_trapped():
    """By hand: one episode trapped from step 100 (found at 164: right; a finding at 50: false), one
    never trapped with a finding (false), one trapped from 1950 of 2000 (too short to count)."""
    eps = [{"entry": 100, "steps": 2000, "findings": {"softlock": [{"step": 50}, {"step": 164}]}},
           {"entry": None, "steps": 2000, "findings": {"softlock": [{"step": 700}]}},
           {"entry": 1950, "steps": 2000, "findings": {"softlock": []}}]
    s = bench_softlock.score(eps, "softlock", min_trapped=200)
    assert (s["right"], s["false"], s["trapped_episodes"], s["found"], s["steps_to_find"]) == (1, 2, 1, 1, 64.0)
    assert abs(s["precision"] - 1 / 3) < 1e-9 and s["recall"] == 1.0
