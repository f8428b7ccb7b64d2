"""scripts/bench_reline_pacman.py: a tiny run prints the table beside the paper's figures; a zone
outside the screen is refused in one line before anything trains."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytest.importorskip("ale_py", reason="the atari extra (pip install 'playtester[atari]') is not installed")
import bench_reline_pacman  # noqa: E402


def test_a_zone_outside_the_screen_is_refused_before_training(tmp_path, capsys):
    code = bench_reline_pacman.main(["--zones", "0,50,8,62", "152,50,161,62", "0,98,8,110", "152,98,160,110",
                                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: zone upper-right (152,50)–(161,62) lies outside the 160×210 screen")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_tiny_run_counts_zone_hits_per_episode_and_prints_the_papers_figures(tmp_path, capsys):
    code = bench_reline_pacman.main(["--seeds", "0", "1", "--agents", "rl", "random", "--timesteps", "256", "--envs", "2",
                                     "--episodes", "2", "--max-steps", "80", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [(r["agent"], r["seed"]) for r in rows] == [("rl", 0), ("random", 0), ("rl", 1), ("random", 1)]
    for r in rows:  # episodes with at least 1, 2, 3, 4 zones: never more with more zones
        assert len(r["at_least"]) == 4 and all(a >= b for a, b in zip(r["at_least"], r["at_least"][1:]))
        assert 0 <= r["at_least"][0] <= 2 and 0 < r["length"] <= 80
    assert "| rl |" in out and "| 25.6 |" in out and "| 0.8 |" in out
    assert "rl vs random: Mann–Whitney p =" in out


def test_a_second_run_reads_back_the_agent_seeds_done_and_refuses_other_settings(tmp_path, capsys):
    base = ["--agents", "random", "--envs", "2", "--episodes", "2", "--max-steps", "40", "--out", str(tmp_path)]
    assert bench_reline_pacman.main(["--seeds", "0"] + base) == 0
    first = json.loads((tmp_path / "results.json").read_text())["rows"]
    capsys.readouterr()
    assert bench_reline_pacman.main(["--seeds", "0", "1"] + base) == 0
    out = capsys.readouterr().out
    assert "1 agent-seeds read back from" in out and "; 1 to run" in out
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert rows[0] == first[0] and [(r["agent"], r["seed"]) for r in rows] == [("random", 0), ("random", 1)]
    assert "| random |" in out  # the table covers both seeds, the one read back too

    code = bench_reline_pacman.main(["--seeds", "2"] + base[:-4] + ["--max-steps", "50", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "made with other settings (--max-steps 40)" in err[0]
    assert json.loads((tmp_path / "results.json").read_text())["rows"] == rows  # nothing lost


@pytest.mark.slow
def test_novelty_rnd_gives_both_ppo_agents_an_intrinsic_reward_in_a_second_value_head(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code = bench_reline_pacman.main(["--seeds", "0", "--agents", "rl", "--novelty", "rnd", "--timesteps", "4096", "--envs", "2",
                                     "--episodes", "1", "--max-steps", "40", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "2 value head(s)" in out
    events = EventAccumulator(str(next((tmp_path / "train-rl-0").rglob("events.out.tfevents.*"))))
    events.Reload()
    intrinsic = [e.value for e in events.Scalars("rewards/intrinsic_raw")]
    assert intrinsic and max(intrinsic) > 0  # RND's prediction error, after its warm-up frames
    assert json.loads((tmp_path / "results.json").read_text())["args"]["novelty"] == "rnd"
