"""`playtester run` from the command line: tiny budgets, Ctrl-C and --resume, bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from playtester.cli import main
from playtester.runlog import read_jsonl


def test_run_writes_a_report_and_resumes(tiny_inspect_policy, small_park, tmp_path, capsys):
    out = tmp_path / "r1"
    args = ["run", "--game", small_park, "--tester", str(tiny_inspect_policy), "--steps", "40", "--test-steps", "8", "--out", str(out)]
    assert main([*args, "--episodes", "2"]) == 0
    assert "report" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["steps"] == 80
    assert (out / "report.html").exists() and (out / "coverage.png").exists()
    # an existing folder is refused without --resume or --overwrite
    assert main([*args, "--episodes", "2"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--episodes", "3", "--resume"]) == 0
    assert {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")} == {0, 1, 2}
    assert main([*args, "--episodes", "1", "--overwrite"]) == 0
    assert {r["episode"] for r in read_jsonl(out / "trajectory.jsonl")} == {0}


def test_ctrl_c_keeps_what_was_written_and_resume_finishes(tiny_inspect_policy, small_park, tmp_path):
    out = tmp_path / "r2"
    args = [sys.executable, "-m", "playtester", "run", "--game", small_park, "--tester", str(tiny_inspect_policy),
            "--steps", "400", "--episodes", "2", "--test-steps", "8", "--out", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(read_jsonl(out / "trajectory.jsonl"))) < 50:
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    kept = list(read_jsonl(out / "trajectory.jsonl"))
    assert len(kept) >= 50
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = list(read_jsonl(out / "trajectory.jsonl"))
    assert rows[: len(kept)] == kept, "what was written before Ctrl-C is kept as it was"
    assert json.loads((out / "summary.json").read_text())["episodes"] >= 2


@pytest.mark.parametrize("extra, words", [
    (["--game", "gym:CartPole-v1"], ["key map", "train the test policy"]),
    (["--game", "doom:freedoom2:MAP99"], ["no level"]),
    (["--game", "doom:park:5:24x24", "--explorer", "wander"], ["--explorer", "wander"]),
    (["--game", "doom:freedoom2:MAP01"], ["ground truth", "detector checkpoint"]),
])
def test_bad_runs_are_one_line(tiny_inspect_policy, tmp_path, capsys, extra, words):
    code = main(["run", "--tester", str(tiny_inspect_policy), "--out", str(tmp_path / "r"), "--episodes", "1", "--steps", "5", *extra])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    for w in words:
        assert w in err
