"""scripts/bench_evolve.py's report: runs of other seeds printed together, the tests paired by maze
against hand-worked values, runs of other settings refused in one line."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_evolve  # noqa: E402

ARGS = {"seeds": "[0]", "budget": "1000", "generations": "3", "strategies": "['random', 'ea_s']", "population": "6",
        "episodes": "2", "steps": "100", "ppo_steps": "256", "envs": "4", "frame_size": "48", "size": "15", "jobs": "1",
        "out": "x"}


def row(strategy: str, seed: int, bugs: int, states: int) -> dict:
    found = {"bugs": bugs, "far_off": 0, "regions": {"near": bugs, "far": 0, "off_route": 0}, "false": 0}
    return {"strategy": strategy, "seed": seed, "of": 9, "steps": found, "generations": found, "generations_at_budget": 3,
            "steps_at_generations": 900, "states_at_generations": states, "states": states, "best_winning": 1.0,
            "times": [], "total_generations": 3, "total_steps": 1000, "wall": 1.0}


def write(path: Path, rows: list[dict], **changed: str) -> Path:
    path.write_text(json.dumps({"args": ARGS | changed, "rows": rows}))
    return path


def test_runs_of_other_seeds_are_reported_together_and_tested_paired_by_maze(tmp_path, capsys):
    # mazes 0–2 in one run, 3–4 in another; EA covers 3 states more than random in every maze, and
    # finds one bug more in mazes 0, 1 and 3 (ties in 2 and 4 drop out of the signed-rank test)
    a = write(tmp_path / "a.json", [row(s, m, 2 + (s == "ea_s") * (m in (0, 1)), 10 * m + 3 * (s == "ea_s"))
                                    for m in range(3) for s in ("random", "ea_s")])
    b = write(tmp_path / "b.json", [row(s, m, 2 + (s == "ea_s") * (m == 3), 10 * m + 3 * (s == "ea_s"))
                                    for m in (3, 4) for s in ("random", "ea_s")])
    bench_evolve.main(["--report", str(a), str(b)])
    out = capsys.readouterr().out
    assert "seeds [0, 1, 2, 3, 4]" in out
    # exact two-sided signed-rank: 5 differences one way → 2 / 2⁵ = 0.0625; 3 of 3 → 2 / 2³ = 0.25
    assert "random − ea_s, states covered: differences [-3, -3, -3, -3, -3], Wilcoxon p = 0.0625" in out
    assert "random − ea_s, bugs: differences [-1, -1, 0, -1, 0], Wilcoxon p = 0.25" in out
    assert "- random: 2/2, 2/2, 2/2, 2/2, 2/2" in out and "- ea_s: 3/3, 3/3, 2/2, 3/3, 2/2" in out


def test_runs_of_other_settings_or_a_file_that_is_not_a_run_are_one_line(tmp_path, capsys):
    a = write(tmp_path / "a.json", [row("random", 0, 2, 10)])
    b = write(tmp_path / "b.json", [row("random", 1, 2, 10)], budget="2000")
    with pytest.raises(SystemExit, match=r"--report .*b\.json: settings .* differ from .*a\.json"):
        bench_evolve.main(["--report", str(a), str(b)])
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"--report .*c\.json: not a bench_evolve results\.json"):
        bench_evolve.main(["--report", str(tmp_path / "c.json")])
