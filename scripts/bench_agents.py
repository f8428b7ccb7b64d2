"""The tester's explorers against the paper's baselines, on the same park seeds with the same budget.

The agents play the same game, from the same random starts, for the same episodes and steps,
each with the same test policy and detector:

    ppgta           PPO trained online, ensemble RND novelty + the path policy's preference (PPGTA)
    ppgta-episodic  ppgta + E3B's elliptical episodic novelty on the path policy's IDM features,
                    both novelties at unit scale (`novelty_scale: step`, its own)
    episodic        the episodic novelty + the preference, no RND
    AGENT-step      ppgta, ppgta-episodic or episodic with each novelty divided by the running std
                    of its per-step values (`novelty_scale: step`) instead of its discounted sum's
    ppgta-episodic-return  ppgta-episodic with `novelty_scale: return` (each novelty divided by the
                    running std of its discounted sum, as ppgta's; the plain agent before 2026-11-29)
    ppgta-episodic-run  ppgta-episodic whose episodic novelty remembers the whole run, every
                    episode (`episodic_memory: run`), not the episode alone
    AGENT-frontier  ppgta, ppgta-episodic-run or random whose episodes, after each instance's first,
                    begin by returning to a frontier place (`returns: 1`, Go-Explore's first return,
                    then explore: playtester/tester/frontier.py)
    inspector       PPO trained online, single-predictor RND, no preference (the Inspector baseline)
    random          uniform random actions
    expert          the scripted path follower, driven by the engine's telemetry and the park's
                    map: a ceiling, not a pixel-only agent (the park only; not run by default)

and the script prints, per agent (mean over seeds): coverage (of the pathways where the map has
them, else of the walkable cells) and its ratio to random's, OOIs tested after each episode (the
park's known OOIs: a test of a detection that no known OOI matched, a false detection, is counted
apart), tests and their success rate (JSD under the validation threshold), and why: α, the reward
terms, novelty's share of the reward, the steps spent confirming and testing, and revisits. It
saves in `--out`:
`agents.json` (every run's figures), `agents.png` (OOIs tested over episodes),
`coverage-steps.png` (coverage over game steps per agent), `heat-maps.png` (where each agent
spends its steps), `diagnosis.png` (α and the reward terms over time, the share of exploring
steps in cells covered before) and each agent's coverage map of its first seed
(`coverage-AGENT.png`).

    python scripts/bench_agents.py [--models playtester-demo/models] [--seeds 1 2 3 4 5] [--profile quick|cpu|paper-short|paper18|paper|levels] [--resume] [--parallel N]

The models are the inspect (test) and path (preference) policies, e.g. those `playtester demo`
or `scripts/bench_imitation.py` trains. Profiles:

    quick        the built-in demo park, 6 episodes × 400 steps: about ten minutes on 2 CPU cores
    cpu          a 24 × 24 park, 18 episodes × 1000 steps: the paper's protocol scaled to a CPU box
    paper-short  the paper's 40 × 40 park, 6 episodes × 1000 steps: what 2 shared cores allow for
                 5 agents × 5 seeds
    paper18      the paper's 40 × 40 park, 18 episodes × 2000 steps (its reporting point for OOIs tested)
    paper        the paper's protocol: 45 episodes × 2000 steps from random starts on a 40 × 40 park

    levels       Doom levels (Freedoom 2 MAP01, MAP07, MAP10, Freedoom 1 E1M2), rules immortal, 10 episodes
                 × 1000 steps each: reachable walkable coverage (the level's cells reachable from its start,
                 doors open and lifts moved), doors opened and oracles fired, per agent and level; no OOI
                 tests. `expert` there is the scripted level-walk expert (it walks from telemetry and the
                 level's geometry, remembering its cells across episodes: the ceiling, not an agent under
                 test). `--preference` names the path policy the preference explorers keep the style of
                 (trained on level-walk demos of other levels); `--levels` picks some of the four.

With two seeds or more, the table gains one-sided Mann–Whitney U tests over seeds (each explorer
greater than each baseline and than ppgta, each step-scaled one than its default-scaled self) for
coverage and OOIs tested (per level on the levels profile, for reachable coverage), with the rank
effect size (the probability that a run of the first beats one of the second); 5 seeds a side can
reach p = 0.004, 3 no lower than 0.05. `--parallel N` plays N runs at once, each in a process of
its own (a many-core machine: give `--threads 1`). Every agent finds its OOIs with the same trained detector
(`--detector`, default `MODELS/detector.ckpt`), named with its held-out AP in the output;
`--oracle-labels` gives them the engine's labels instead (an ablation, so that what differs
between the agents is only how they explore), and the output says so.

`--device cuda` runs the networks on the GPU (each PPO run's instances served from one process).
Runs stopped before their budget (a machine lent for a while) are compared at one fixed budget
with `--cut N`: each run folder in `--out` copied with its first N episodes and scored there, in
`OUT/first-N`; N must be whole in every run (`--cut max`: the most that is). With `--profile levels`,
OUT is the profile's (a folder per level) and every level's runs are cut at the same N.

Two settings (or two commits) are compared with `--against BASE`: the runs in `--out` against
those in BASE, agent by agent, paired by seed (one instance replays a seed exactly), at `--cut N`
episodes: Wilcoxon's signed-rank test that `--out` is worse, and whether it is no worse within
`MARGINS` (docs/benchmarks/ppo-and-loop.md, "The defaults").
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from playtester.cores import wait_quietly

wait_quietly()  # before torch loads: runs at once must not spin on each other's cores (docs/benchmarks/explorer.md)

import numpy as np

from playtester.perception.candidates import CONFIRM_HITS, CONFIRM_WINDOW

PROFILES = {
    "quick": dict(game="doom:park:1", episodes=6, steps=400),
    "cpu": dict(game="doom:park:1:24x24", episodes=18, steps=1000),
    "paper-short": dict(game="doom:park:1:40x40", episodes=6, steps=1000),
    "paper18": dict(game="doom:park:1:40x40", episodes=18, steps=2000),
    "paper": dict(game="doom:park:1:40x40", episodes=45, steps=2000),
    "levels": dict(game=None, episodes=10, steps=1000),
}
STEP_SCALED = ("ppgta-step", "ppgta-episodic-step", "episodic-step")
"""The preference explorers with `novelty_scale: step` (their novelty at unit scale beside the preference)."""
RETURN_SCALED = ("ppgta-episodic-return",)
"""The preference explorers with `novelty_scale: return` where their own is `step`."""
RUN_MEMORY = ("ppgta-episodic-run",)
"""The episodic explorers whose episodic novelty remembers the run (`episodic_memory: run`)."""
RETURNING = ("ppgta-frontier", "ppgta-episodic-run-frontier", "random-frontier")
"""The agents (`base_agent`) whose episodes after an instance's first return to a frontier place (`returns: 1`)."""
AGENTS = ("ppgta", "ppgta-episodic", "episodic", *STEP_SCALED, *RETURN_SCALED, *RUN_MEMORY, *RETURNING, "inspector", "random",
          "expert")
