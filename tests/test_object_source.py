"""What finds a run's objects: a trained detector, or the engine's labels only when asked for by
name (`--oracle-labels`); every report says which (issue 17)."""

from __future__ import annotations

import json

import pytest

from playtester.cli import main
from playtester.tester.object_source import ORACLE_LABELS, found_by


@pytest.mark.parametrize("extra, words", [
    ([], ["--tester", "needs something to find the objects with", "--detector", "--oracle-labels"]),
    (["--detector", "ground-truth"], ["--oracle-labels flag now"]),
    (["--detector", "models/none.ckpt", "--oracle-labels"], ["models/none.ckpt: not found"]),
    (["--detector", "models/none.ckpt"], ["models/none.ckpt: not found", "playtester train detector"]),
])
def test_a_run_that_tests_refuses_without_something_to_find_objects_with(tmp_path, capsys, extra, words):
    tester = tmp_path / "inspect.ckpt"
    tester.write_bytes(b"")  # refused before the policy is read
    code = main(["run", "explore", "--game", "doom:park:5:24x24", "--tester", str(tester), "--explorer", "random",
                 "--out", str(tmp_path / "r"), *extra])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    for w in words:
        assert w in err
    assert not (tmp_path / "r").exists()


def test_a_plan_that_looks_for_objects_refuses_without_a_detector_and_one_that_does_not_runs(tmp_path, capsys):
    plan = tmp_path / "barrel.yaml"
    plan.write_text("nodes: [{name: a barrel, target: {kind: barrel}}]\n")
    assert main(["plan", "run", str(plan), "--game", "doom:park:5:24x24", "--out", str(tmp_path / "o")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "it looks for objects" in err and "--oracle-labels" in err and not (tmp_path / "o").exists()
    walk = tmp_path / "walk.yaml"
    walk.write_text("start: 4\nnodes: [{name: turn, action: turn_left, repeat: 3}]\n")
    assert main(["plan", "run", str(walk), "--game", "doom:park:5:24x24", "--out", str(tmp_path / "w")]) == 0
    report = json.loads((tmp_path / "w" / "plan_report.json").read_text())
    assert report["objects_found_by"] == "nothing (the plan looks for no object)"


def test_oracle_labels_are_named_in_the_summary_the_report_and_the_config(tiny_inspect_policy, small_park, tmp_path):
    out = tmp_path / "r"
    assert main(["run", "explore", "--game", small_park, "--tester", str(tiny_inspect_policy), "--oracle-labels", "--explorer", "random",
                 "--episodes", "1", "--steps", "12", "--test-steps", "4", "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["objects_found_by"] == ORACLE_LABELS
    assert f"<th>objects found by</th><td>{ORACLE_LABELS}</td>" in (out / "report.html").read_text()
    assert f"objects_found_by: '{ORACLE_LABELS}'" in (out / "config.yaml").read_text()


def test_old_run_folders_still_say_what_found_their_objects(tmp_path):
    from playtester.report.build import build_report

    assert found_by({"game": "doom:park", "detector": "ground-truth"}) == ORACLE_LABELS
    assert found_by({"game": "doom:park", "detector": "m/d.ckpt"}) == "detector m/d.ckpt (held-out AP not recorded)"
    assert found_by({"game": "gym:CartPole-v1"}) == "not recorded"
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.yaml").write_text("game: gym:CartPole-v1\nagent: random explorer\ndetector: ground-truth\n")
    (run / "trajectory.jsonl").write_text('{"episode": 0, "t": 0, "action": 1, "cell": "ab"}\n')
    build_report(run)
    assert json.loads((run / "summary.json").read_text())["objects_found_by"] == ORACLE_LABELS
