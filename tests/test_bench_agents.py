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