DEFAULT_AGENTS = ("ppgta", "ppgta-episodic", "episodic", "inspector", "random")
"""The park's default agents; the levels profile adds `expert`."""
BASELINES = ("inspector", "random")
"""What every other agent is tested against; every explorer is also tested against ppgta, and each
step-scaled one against the same explorer with the default scale."""
EXPERT_NOTE = {"park": "scripted path expert (engine telemetry and the park's map: a ceiling)",
               "level": "scripted level-walk expert (engine telemetry and the level's geometry: a ceiling)"}
LEVELS = ("doom:freedoom2:MAP01", "doom:freedoom2:MAP07", "doom:freedoom2:MAP10", "doom:freedoom1:E1M2")
"""The `levels` profile's levels."""


def base_agent(agent: str) -> str:
    """The agent a returning agent is, without its returns (`ppgta-frontier` → `ppgta`)."""
    return agent.removesuffix("-frontier")


def plain(agent: str) -> str:
    """The `--explorer` an agent plays (`ppgta-episodic-step` → `ppgta-episodic`)."""
    return "random" if agent == "expert" else base_agent(agent).removesuffix("-step").removesuffix("-return").removesuffix("-run")


def played_scale(agent: str) -> str:
    """The `novelty_scale` an agent plays: its suffix's, else its explorer's own, as `run explore` plays it."""
    from playtester.exploration.modes import novelty_scale_of

    return "step" if agent in STEP_SCALED else "return" if agent in RETURN_SCALED else novelty_scale_of(plain(agent))


def scale_of(row: dict) -> str:
    """The `novelty_scale` a results row's run played (rows from before it was kept: `-step` agents step, others return)."""
    return row.get("novelty_scale") or ("step" if row["agent"] in STEP_SCALED else "return")


def run_agent(agent: str, seed: int, args, out: Path) -> dict:
    """One agent's run in its own folder; its summary and per-episode counts."""
    from playtester.tester.assemble import assembled
    from playtester.tester.spec import RunSpec
    from playtester.tester.runner import explore_at_random, explore_with_ppo

    folder = out / f"{agent}-seed{seed}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    on_level = args.profile == "levels"  # coverage and oracles only: no OOI tests
    spec = RunSpec(game=args.game, tester=None if on_level else str(args.models / "inspect.ckpt"), run_dir=str(folder),
                   explorer=plain(agent), novelty_scale=played_scale(agent),
                   episodic_memory="run" if base_agent(agent) in RUN_MEMORY else "episode", returns=float(agent in RETURNING),
                   # on a level the preference sets the key map (a park policy has no USE): only the PPO agents take it
                   preference=None if on_level and plain(agent) == "random" else str(args.preference),
                   detector=None if args.oracle_labels or on_level else str(args.detector),
                   oracle_labels=args.oracle_labels and not on_level, episodes=args.episodes,
                   rules=args.rules if on_level else None,
                   steps=args.steps, num_envs=args.envs, rollout=args.rollout, test_steps=args.test_steps, seed=seed,
                   track_every=args.track_every, device=args.device, min_score=args.min_score,
                   confirm_hits=args.confirm_hits, confirm_window=args.confirm_window)
    import yaml

    config = spec.to_config() | ({"agent": EXPERT_NOTE["level" if on_level else "park"]} if agent == "expert" else {})
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    started = time.time()
    if agent == "expert" and on_level:
        walk_with_expert(spec, seed)
    elif agent == "expert":
        explore_with_expert(spec)
    elif spec.explorer == "random" and args.cluster:
        from playtester.tester.cluster import explore_at_random_on_cluster

        explore_at_random_on_cluster(spec, say=lambda m: None)
    elif spec.explorer == "random":
        explore_at_random(assembled(spec), say=lambda m: None)
    else:
        explore_with_ppo(assembled(spec, args.cluster is not None), cluster=args.cluster is not None)
    return score(agent, seed, folder, args.episodes, time.time() - started)


def explore_with_expert(spec) -> None:
    """The scripted path follower (`capture/experts.py`) on one instance of the park, in the same
    tester loop as the explorers: it walks the pathway network by the engine's telemetry and the
    park's map, the ceiling of a pixel-only explorer's pathway coverage."""
    from playtester.capture.experts import PathFollower
    from playtester.capture.games import make_game
    from playtester.tester.instance import tester_env

    game = make_game(spec.game, **spec.game_options())
    layout = getattr(getattr(game.unwrapped, "scenario", None), "layout", None)
    if layout is None:
        game.close()
        raise SystemExit(f"error: the expert agent walks the park's map; {spec.game} has none")
    env = tester_env(spec, game)
    follower = PathFollower(layout, game.unwrapped.keymap, np.random.default_rng(spec.seed))
    try:
        while True:
            _, info = env.reset()
            if env.idle or env.stopped is not None:
                return
            follower.reset(info)
            for _ in range(spec.steps):
                _, _, terminated, truncated, info = env.step(follower.act(info))
                if terminated or truncated or "position" not in info:
                    break
    finally:
        env.close()


