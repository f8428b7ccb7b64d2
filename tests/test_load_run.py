"""`playtester run load` on the perf park, and the report's low-FPS section."""

from __future__ import annotations

import json

from playtester.cli import main
from playtester.load.reward import LoadThreshold
from playtester.tester.runlog import read_jsonl

PERF_PARK = "doom:park-perf:5:24x24"


def test_load_objective_run_measures_a_threshold_and_reports_low_fps(tiny_parts, tmp_path, capsys, run_config):
    _, _, tester = tiny_parts("inspect")
    out = tmp_path / "load"
    args = ["run", "load", "--game", PERF_PARK, "--tester", str(tester), "--explorer", "inspector",
            "--envs", "1", *run_config(rollout=16), "--steps", "24", "--test-steps", "4", "--episodes", "2", "--oracle-labels",
            "--out", str(out)]
    assert main(args) == 0, capsys.readouterr().err
    threshold = LoadThreshold.load(out / "load_threshold.json")
    assert threshold.baseline.n == 48  # two random baseline episodes of 24 steps
    assert threshold.training is not None and threshold.training.n == 16  # the first rollout's warm-up shifted it
    assert threshold.value == threshold.base + threshold.shift
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert rows and all(r["frame_time_ms"] > 0 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["load"]["threshold_ms"] == threshold.value and summary["agent"].endswith("+ load reward")
    assert (out / "lowfps_map.png").exists() and (out / "frame_times.png").exists()
    assert "low-FPS points" in (out / "report.html").read_text()
    # a random run has no load reward to train: refused, in one line
    assert main([*args[:7], "random", *args[8:-1], str(tmp_path / "r")]) == 2
    assert "--explorer random: a load test (`playtester run load`) trains the PPO explorer" in capsys.readouterr().err


def test_report_has_no_load_section_without_frame_times(tmp_path):
    from playtester.report.build import build_report

    run = tmp_path / "plain"
    run.mkdir()
    (run / "config.yaml").write_text("game: gym:CartPole-v1\nagent: random explorer\n")
    (run / "trajectory.jsonl").write_text("".join(json.dumps({"episode": 0, "t": t, "action": 0}) + "\n" for t in range(5)))
    build_report(run)
    assert "load" not in json.loads((run / "summary.json").read_text())
    assert not (run / "frame_times.png").exists() and "low-FPS" not in (run / "report.html").read_text()
