"""scripts/bench_agents.py's statistics, against hand-worked values."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import agent_figures  # noqa: E402
import bench_agents  # noqa: E402


def row(agent: str, seed: int, share: float | None, tested: int) -> dict:
    return {"agent": agent, "seed": seed, "pathway_share": share, "tested_per_episode": [0, tested]}


def test_mann_whitney_over_seeds_of_two_fully_separated_agents():
    """3 seeds against 3, every PPGTA value above every Inspector one: U = 9, and one-sided exact
    p = 1 / C(6, 3) = 0.05; the OOIs tested are read from the last episode."""
    rows = [row("ppgta", s, v, o) for s, v, o in ((1, 0.5, 10), (2, 0.6, 12), (3, 0.7, 11))]
    rows += [row("inspector", s, v, o) for s, v, o in ((1, 0.1, 2), (2, 0.2, 3), (3, 0.15, 1))]
    lines = bench_agents.significance(rows).splitlines()
    assert lines[2] == "| ppgta vs inspector | pathway coverage | 0.6 vs 0.15 | U = 9.0 | 1.00 | p = 0.050 |"
    assert lines[3] == "| ppgta vs inspector | OOIs tested | 11 vs 2 | U = 9.0 | 1.00 | p = 0.050 |"
    assert len(lines) == 4, "no random agent, no row for it"


def test_every_explorer_is_tested_on_each_level():
    """Per level, the episodic explorer against the baselines and against PPGTA (3 seeds a side:
    fully separated, U = 9, p = 1 / C(6, 3) = 0.05; PPGTA below random, U = 0, p = 1); a level
    with one seed of an agent gives no row."""
    def level_row(level: str, agent: str, seed: int, share: float) -> dict:
        return {"level": level, "agent": agent, "seed": seed, "reachable_share": share}

    rows = [level_row("doom:freedoom2:MAP01", a, s, v) for a, values in
            (("ppgta-episodic-step", (0.5, 0.6, 0.7)), ("ppgta", (0.1, 0.2, 0.15)), ("random", (0.3, 0.35, 0.4)))
            for s, v in zip((1, 2, 3), values)]
    rows += [level_row("doom:freedoom2:MAP07", "ppgta", 1, 0.2), level_row("doom:freedoom2:MAP07", "random", 1, 0.1)]
    assert bench_agents.level_significance(rows).splitlines()[2:] == [
        "| freedoom2:MAP01 | ppgta vs random | 15.0 vs 35.0 % | U = 0.0 | 0.00 | p = 1.000 |",
        "| freedoom2:MAP01 | ppgta-episodic-step vs random | 60.0 vs 35.0 % | U = 9.0 | 1.00 | p = 0.050 |",
        "| freedoom2:MAP01 | ppgta-episodic-step vs ppgta | 60.0 vs 15.0 % | U = 9.0 | 1.00 | p = 0.050 |",
    ]


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
    # The 15-step budget again, the models folder spelled otherwise: both 15-step rows match, but
    # random-seed1 now holds the 20-step run, so seed 1 is run again and seed 2 alone is kept.
    common[common.index("--steps") + 1] = "15"
    common[common.index("--models") + 1] = str(models / ".." / "models")
    assert bench_agents.main([*common, "--seeds", "1", "2", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "--resume: 2 runs kept" in printed and "no longer holds the run of its row (15 steps)" in printed, printed
    assert "random    seed 1" in printed and "random    seed 2" not in printed
    assert {r["seed"]: r["steps"] for r in json.loads((out / "agents.json").read_text())} == {1: 15, 2: 15}


def test_each_agent_plays_the_novelty_scale_run_explore_gives_it_and_resume_keeps_only_rows_played_so():
    """Plain agents play their explorer's own scale (ppgta-episodic: step), suffixed ones theirs; a
    results row from before the scale was kept counts as what its agent played then (plain: return),
    so --resume runs an old plain ppgta-episodic row again instead of scoring it as today's."""
    assert [bench_agents.played_scale(a) for a in ("ppgta", "ppgta-episodic", "ppgta-step", "ppgta-episodic-return", "inspector")] \
        == ["return", "step", "step", "return", "return"]
    assert [bench_agents.plain(a) for a in ("ppgta-episodic-return", "episodic-step", "expert", "ppgta-episodic-run-frontier",
                                             "random-frontier")] == ["ppgta-episodic", "episodic", "random", "ppgta-episodic", "random"]
    assert [bench_agents.played_scale(a) for a in ("ppgta-frontier", "ppgta-episodic-run-frontier")] == ["return", "step"]
    old_plain, old_step = {"agent": "ppgta-episodic"}, {"agent": "ppgta-episodic-step"}
    assert bench_agents.scale_of(old_plain) == "return" != bench_agents.played_scale("ppgta-episodic")
    assert bench_agents.scale_of(old_step) == "step" == bench_agents.played_scale("ppgta-episodic-step")
    assert bench_agents.scale_of({"agent": "ppgta-episodic", "novelty_scale": "step"}) == "step"


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
    whole run's first N episodes, nothing later; a cut past what a run played is one line naming it;
    --cut max cuts at the most whole episodes every run played (a run stopped mid-line included)."""
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
    rows = (out / "random-seed2" / "trajectory.jsonl").read_text().splitlines(keepends=True)
    (out / "random-seed2" / "trajectory.jsonl").write_text("".join(rows[:37]) + rows[37][:9])  # stopped in its 3rd episode, mid-line
    assert bench_agents.main([*common, "--cut", "max"]) == 0  # seed 2 has 2 whole episodes: both are cut there
    assert (out / "first-2" / "agents.json").exists() and "OOIs tested after 2 ep." in capsys.readouterr().out
    (out / "random-seed2" / "trajectory.jsonl").write_text("".join(rows[:7]))
    assert bench_agents.main([*common, "--cut", "max"]) == 2
    err = capsys.readouterr().err
    assert "random-seed2 has not played a whole episode" in err and len(err.splitlines()) == 1


def tiny_map(pathways=True):
    """A 4 × 2 map of 1-unit cells (row 0 south); the pathways are the south row."""
    import numpy as np

    from playtester.capture.park.birdseye import BirdsEye
    from playtester.report.maps import MapSource

    mask = np.array([[True, True, True, True], [False, False, False, False]])
    return MapSource(BirdsEye(np.zeros((20, 40, 3), np.uint8), (0.0, 0.0, 4.0, 2.0)), [], mask if pathways else None, 1.0,
                     walkable_mask=np.ones((2, 4), bool))


def step(x, y, episode=0, mode="explore", env=0):
    return {"position": [x, y, 0.0], "episode": episode, "mode": mode, "env": env}


def test_coverage_over_steps_counts_the_pathway_cells_reached_by_each_step_count():
    # steps: (0.5, 0.5) path cell 0; again; (1.5, 0.5) path cell 1; (0.5, 1.5) off the path; (3.5, 0.5) cell 3
    rows = [step(0.5, 0.5), step(0.5, 0.5), step(1.5, 0.5), step(0.5, 1.5), step(3.5, 0.5), {"episode": 0}]
    curve = agent_figures.coverage_over_steps(tiny_map(), rows, points=3)
    assert curve == {"measure": "pathway", "steps": [2, 4, 6], "share": [0.25, 0.5, 0.75]}
    walkable = agent_figures.coverage_over_steps(tiny_map(pathways=False), rows, points=2)
    assert walkable == {"measure": "walkable", "steps": [3, 6], "share": [2 / 8, 4 / 8]}


def test_revisits_share_the_exploring_steps_in_cells_covered_before():
    rows = [step(0.5, 0.5), step(0.5, 0.5), step(1.5, 0.5, mode="test"), step(1.5, 0.5),  # episode 0
            step(1.5, 0.5, episode=1), step(2.5, 0.5, episode=1)]  # episode 1: one cell seen in episode 0, one new
    shares = agent_figures.revisits(tiny_map(), rows, episodes=2)
    # episode 0: 3 exploring steps, 2 in cells seen before (the repeat, and the cell the test reached)
    assert shares["run"] == [2 / 3, 1 / 2]
    assert shares["episode"] == [2 / 3, 0.0]


def test_novelty_share_of_the_reward():
    # α 0.8, novelty 0.01, preference −0.2: 0.2·0.01 / (0.002 + 0.16) = 0.0123…; pure novelty (α 0): 1
    scalars = {"charts/alpha": [[64, 0.8], [128, 0.0]], "rewards/novelty": [[64, 0.01], [128, 0.5]],
               "rewards/preference": [[64, -0.2], [128, 0.0]]}
    share = agent_figures.novelty_share(scalars)
    assert [s for s, _ in share] == [64, 128]
    assert share[0][1] == pytest.approx(0.002 / 0.162) and share[1][1] == 1.0
    assert agent_figures.novelty_share({"charts/alpha": [[64, 0.8]]}) == []


def test_diagnosis_rows_average_each_run_then_the_seeds():
    # seed 1: α 0.8 then 0.6 (mean 0.7), novelty 0.01 and 0.03, preference −0.2 and −0.4;
    # novelty's share: 0.2·0.01 / (0.002 + 0.16) and 0.4·0.03 / (0.012 + 0.24), averaged.
    # seed 2: α 0.5 throughout. Steps not exploring: 300 of 1000 and 100 of 1000 → 0.2 over seeds.
    # The returning agent: 500 steps exploring, 300 returning, 200 testing.
    first = {"charts/alpha": [[64, 0.8], [128, 0.6]], "rewards/novelty": [[64, 0.01], [128, 0.03]],
             "rewards/preference": [[64, -0.2], [128, -0.4]]}
    second = {"charts/alpha": [[64, 0.5]], "rewards/novelty": [[64, 0.1]], "rewards/preference": [[64, -0.1]]}
    results = [{"agent": "ppgta", "seed": 1, "scalars": first, "steps": 1000, "explore_steps": 700,
                "revisits": {"run": [0.1, 0.6]}},
               {"agent": "ppgta", "seed": 2, "scalars": second, "steps": 1000, "explore_steps": 900,
                "revisits": {"run": [0.2, 0.4]}},
               {"agent": "random", "seed": 1, "scalars": {}, "steps": 1000, "explore_steps": 1000, "revisits": None},
               {"agent": "random-frontier", "seed": 1, "scalars": {}, "steps": 1000, "explore_steps": 500, "return_steps": 300,
                "revisits": None}]
    ppgta, random, returning = agent_figures.diagnosis_rows(results, ("ppgta", "random", "random-frontier"))
    assert (returning["not_exploring"], returning["returning"]) == (pytest.approx(0.2), pytest.approx(0.3))
    assert ppgta["returning"] == 0.0
    assert ppgta["alpha"] == pytest.approx((0.7 + 0.5) / 2)
    assert ppgta["novelty"] == pytest.approx((0.02 + 0.1) / 2)
    assert ppgta["preference"] == pytest.approx((-0.3 - 0.1) / 2)
    seed1 = (0.002 / 0.162 + 0.012 / 0.252) / 2
    assert ppgta["novelty_share"] == pytest.approx((seed1 + 0.05 / 0.1) / 2)
    assert ppgta["not_exploring"] == pytest.approx(0.2) and ppgta["revisits_last"] == pytest.approx(0.5)
    assert random["alpha"] is None and random["novelty_share"] is None and random["not_exploring"] == 0.0
    table = agent_figures.diagnosis_table(results, ("ppgta", "random"))
    assert "| ppgta | 0.6 |" in table and "| random | – | – | – | – | 0.0 % | 0.0 % | – |" in table


def test_visit_counts_and_the_comparisons_tested():
    import numpy as np

    counts = agent_figures.visit_counts(tiny_map(), [step(0.5, 0.5), step(0.5, 0.5), step(3.5, 1.5), step(9.0, 9.0)])
    np.testing.assert_array_equal(counts, [[2, 0, 0, 0], [0, 0, 0, 1]])
    pairs = bench_agents.comparisons({"ppgta", "ppgta-episodic", "episodic", "inspector", "random", "expert"})
    assert pairs == [("ppgta", "inspector"), ("ppgta", "random"), ("ppgta-episodic", "inspector"), ("ppgta-episodic", "random"),
                     ("ppgta-episodic", "ppgta"), ("episodic", "inspector"), ("episodic", "random"), ("episodic", "ppgta")]
    pairs = bench_agents.comparisons({"ppgta", "ppgta-episodic", "ppgta-episodic-return", "ppgta-step", "inspector"})
    assert pairs == [("ppgta", "inspector"), ("ppgta-episodic", "inspector"), ("ppgta-episodic", "ppgta"),
                     ("ppgta-step", "inspector"), ("ppgta-step", "ppgta"), ("ppgta-episodic-return", "inspector"),
                     ("ppgta-episodic-return", "ppgta"), ("ppgta-episodic", "ppgta-episodic-return")]
    # ppgta-episodic plays at unit scale already: its -step twin is no other setting to test it against
    assert ("ppgta-episodic-step", "ppgta-episodic") not in bench_agents.comparisons({"ppgta-episodic", "ppgta-episodic-step"})
    assert bench_agents.comparisons({"ppgta", "random"}) == [("ppgta", "random")]
    # a returning agent against the same agent starting afresh
    assert bench_agents.comparisons({"random", "random-frontier"}) == [("random-frontier", "random")]
    assert ("ppgta-episodic-run-frontier", "ppgta-episodic-run") in bench_agents.comparisons(
        {"ppgta", "ppgta-episodic-run", "ppgta-episodic-run-frontier", "inspector", "random"})
    assert bench_agents.comparisons({"ppgta", "ppgta-step"}) == [("ppgta-step", "ppgta")]  # once, not twice


@pytest.mark.slow
def test_the_episodic_explorer_and_the_expert_side_by_side_in_parallel(tiny_parts, small_park, tmp_path, capsys):
    """Two runs at once in processes of their own (`--parallel 2`): the episodic explorer's run, with
    its novelty scaled per step (`episodic-step`), logs its episodic term, the expert's config says it is a telemetry-driven ceiling; the report draws
    coverage over steps, the heat maps and the diagnosis."""
    import json
    import shutil

    import yaml

    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(tiny_parts("inspect")[2], models / "inspect.ckpt")
    shutil.copy(tiny_parts("path")[2], models / "path.ckpt")
    out = tmp_path / "out"
    assert bench_agents.main(["--models", str(models), "--game", small_park, "--episodes", "1", "--steps", "24",
                              "--agents", "episodic-step", "expert", "--seeds", "1", "--parallel", "2", "--envs", "1",
                              "--rollout", "8", "--oracle-labels", "--test-steps", "4", "--out", str(out)]) == 0
    rows = {r["agent"]: r for r in json.loads((out / "agents.json").read_text())}
    assert set(rows) == {"episodic-step", "expert"}
    assert rows["episodic-step"]["scalars"]["rewards/episodic"] and "charts/alpha" in rows["episodic-step"]["scalars"]
    config = yaml.safe_load((out / "episodic-step-seed1" / "config.yaml").read_text())
    assert (config["explorer"], config["novelty_scale"]) == ("episodic", "step")
    assert rows["expert"]["scalars"] == {} and rows["expert"]["steps"] == 24
    assert yaml.safe_load((out / "expert-seed1" / "config.yaml").read_text())["agent"] == bench_agents.EXPERT_NOTE["park"]
    assert len(rows["episodic-step"]["coverage_curve"]["share"]) == agent_figures.CURVE_POINTS
    for name in ("agents.png", "coverage-steps.png", "heat-maps.png", "diagnosis.png"):
        assert (out / name).stat().st_size > 1000, name


@pytest.mark.slow
def test_levels_cut_max_scores_every_level_at_the_episodes_every_run_played(tmp_path, capsys):
    """The levels profile on a WAD of its own: a run stopped in its third episode (its rows after
    the second cut off) makes `--cut max` score every run at 2 episodes, in the level table."""
    import json

    from playtester.capture.park.level_builder import door_lift_hom_level, level_wad

    wad = tmp_path / "test.wad"
    wad.write_bytes(level_wad(door_lift_hom_level()))
    level, out = f"doom:wad:{wad}", tmp_path / "out"
    assert bench_agents.main(["--profile", "levels", "--levels", level, "--agents", "random", "--seeds", "1", "2",
                              "--episodes", "3", "--steps", "10", "--out", str(out)]) == 0
    runs = next(p for p in out.iterdir() if p.is_dir())
    stopped = runs / "random-seed2" / "trajectory.jsonl"
    rows = stopped.read_text().splitlines(keepends=True)
    stopped.write_text("".join(r for r in rows if json.loads(r)["episode"] < 2) + rows[-1][:20])  # a torn last line too
    capsys.readouterr()
    assert bench_agents.main(["--profile", "levels", "--cut", "max", "--parallel", "2", "--out", str(out)]) == 0
    cut = json.loads((out / "first-2" / "levels.json").read_text())
    assert sorted(r["seed"] for r in cut) == [1, 2] and all(r["episodes"] == 2 and r["steps"] == 20 for r in cut)
    assert all(r["level"] == level and r["reachable_share"] > 0 for r in cut)
    table = capsys.readouterr().out
    assert "| random | 2 |" in table and "| yes |" in table
    assert bench_agents.main(["--profile", "levels", "--cut", "3", "--out", str(out)]) == 2
    assert "random-seed2 has played 2 whole episodes" in capsys.readouterr().err


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


def test_a_cut_run_keeps_its_explorer_scalars_up_to_its_exploring_steps(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "ppgta-seed1" / "explorer" / "tensorboard"))
    for step in (64, 128, 192, 256):
        writer.add_scalar("charts/alpha", 0.8 - step / 1000, step)
        writer.add_scalar("rewards/novelty", step / 100, step)
    writer.close()
    kept = bench_agents.scalars_until(tmp_path / "ppgta-seed1", 150)
    assert [s for s, _ in kept["charts/alpha"]] == [64, 128]
    assert [v for _, v in kept["rewards/novelty"]] == pytest.approx([0.64, 1.28])
    assert "rewards/preference" not in kept
    assert bench_agents.scalars_until(tmp_path / "random-seed1", 150) == {}  # no explorer log: nothing


def test_the_benchmark_and_its_workers_let_waiting_openmp_threads_sleep():
    """Two runs at once with OpenMP's idle threads spinning took 4.5× as long (docs/benchmarks/explorer.md):
    the script sets OMP_WAIT_POLICY=PASSIVE before torch loads, and its spawned workers inherit it;
    a user's own setting is kept."""
    import os
    import subprocess
    import sys

    probe = ("import sys; sys.path.insert(0, 'scripts'); import bench_agents, os, subprocess; "
             "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\\'OMP_WAIT_POLICY\\'))'], "
             "capture_output=True, text=True).stdout.strip(); "
             "print(os.environ.get('OMP_WAIT_POLICY'), child, 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PLAYTESTER_WAIT_POLICY")}
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["PASSIVE", "PASSIVE", "False"], out.stderr
    out = subprocess.run([sys.executable, "-c", probe], env={**env, "OMP_WAIT_POLICY": "ACTIVE"}, cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["ACTIVE", "ACTIVE", "False"], out.stderr