def walk_with_expert(spec, seed: int) -> None:
    """The level-walk expert plays the run's episodes in the same tester loop (logs, oracles) as the
    agents, remembering the cells it walked across episodes."""
    import numpy as np

    from playtester.capture.games import make_game
    from playtester.capture.level_walk import LevelWalker
    from playtester.tester.instance import tester_env

    env = tester_env(spec, make_game(spec.game, **spec.game_options()))
    try:
        game = env.unwrapped
        rules = getattr(game, "rules", None)
        walker = LevelWalker(game.graph, game.keymap, np.random.default_rng(seed), jitter=0.0, remember=True,
                             monsters=rules != "no-monsters", standing=rules == "immortal")
        for episode in range(spec.episodes):
            _, info = env.reset(seed=seed * 1000 + episode)
            walker.reset(info)
            while True:
                _, _, terminated, truncated, info = env.step(walker.act(info))
                if terminated or truncated:
                    break
    finally:
        env.close()


def score(agent: str, seed: int, folder: Path, episodes: int, seconds: float) -> dict:
    """A finished run's figures, from its folder (its report built again): pathway and walkable
    coverage, coverage over game steps, the known OOIs tested after each episode (a test of a
    detection no known OOI matched counts apart, in `tests_unmatched`), tests and their success
    rate, the share of exploring steps in cells covered before, and the explorer's logged α and
    reward terms."""
    from agent_figures import coverage_over_steps, explorer_scalars, revisits
    from playtester.report.build import build_report, known_ids, tested_counts
    from playtester.report.maps import map_source
    from playtester.tester.runlog import read_jsonl
    import yaml

    build_report(folder)
    summary = json.loads((folder / "summary.json").read_text())
    tests = list(read_jsonl(folder / "tests.jsonl"))
    config = yaml.safe_load((folder / "config.yaml").read_text())
    src = map_source(folder, config)[0]
    known = known_ids(src)
    trajectory = list(read_jsonl(folder / "trajectory.jsonl"))
    returns = list(read_jsonl(folder / "returns.jsonl"))
    level = summary.get("level") or {}
    coverage = summary.get("coverage", {})
    return {
        "agent": agent, "seed": seed, "seconds": seconds, "game": summary["game"],
        "novelty_scale": config.get("novelty_scale") or "return",
        "episodic_memory": config.get("episodic_memory") or "episode",
        "pathway_share": coverage.get("pathway_share"), "walkable_share": coverage.get("walkable_share"),
        "reachable_share": coverage.get("reachable_share"), "reachable_cumulative": coverage.get("reachable_share_cumulative"),
        "doors_opened": (level.get("doors") or {}).get("opened"), "doors": (level.get("doors") or {}).get("total"),
        "findings": summary["findings"], "steps": summary["steps"], "episodes": summary["episodes"],
        "tested_per_episode": tested_counts(tests, episodes, known),
        "tests": len(tests), "tests_unmatched": summary.get("tests_unmatched", 0), "success_rate": summary["test_success_rate"],
        "oois_total": summary.get("oois_total"), "objects_found_by": summary["objects_found_by"],
        "test_precision": summary.get("test_precision"),
        "success_on_real": summary.get("test_success_on_real"), "failures_on_real": summary.get("test_failures_on_real", {}),
        "explore_steps": sum(r.get("mode", "explore") == "explore" for r in trajectory),
        "return_steps": sum(r.get("mode") == "return" for r in trajectory),
        "returns": len(returns), "returns_reached": sum(r["reached"] for r in returns),
        "coverage_curve": coverage_over_steps(src, trajectory) if src is not None else None,
        "revisits": revisits(src, trajectory, episodes) if src is not None else None,
        "scalars": explorer_scalars(folder),
    }


COVERAGE_KEYS = ("pathway_share", "reachable_share", "walkable_share")
"""A run's coverage, the first of these it has: of the park's pathways, of a level's cells reachable
from its start, of the walkable cells."""


def coverage_of(row: dict) -> float | None:
    """A run's coverage (`COVERAGE_KEYS`)."""
    return next((row[key] for key in COVERAGE_KEYS if row.get(key) is not None), None)


def measure_name(results: list[dict]) -> str:
    key = next((key for key in COVERAGE_KEYS if any(r.get(key) is not None for r in results)), "walkable_share")
    return f"{key.removesuffix('_share')} coverage"


def mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def table(results: list[dict], episodes: int) -> str:
    """Per agent: coverage (mean, each seed's) and against random's, and where the runs tested
    objects (not on the levels profile) the OOIs tested and the tests' figures."""
    marks = sorted({1, max(1, episodes // 2), episodes})
    testing = any(r.get("oois_total") for r in results)
    head = (["agent", "seeds", measure_name(results), "× random"]
            + ([f"OOIs tested after {e} ep." for e in marks] + ["tests (of no known OOI)", "test precision",
                                                                "OOIs tested a 10 000 steps", "success rate (on real objects)"]
               if testing else []) + ["minutes"])
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] + ["---:"] * (len(head) - 1)) + " |"]
    random_share = mean([coverage_of(r) for r in results if r["agent"] == "random"])
    for agent in AGENTS:
        rows = [r for r in results if r["agent"] == agent]
        if not rows:
            continue
        share, rate = mean([coverage_of(r) for r in rows]), mean([r["success_rate"] for r in rows])
        per_seed = " / ".join("–" if coverage_of(r) is None else f"{100 * coverage_of(r):.1f}" for r in sorted(rows, key=lambda r: r["seed"]))
        cells = [agent, str(len(rows)), "–" if share is None else f"{100 * share:.1f} % ({per_seed})",
                 "–" if share is None or not random_share else f"×{share / random_share:.2f}"]
        if testing:
            cells += [f"{np.mean([r['tested_per_episode'][e - 1] for r in rows]):.1f}" for e in marks]
            real_rate = mean([r.get("success_on_real") for r in rows])
            tests, phantom = sum(r["tests"] for r in rows), sum(r.get("tests_unmatched", 0) for r in rows)
            steps = sum(r.get("steps") or 0 for r in rows)
            cells += [f"{np.mean([r['tests'] for r in rows]):.1f} ({np.mean([r.get('tests_unmatched', 0) for r in rows]):.1f})",
                      f"{100 * (1 - phantom / tests):.0f} %" if tests else "–",
                      f"{1e4 * sum(r['tested_per_episode'][-1] for r in rows) / steps:.1f}" if steps else "–",
                      ("–" if rate is None else f"{100 * rate:.0f} %") + ("" if real_rate is None else f" ({100 * real_rate:.0f} %)")]
        cells.append("–" if any(np.isnan(r["seconds"]) for r in rows) else f"{np.mean([r['seconds'] for r in rows]) / 60:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparisons(agents: set[str]) -> list[tuple[str, str]]:
    """(agent, baseline) pairs to test, one-sided (agent greater): every explorer against each
    baseline and against ppgta, and each explorer against its own at another novelty scale."""
    explorers = [a for a in AGENTS if a not in BASELINES and a != "expert"]
    pairs = [(a, b) for a in explorers for b in (*BASELINES, "ppgta") if a != b]
    pairs += [(a, plain(a)) for a in STEP_SCALED if played_scale(plain(a)) != "step"]  # unit scale against return
    pairs += [(plain(a), a) for a in RETURN_SCALED]
    pairs += [(a, plain(a)) for a in RUN_MEMORY]
    pairs += [(a, base_agent(a)) for a in RETURNING]
    return [(a, b) for a, b in dict.fromkeys(pairs) if a in agents and b in agents]


def significance(results: list[dict]) -> str:
    """Mann–Whitney U over seeds (`comparisons`) for coverage and the OOIs tested by the last
    episode (where any run tested one), with the effect size U / (n₁ n₂): the probability that a
    run of the first agent beats one of the second (ties half); empty without two seeds of both
    agents of any pair."""
    from scipy.stats import mannwhitneyu

    def values(agent: str, key: str) -> list[float]:
        rows = [r for r in results if r["agent"] == agent]
        return [r["tested_per_episode"][-1] if key == "oois" else coverage_of(r) for r in rows
                if key == "oois" or coverage_of(r) is not None]

    measures = [("coverage", measure_name(results))] + ([("oois", "OOIs tested")] if any(r["tested_per_episode"][-1] for r in results) else [])
    lines = []
    for agent, baseline in comparisons({r["agent"] for r in results}):
        for key, name in measures:
            ours, theirs = values(agent, key), values(baseline, key)
            if len(ours) < 2 or len(theirs) < 2:
                continue
            test = mannwhitneyu(ours, theirs, alternative="greater")
            lines.append(f"| {agent} vs {baseline} | {name} | {np.mean(ours):.3g} vs {np.mean(theirs):.3g} | "
                         f"U = {test.statistic:.1f} | {test.statistic / (len(ours) * len(theirs)):.2f} | p = {test.pvalue:.3f} |")
    if not lines:
        return ""
    return "\n".join(["| agents | measure | means | U | P(first > second) | p |", "| --- | --- | ---: | ---: | ---: | ---: |", *lines])


def greater(ours: list[float], theirs: list[float]) -> str:
    """One-sided Mann–Whitney U (ours greater) as table cells: `U = … | P(first > second) | p = …`."""
    from scipy.stats import mannwhitneyu

    test = mannwhitneyu(ours, theirs, alternative="greater")
    return f"U = {test.statistic:.1f} | {test.statistic / (len(ours) * len(theirs)):.2f} | p = {test.pvalue:.3f}"


MARGINS = {"coverage": 0.05, "oois": 1.5}
"""How much worse than the base a setting may be and still count as no worse (`compare`): 5
points of pathway coverage, 1.5 known OOIs tested (of the `cpu` park's 16)."""


def compare(ours: list[dict], theirs: list[dict]) -> str:
    """Runs of one setting against another's, per agent, paired by seed: the means, the mean
    difference with its 95 % interval (t), Wilcoxon's signed-rank p that ours is worse (one-sided)
    and two-sided, and whether ours is no worse: not worse at p < 0.05 and the mean difference above
    −`MARGINS`. Only the seeds both hold count."""
    from scipy.stats import t as student, wilcoxon

    lines = ["| agent | measure | seeds | ours | base | difference (95 % interval) | p worse | p two-sided | no worse (margin) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for agent in AGENTS:
        mine = {r["seed"]: r for r in ours if r["agent"] == agent}
        base = {r["seed"]: r for r in theirs if r["agent"] == agent}
        seeds = sorted(set(mine) & set(base))
        if not seeds:
            continue
        for key, name in (("coverage", "pathway coverage"), ("oois", "known OOIs tested")):
            def value(r: dict) -> float:
                return float(r["tested_per_episode"][-1]) if key == "oois" else float(r["pathway_share"] or 0.0)

            a, b = np.array([value(mine[s]) for s in seeds]), np.array([value(base[s]) for s in seeds])
            d = a - b
            half = (student.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
            same = not np.any(d)
            worse = 1.0 if same or len(d) < 2 else float(wilcoxon(a, b, alternative="less").pvalue)
            both = 1.0 if same or len(d) < 2 else float(wilcoxon(a, b).pvalue)
            ok = worse >= 0.05 and d.mean() > -MARGINS[key]
            scale, unit = (100, " %") if key == "coverage" else (1, "")
            lines.append(f"| {agent} | {name} | {len(d)} | {scale * a.mean():.1f}{unit} | {scale * b.mean():.1f}{unit} | "
                         f"{scale * d.mean():+.1f} ({scale * (d.mean() - half):+.1f} to {scale * (d.mean() + half):+.1f}) | "
                         f"{worse:.3f} | {both:.3f} | {'yes' if ok else 'NO'} (−{scale * MARGINS[key]:g}{unit}) |")
    return "\n".join(lines)


def copy_coverage_maps(results: list[dict], out: Path) -> None:
    """Each agent's coverage map of its first seed, side by side in `out` (the paper's Figure 7)."""
    for agent in AGENTS:
        seeds = sorted(r["seed"] for r in results if r["agent"] == agent)
        source = out / f"{agent}-seed{seeds[0]}" / "coverage.png" if seeds else None
        if source is not None and source.exists():
            shutil.copyfile(source, out / f"coverage-{agent}.png")


def plot(results: list[dict], episodes: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from agent_figures import COLOURS

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    for agent in AGENTS:
        rows = [r["tested_per_episode"] for r in results if r["agent"] == agent]
        if rows:
            ax.plot(range(1, episodes + 1), np.mean(rows, axis=0), marker="o", color=COLOURS[agent], label=agent)
    ax.set_xlabel("episodes")
    ax.set_ylabel("OOIs tested (mean over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from playtester.tester.spec import TRACK_EVERY

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=Path("playtester-demo/models"), help="folder with inspect.ckpt and path.ckpt")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                        help="quick (6 × 400 on the demo park), cpu (18 × 1000 on 24 × 24), paper-short (6 × 1000 on 40 × 40), "
                             "paper18 (18 × 2000 on 40 × 40) or paper (45 × 2000 on 40 × 40)")
    parser.add_argument("--full", action="store_true", help="the same as --profile paper")
    parser.add_argument("--game", default=None, help="park spec (default: the profile's)")
    parser.add_argument("--levels", nargs="+", default=list(LEVELS), help="the levels profile's levels (game specs)")
    parser.add_argument("--rules", default="immortal", choices=("immortal", "no-monsters", "play"),
                        help="the levels profile's tester rules")
    parser.add_argument("--preference", type=Path, default=None,
                        help="the path policy PPGTA keeps the style of (and Inspector starts from); default MODELS/path.ckpt")
    parser.add_argument("--episodes", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--agents", nargs="+", default=None, choices=AGENTS,
                        help=f"default: {' '.join(DEFAULT_AGENTS)}, and expert on the levels profile (the park's path "
                             "follower or the level-walk expert: telemetry-driven ceilings, not agents under test)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs played at once, each in a process of its own (on a many-core machine, with --threads 1)")
    parser.add_argument("--detector", type=Path, default=None, help="detector checkpoint (default: MODELS/detector.ckpt)")
    parser.add_argument("--oracle-labels", action="store_true", help="find OOIs through the engine's labels (an ablation)")
    parser.add_argument("--envs", type=int, default=2, help="game instances of the PPO explorers")
    parser.add_argument("--rollout", type=int, default=64)
    parser.add_argument("--track-every", type=int, default=TRACK_EVERY,
                        help="during an OOI test, the detector every this many steps, the tracker in between (the run's track_every)")
    parser.add_argument("--test-steps", type=int, default=None, help="steps of one OOI test (default: the policy's demo length)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of this process")
    parser.add_argument("--min-score", type=float, default=None,
                        help="the detections the agents test: confidence at least this (the run's min_score; default: the "
                             "detector's per-class thresholds, else 0.6)")
    parser.add_argument("--confirm-hits", type=int, default=CONFIRM_HITS,
                        help="a detection is tested once found in this many of the last --confirm-window detector passes (the run's confirm_hits)")
    parser.add_argument("--confirm-window", type=int, default=CONFIRM_WINDOW, help="the passes counted (the run's confirm_window)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where the runs' networks run (cuda serves every instance's detector and test policy from one process)")
    parser.add_argument("--cut", type=cut_value, default=None, metavar="N|max",
                        help="run nothing: score the runs already in OUT at their first N episodes (runs stopped early, "
                             "compared at one fixed budget; max: the most whole episodes every run played), in OUT/first-N")
    parser.add_argument("--against", type=Path, default=None, metavar="BASE",
                        help="run nothing: score the runs in OUT against those in BASE (the same agents and seeds, other "
                             "settings or code), seed by seed, at --cut N episodes (default: --episodes): `compare`'s table")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_agents"))
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs already in OUT/results.jsonl made with the same settings (each finished run is written there) and run the rest")
    parser.add_argument("--cluster", default=None, help="the game instances on Ray: ray, auto or ray://HOST:PORT (as `playtester run explore --cluster`)")
    args = parser.parse_args(argv)
    profile = PROFILES["paper" if args.full else args.profile]
    for key, value in profile.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.cut is not None and args.profile == "levels":
        try:
            results, args.episodes = cut_levels(args.out, args.cut, args.parallel)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        args.out = args.out / f"first-{args.episodes}"
        return level_report(results, args)
    if args.against is not None:  # scoring only: OUT's runs against AGAINST's, seed by seed
        try:
            episodes = args.cut or args.episodes
            if episodes == "max":
                episodes = min(episodes_every_run_played(args.out), episodes_every_run_played(args.against))
            ours, theirs = cut_runs(args.out, episodes, args.parallel), cut_runs(args.against, episodes, args.parallel)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{args.out} against {args.against}, at {episodes} episodes:")
        print(compare(ours, theirs))
        return 0
    if args.cut is not None:  # scoring only: no models needed
        try:
            if args.cut == "max":
                args.cut = episodes_every_run_played(args.out)
            results, args.out = cut_runs(args.out, args.cut, args.parallel), args.out / f"first-{args.cut}"
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        args.episodes = args.cut
        return report(results, args)
    if args.preference is None:
        args.preference = args.models / "path.ckpt"
    if args.agents is None:
        args.agents = [*DEFAULT_AGENTS, "expert"] if args.profile == "levels" else list(DEFAULT_AGENTS)
    if args.profile == "levels":
        return run_levels(args)
    if args.detector is None:
        args.detector = args.models / "detector.ckpt"
    needed = [args.models / "inspect.ckpt", args.models / "path.ckpt"] + ([] if args.oracle_labels else [args.detector])
    for path in needed:
        if not path.exists():
            print(f"error: {path} is missing; run `playtester demo` first (it trains all three), give --models DIR "
                  "or --detector CKPT, or --oracle-labels for the engine's labels (an ablation)", file=sys.stderr)
            return 2
    import torch

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    from playtester.tester.object_source import ORACLE_LABELS, describe_detector

    found_by = ORACLE_LABELS if args.oracle_labels else describe_detector(args.detector)
    print(f"{args.game}: {args.episodes} episodes × {args.steps} steps, seeds {args.seeds}, agents {', '.join(args.agents)}; "
          f"objects found by {found_by}")
    import contextlib

    from playtester.errors import UserError
    from playtester.tester.cluster import check_cluster, ray_session

    with contextlib.ExitStack() as stack:
        try:
            if check_cluster(args.cluster):
                stack.enter_context(ray_session(args.cluster, args.envs))
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        results = run_agents(args)
    return report(results, args)


def run_levels(args) -> int:
    """The levels profile: every agent on every level and seed, a table per level, `levels.json`."""
    if any(plain(a) != "random" for a in args.agents) and not args.preference.exists():
        print(f"error: {args.preference} is missing; give --preference PATH.ckpt (a path policy trained on level-walk demos)",
              file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(args.threads)
    root = args.out
    results = []
    print(f"levels: {', '.join(args.levels)}; {args.episodes} episodes × {args.steps} steps, seeds {args.seeds}, agents "
          f"{', '.join(args.agents)}; rules {args.rules}; preference {args.preference}")
    for level in args.levels:
        args.game = level
        args.out = root / level.replace(":", "_").replace("/", "_")
        args.out.mkdir(parents=True, exist_ok=True)
        rows = run_agents(args)
        results += [{**row, "level": level} for row in rows]
        figures(rows, args.out)
    args.out = root
    return level_report(results, args)


def level_report(results: list[dict], args) -> int:
    """The levels table, the tests per level (`level_significance`), and `levels.json` in `args.out`."""
    print()
    print(level_table(results, args))
    tests = level_significance(results)
    if tests:
        print("\nMann–Whitney U over seeds on reachable coverage, one-sided (the first agent greater):")
        print(tests)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "levels.json").write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out / 'levels.json'}")
    return 0


def level_significance(results: list[dict]) -> str:
    """Per level, one-sided Mann–Whitney U over seeds of reachable coverage for the pairs
    `comparisons` names (every explorer against the baselines and against PPGTA), with the effect
    size; empty where no pair has two seeds a side."""
    lines = []
    for level in dict.fromkeys(r["level"] for r in results):
        share = {a: [r["reachable_share"] for r in results if r["level"] == level and r["agent"] == a
                     and r["reachable_share"] is not None] for a in AGENTS}
        for agent, baseline in comparisons({a for a, values in share.items() if values}):
            ours, theirs = share[agent], share[baseline]
            if len(ours) >= 2 and len(theirs) >= 2:
                lines.append(f"| {level.split(':', 1)[1]} | {agent} vs {baseline} | {100 * np.mean(ours):.1f} vs "
                             f"{100 * np.mean(theirs):.1f} % | {greater(ours, theirs)} |")
    if not lines:
        return ""
    return "\n".join(["| level | agents | reachable coverage | U | P(first > second) | p |",
                      "| --- | --- | ---: | ---: | ---: | ---: |", *lines])


def level_table(results: list[dict], args) -> str:
    """Per level and agent: reachable coverage (mean ± sd over seeds), against random, walkable coverage,
    doors opened, findings by kind, and whether every episode played all its steps."""
    head = ["level", "agent", "seeds", "reachable coverage", "× random", "walkable coverage", "doors opened", "findings",
            "every episode all its steps", "minutes"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + " |"]
    for level in dict.fromkeys(r["level"] for r in results):
        rows = [r for r in results if r["level"] == level]
        random_reach = mean([r["reachable_share"] for r in rows if r["agent"] == "random"])
        for agent in AGENTS:
            mine = [r for r in rows if r["agent"] == agent]
            if not mine:
                continue
            reach = [r["reachable_share"] for r in mine]
            kinds = {}
            for r in mine:
                for k, v in r["findings"].items():
                    kinds[k] = kinds.get(k, 0) + v
            full = all(r["steps"] == args.episodes * args.steps and r["episodes"] == args.episodes for r in mine)
            if args.cut is not None:  # scored at the cut: the steps of its first episodes
                full = all(r["steps"] == args.episodes * r["steps_per_episode"] for r in mine)
            lines.append("| " + " | ".join([
                level.split(":", 1)[1], agent, str(len(mine)), f"{100 * np.mean(reach):.1f} ± {100 * np.std(reach):.1f} %",
                "–" if not random_reach else f"{np.mean(reach) / random_reach:.2f}", f"{100 * mean([r['walkable_share'] for r in mine]):.1f} %",
                f"{mean([r['doors_opened'] for r in mine]):.1f} of {mine[0]['doors']}",
                ", ".join(f"{k} {v / len(mine):.1f}" for k, v in sorted(kinds.items())) or "none",
                "yes" if full else "no",
                "–" if any(np.isnan(r["seconds"]) for r in mine) else f"{np.mean([r['seconds'] for r in mine]) / 60:.1f}"]) + " |")
    return "\n".join(lines)


def report(results: list[dict], args) -> int:
    """The table, the significance tests, the coverage maps and the figures of `results` in `args.out`."""
    print()
    print(table(results, args.episodes))
    tests = significance(results)
    if tests:
        print("\nMann–Whitney U over seeds, one-sided (the first agent greater):")
        print(tests)
    (args.out / "agents.json").write_text(json.dumps(results, indent=1))
    from agent_figures import diagnosis_table

    print("\nWhy (means over each agent's seeds; diagnosis.png draws them over time):")
    print(diagnosis_table(results, agents_in(results)))
    plot(results, args.episodes, args.out / "agents.png")
    figures(results, args.out)
    print(f"\nwrote {args.out / 'agents.json'}, agents.png, coverage-steps.png, heat-maps.png and diagnosis.png")
    return 0


def agents_in(results: list[dict]) -> tuple[str, ...]:
    """The agents that have runs in `results`, in `AGENTS`' order."""
    return tuple(a for a in AGENTS if any(r["agent"] == a for r in results))


def figures(results: list[dict], out: Path) -> None:
    """Each agent's coverage map of its first seed, coverage over steps, the heat maps and the
    diagnosis of `results`, in `out` (where their run folders are)."""
    from agent_figures import heat_maps, plot_coverage_over_steps, plot_diagnosis, plot_heat_maps

    copy_coverage_maps(results, out)
    agents = agents_in(results)
    plot_coverage_over_steps(results, agents, out / "coverage-steps.png")
    plot_heat_maps(heat_maps(results, out, agents), out / "heat-maps.png")
    plot_diagnosis(results, agents, out / "diagnosis.png")


def settings(args) -> dict:
    """What makes two runs of an agent and seed the same run: `--resume` keeps a run only if these match."""
    keys = ("game", "episodes", "steps", "models", "detector", "oracle_labels", "envs", "rollout", "track_every", "test_steps",
            "device", "min_score", "preference", "rules",
            "confirm_hits", "confirm_window")
    return same_files({key: str(getattr(args, key)) for key in keys})


def same_files(budget: dict) -> dict:
    """`budget` with its files as absolute paths: `demo/models` and `/work/demo/models` are one folder."""
    return {key: str(Path(value).resolve()) if key in ("models", "detector", "preference") and value != "None" else value
            for key, value in budget.items()}


def kept_run(row: dict, folder: Path, episodes: int) -> dict | None:
    """A kept row scored again from its folder, or None where the folder no longer holds that run
    (a later run of the same agent and seed began there and was stopped): it is run again."""
    try:
        rescored = score(row["agent"], row["seed"], folder, episodes, row["seconds"])
    except FileNotFoundError:
        rescored = None
    if rescored is None or rescored["steps"] != row["steps"]:
        print(f"--resume: {folder} no longer holds the run of its row ({row['steps']} steps); it is run again")
        return None
    return rescored


def episodes_done(folder: Path, steps: int) -> int:
    """How many of a run's first episodes were played to their end (a row at step `steps` - 1, or a
    later episode on the same instance: a crashed episode ends early)."""
    from playtester.tester.runlog import read_jsonl

    last: dict[int, tuple[int, int]] = {}  # episode -> (instance, last step)
    for row in read_jsonl(folder / "trajectory.jsonl"):
        last[row["episode"]] = (row["env"], max(row["t"], last.get(row["episode"], (0, -1))[1]))
    later = {}
    for episode, (env, _) in last.items():
        later[env] = max(later.get(env, -1), episode)
    n = 0
    while n in last and (last[n][1] >= steps - 1 or later[last[n][0]] > n):
        n += 1
    return n


def cut_value(text: str) -> int | str:
    """`--cut`'s value: a number of episodes (at least 1), or `max`."""
    if text == "max":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of episodes (1 or more) or max")
    return int(text)


def run_folders(out: Path) -> list[tuple[str, int, Path]]:
    """The run folders in `out` (AGENT-seedS, with their config.yaml): (agent, seed, folder)."""
    runs = []
    for folder in sorted(out.glob("*-seed*")):
        agent, _, seed = folder.name.rpartition("-seed")
        if agent in AGENTS and seed.isdigit() and (folder / "config.yaml").exists():
            runs.append((agent, int(seed), folder))
    return runs


def episodes_every_run_played(out: Path) -> int:
    """The most whole episodes every run folder in `out` has played (`--cut max`); a ValueError
    where none is there or one has not finished its first."""
    import yaml

    played = {folder.name: episodes_done(folder, int(yaml.safe_load((folder / "config.yaml").read_text())["steps"]))
              for _, _, folder in run_folders(out)}
    if not played:
        raise ValueError(f"--cut max: {out} holds no run folders (AGENT-seedS)")
    fewest = min(played, key=played.get)
    if played[fewest] == 0:
        raise ValueError(f"--cut max: {out / fewest} has not played a whole episode; nothing to compare")
    return played[fewest]


def cut_levels(root: Path, cut: int | str, parallel: int = 1) -> tuple[list[dict], int]:
    """The levels profile's runs (`root/LEVEL/AGENT-seedS`) scored at their first N episodes, every
    level at the same N (`max`: the most every run of every level played), `parallel` at once; and N."""
    folders = sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*-seed*/config.yaml"))) if root.is_dir() else []
    if not folders:
        raise ValueError(f"--cut {cut}: {root} holds no level folders (LEVEL/AGENT-seedS); give the levels profile's --out")
    episodes = min(episodes_every_run_played(f) for f in folders) if cut == "max" else cut
    return [{**row, "level": row["game"]} for folder in folders for row in cut_runs(folder, episodes, parallel)], episodes


def scalars_until(folder: Path, explore_steps: int) -> dict[str, list[list[float]]]:
    """The explorer's logged scalars of the run in `folder` (`agent_figures.explorer_scalars`) up to
    its `explore_steps`-th exploring step: a cut run's diagnosis (its copy keeps no log)."""
    from agent_figures import explorer_scalars

    return {tag: [point for point in series if point[0] <= explore_steps] for tag, series in explorer_scalars(folder).items()}


def cut_runs(out: Path, episodes: int, parallel: int = 1) -> list[dict]:
    """Every run folder in `out` (AGENT-seedS) copied to `out/first-N` with its first `episodes`
    episodes only (rows, tests, claims and findings of later episodes left out), then scored there,
    `parallel` at once. A ValueError names a run that has not played that many."""
    import yaml

    from playtester.files import write_text_atomic

    dest = out / f"first-{episodes}"
    jobs, steps = [], []
    for folder in sorted(out.glob("*-seed*")):
        agent, _, seed = folder.name.rpartition("-seed")
        if agent not in AGENTS or not seed.isdigit() or not (folder / "config.yaml").exists():
            continue
        config = yaml.safe_load((folder / "config.yaml").read_text())
        done = episodes_done(folder, int(config["steps"]))
        if done < episodes:
            raise ValueError(f"--cut {episodes}: {folder} has played {done} whole episodes; cut at {done} or fewer")
        target = dest / folder.name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in folder.glob("*.jsonl"):
            kept = [line for line in path.read_text().splitlines(keepends=True)
                    if line.strip() and line.endswith("\n") and json.loads(line).get("episode", 0) < episodes]
            (target / path.name).write_text("".join(kept))
        for finding in (folder / "findings").glob("*/finding.json") if (folder / "findings").exists() else []:
            if json.loads(finding.read_text()).get("episode", 0) < episodes:
                shutil.copytree(finding.parent, target / "findings" / finding.parent.name)
        write_text_atomic(target / "config.yaml", yaml.safe_dump({**config, "episodes": episodes, "run_dir": str(target)}, sort_keys=False))
        jobs.append((agent, int(seed), target, episodes, float("nan")))  # its minutes for N episodes are not known
        steps.append(int(config["steps"]))
    if parallel > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(parallel, len(jobs) or 1)) as pool:
            rows = list(pool.map(score, *zip(*jobs)))
    else:
        rows = [score(*job) for job in jobs]
    results = [{**row, "steps_per_episode": n, "scalars": scalars_until(out / job[2].name, row["explore_steps"])}
               for row, n, job in zip(rows, steps, jobs)]
    if not results:
        raise ValueError(f"--cut {episodes}: {out} holds no run folders (AGENT-seedS)")
    return results


def run_agents(args) -> list[dict]:
    """Every agent on every seed; agents alternate within each seed, so the machine's noise falls on all alike.
    Each finished run is added to `OUT/results.jsonl`; with `--resume` the runs there are kept."""
    log = args.out / "results.jsonl"
    done = {}
    if args.resume and log.exists():
        from playtester.files import write_text_atomic

        whole = []
        for line in log.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line torn by a stop while it was written: that run is run again
                continue
            whole.append(line + "\n")
            if same_files({"device": "cpu", "min_score": "0.6", "preference": str(args.models / "path.ckpt"), "rules": "immortal",
                           "confirm_hits": "1", "confirm_window": "1", **row.get("budget", {})}) == settings(args) \
                    and scale_of(row) == played_scale(row["agent"]):
                done[row["agent"], row["seed"]] = row  # (rows from before these options)
        write_text_atomic(log, "".join(whole))  # without the torn line, so that the next run's line stands alone
        print(f"--resume: {len(done)} runs kept from {log}")
    elif log.exists():
        log.unlink()
    results, jobs = [], []
    for seed in args.seeds:
        for agent in args.agents:
            kept = (agent, seed) in done and kept_run(done[agent, seed], args.out / f"{agent}-seed{seed}", args.episodes)
            if kept:  # scored again from its folder: a fix to the scoring reaches it too
                results.append(kept)
            else:
                jobs.append((agent, seed))

    def finished(result: dict) -> None:
        result["budget"] = settings(args)
        with log.open("a") as f:
            f.write(json.dumps(result) + "\n")
        results.append(result)
        if args.profile == "levels":
            print(f"  {args.game} {result['agent']:9s} seed {result['seed']}: reachable coverage {result['reachable_share']:.3f}, "
                  f"doors opened {result['doors_opened']} of {result['doors']}, findings {result['findings']} "
                  f"({result['seconds'] / 60:.1f} min)", flush=True)
            return
        print(f"  {result['agent']:9s} seed {result['seed']}: coverage {coverage_of(result)}, OOIs tested "
              f"{result['tested_per_episode']}, tests {result['tests']}, success {result['success_rate']} "
              f"({result['seconds'] / 60:.1f} min)", flush=True)

    if args.parallel <= 1:
        for agent, seed in jobs:
            finished(run_agent(agent, seed, args, args.out))
        return results
    from concurrent.futures import as_completed

    from playtester.workers import process_pool

    # Each run in a process of its own, as many at once as asked, ended with this one (a killed
    # benchmark's workers must not go on writing into its run folders); the runs' own game
    # processes are their children.
    with process_pool(args.parallel, _worker_threads, (args.threads,)) as pool:
        running = [pool.submit(run_agent, agent, seed, args, args.out) for agent, seed in jobs]
        for future in as_completed(running):
            finished(future.result())
    return results


def _worker_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


if __name__ == "__main__":
    sys.exit(main())
