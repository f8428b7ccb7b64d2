"""`playtester demo`, the README's quick start, end to end with the smoke profile's tiny budgets."""

import json

from playtester.cli import main


def test_demo_runs_the_whole_pipeline_and_says_where_the_report_is(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--profile", "smoke", "--minutes", "1", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"report: {out / 'runs' / 'demo' / 'report.html'}" in printed
    for model in ("detector", "encoder", "inspect", "path"):
        assert (out / "models" / f"{model}.ckpt").exists(), model
    summary = json.loads((out / "runs" / "demo" / "summary.json").read_text())
    assert summary["agent"] == "PPGTA explorer" and summary["episodes"] == 1 and summary["steps"] == 60
    # the demo's models train against the clock, so where 60 steps lead differs run to run
    assert 0 < summary["coverage"]["area_share"] <= 1 and 0 <= summary["coverage"]["pathway_share"] <= 1
    assert (out / "runs" / "demo" / "explorer" / "checkpoints" / "last.ckpt").exists()
    # a second demo into the same folder is refused unless told to start again
    assert main(["demo", "--profile", "smoke", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
