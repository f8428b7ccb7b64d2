"""`playtester demo`, the README's quick start, end to end with the smoke profile's tiny budgets."""

import json

import torch

from playtester.cli import main
from playtester.commands.demo import PROFILES, stages


def test_demo_runs_the_whole_pipeline_on_fixed_budgets_and_says_where_the_report_is(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--profile", "smoke", "--seed", "3", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"report: {out / 'runs' / 'demo' / 'report.html'}" in printed
    for model in ("detector", "encoder", "inspect", "path"):
        assert (out / "models" / f"{model}.ckpt").exists(), model
    summary = json.loads((out / "runs" / "demo" / "summary.json").read_text())
    assert summary["agent"] == "PPGTA explorer" and summary["episodes"] == 1 and summary["steps"] == 60
    # the run found its objects with the demo's own detector, and the report says so
    detector = out / "models" / "detector.ckpt"
    assert summary["objects_found_by"].startswith(f"detector {detector}, ")
    assert f"found by {summary['objects_found_by']}" in printed
    assert summary["objects_found_by"] in (out / "runs" / "demo" / "report.html").read_text()
    assert 0 < summary["coverage"]["area_share"] <= 1 and 0 <= summary["coverage"]["pathway_share"] <= 1
    assert (out / "runs" / "demo" / "explorer" / "checkpoints" / "last.ckpt").exists()
    # fixed budgets, not shares of a clock: the detector and the encoder ran all their epochs
    smoke = PROFILES["smoke"]
    for model, epochs in (("detector", smoke.detector_epochs), ("encoder", smoke.encoder_epochs)):
        assert torch.load(out / "models" / f"{model}.ckpt", weights_only=True)["epoch"] == epochs, model
    # and the same seed trains the same detector: the demo's own detector command once more
    (command,) = [s.args for s in stages(smoke, "doom:park:1", 3, out) if s.name == "detector"]
    again = tmp_path / "again.ckpt"
    command[command.index("--out") + 1] = str(again)
    assert main(command) == 0
    first, second = (torch.load(p, weights_only=True)["state_dict"] for p in (detector, again))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    # a second demo into the same folder is refused unless told to start again; --minutes is said to be unused
    assert main(["demo", "--profile", "smoke", "--minutes", "1", "--out", str(out)]) == 2
    said = capsys.readouterr()
    assert "--minutes 1 is no longer used" in " ".join(said.out.split()) and "--overwrite" in said.err
