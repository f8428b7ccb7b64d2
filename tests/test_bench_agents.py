"""scripts/bench_agents.py's statistics, against hand-worked values."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_agents  # noqa: E402


def row(agent: str, seed: int, share: float | None, tested: int) -> dict:
    return {"agent": agent, "seed": seed, "pathway_share": share, "tested_per_episode": [0, tested]}


def test_mann_whitney_over_seeds_of_two_fully_separated_agents():
    """3 seeds against 3, every PPGTA value above every Inspector one: U = 9, and one-sided exact
    p = 1 / C(6, 3) = 0.05; the OOIs tested are read from the last episode."""
    rows = [row("ppgta", s, v, o) for s, v, o in ((1, 0.5, 10), (2, 0.6, 12), (3, 0.7, 11))]
    rows += [row("inspector", s, v, o) for s, v, o in ((1, 0.1, 2), (2, 0.2, 3), (3, 0.15, 1))]
    lines = bench_agents.significance(rows).splitlines()
    assert lines[2] == "| ppgta vs inspector | pathway coverage | 0.6 vs 0.15 | U = 9.0 | p = 0.050 |"
    assert lines[3] == "| ppgta vs inspector | OOIs tested | 11 vs 2 | U = 9.0 | p = 0.050 |"
    assert len(lines) == 4, "no random agent, no row for it"


def test_one_seed_gives_no_test_and_tied_agents_no_significance():
    assert bench_agents.significance([row("ppgta", 1, 0.5, 3), row("inspector", 1, 0.1, 1)]) == ""
    rows = [row(a, s, 0.3, 5) for a in ("ppgta", "random") for s in (1, 2, 3)]
    assert all(float(line.rsplit("p = ", 1)[1].rstrip(" |")) > 0.5 for line in bench_agents.significance(rows).splitlines()[2:])


def test_resume_keeps_the_finished_runs_and_runs_the_rest(tiny_parts, small_park, tmp_path, capsys):
    """Each finished run is written to results.jsonl; --resume keeps those of the same settings and
    runs only the missing ones (a run with another budget, or a torn last line, is run again)."""
    import json
    import shutil

    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(tiny_parts("inspect")[2], models / "inspect.ckpt")
    shutil.copy(tiny_parts("path")[2], models / "path.ckpt")
    out = tmp_path / "out"
    common = ["--models", str(models), "--game", small_park, "--episodes", "1", "--steps", "15", "--agents", "random",
              "--oracle-labels", "--test-steps", "4", "--out", str(out)]
    assert bench_agents.main([*common, "--seeds", "1"]) == 0
    first = (out / "random-seed1" / "trajectory.jsonl").stat().st_mtime_ns
    capsys.readouterr()
    assert bench_agents.main([*common, "--seeds", "1", "2", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "--resume: 1 runs kept" in printed and "random    seed 2" in printed and "random    seed 1" not in printed
    assert (out / "random-seed1" / "trajectory.jsonl").stat().st_mtime_ns == first, "the kept run is not run again"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["agent"], r["seed"]) for r in rows] == [("random", 1), ("random", 2)]
    assert len(json.loads((out / "agents.json").read_text())) == 2
    log = out / "results.jsonl"
    log.write_text(log.read_text()[:-20])  # seed 2's line torn
    assert bench_agents.main([*common, "--seeds", "1", "2", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "--resume: 1 runs kept" in printed and "random    seed 2" in printed
    assert [json.loads(line)["seed"] for line in log.read_text().splitlines()] == [1, 2], "the torn line gone, seed 2's new one whole"
    common[common.index("--steps") + 1] = "20"
    assert bench_agents.main([*common, "--seeds", "1", "--resume"]) == 0
    assert "--resume: 0 runs kept" in capsys.readouterr().out


def test_episodes_done_counts_whole_episodes_and_a_crashed_one_followed_by_the_next():
    """Two instances, 5 steps an episode: episode 0 (instance 0) whole, episode 1 (instance 1)
    crashed at step 2 but instance 1 went on to episode 3, episode 2 still playing: 2 done."""
    import json

    rows = [(0, 0, t) for t in range(5)] + [(1, 1, t) for t in range(3)] + [(0, 2, t) for t in range(4)] + [(1, 3, 0)]
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "trajectory.jsonl").write_text("".join(json.dumps({"env": e, "episode": ep, "t": t}) + "\n" for e, ep, t in rows))
        assert bench_agents.episodes_done(folder, 5) == 2
        assert bench_agents.episodes_done(folder, 4) == 3, "episode 2 ends at step 3 when an episode is 4 steps"


def test_cut_scores_runs_at_their_first_episodes(tiny_parts, small_park, tmp_path, capsys):
    """--cut N copies each run with its first N episodes and scores it there: the same counts as the
    whole run's first N episodes, nothing later; a cut past what a run played is one line naming it."""
    import json
    import shutil

    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(tiny_parts("inspect")[2], models / "inspect.ckpt")
    shutil.copy(tiny_parts("path")[2], models / "path.ckpt")
    out = tmp_path / "out"
    common = ["--models", str(models), "--game", small_park, "--steps", "15", "--agents", "random",
              "--oracle-labels", "--test-steps", "4", "--out", str(out), "--seeds", "1", "2"]
    assert bench_agents.main([*common, "--episodes", "3"]) == 0
    whole = {r["seed"]: r for r in json.loads((out / "agents.json").read_text())}
    capsys.readouterr()
    assert bench_agents.main([*common, "--cut", "2"]) == 0
    cut = {r["seed"]: r for r in json.loads((out / "first-2" / "agents.json").read_text())}
    assert sorted(cut) == [1, 2]
    for seed in (1, 2):
        assert cut[seed]["tested_per_episode"] == whole[seed]["tested_per_episode"][:2]
        rows = [json.loads(line) for line in (out / "first-2" / f"random-seed{seed}" / "trajectory.jsonl").read_text().splitlines()]
        assert {r["episode"] for r in rows} == {0, 1} and len(rows) == 30
    assert "OOIs tested after 2 ep." in capsys.readouterr().out
    assert bench_agents.main([*common, "--cut", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --cut 4: ") and "random-seed1 has played 3 whole episodes" in err and len(err.splitlines()) == 1


def test_compare_pairs_seeds_and_calls_a_setting_no_worse_only_within_the_margin_and_the_test():
    """Five seeds, PPGTA ahead in every one (+10, +20, +5, +15, +12 points): Wilcoxon's one-sided p
    that it is worse is 1 and the two-sided one 2 / 2^5 = 0.0625; its OOIs tie, p 1. The Inspector
    behind in every seed by 1 to 5 points, 3 on average: inside the 5-point margin, but p worse =
    1 / 2^5 = 0.031 < 0.05, so not "no worse". A seed only one side holds is left out."""
    ours = [row("ppgta", s, v, o) for s, v, o in zip(range(1, 6), (0.6, 0.7, 0.5, 0.65, 0.62), (10, 11, 12, 13, 14))]
    base = [row("ppgta", s, v, o) for s, v, o in zip(range(1, 6), (0.5, 0.5, 0.45, 0.5, 0.5), (10, 11, 12, 13, 14))]
    ours += [row("inspector", s, v, 3) for s, v in zip(range(1, 6), (0.49, 0.48, 0.47, 0.46, 0.45))]
    base += [row("inspector", s, 0.5, 3) for s in range(1, 7)]
    lines = bench_agents.compare(ours, base).splitlines()
    assert lines[2].startswith("| ppgta | pathway coverage | 5 | 61.4 % | 49.0 % | +12.4 (")
    assert lines[2].endswith("| 1.000 | 0.062 | yes (−5 %) |")
    assert lines[3] == "| ppgta | known OOIs tested | 5 | 12.0 | 12.0 | +0.0 (+0.0 to +0.0) | 1.000 | 1.000 | yes (−1.5) |"
    assert lines[4].startswith("| inspector | pathway coverage | 5 | 47.0 % | 50.0 % | -3.0 (")
    assert lines[4].endswith("| 0.031 | 0.062 | NO (−5 %) |")
    assert len(lines) == 6
