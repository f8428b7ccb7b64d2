"""What `bench_agents.py` draws from its run folders: coverage over steps, where each agent spends
its steps, and why an agent flattens (α and the reward terms over time, the share of steps in
cells already covered).

Each figure is made from a run folder's own files (`trajectory.jsonl`, the explorer's TensorBoard
log), so that runs scored again with `--resume` or `--cut` draw the same. Positions are the
engine's telemetry: scoring only, never the agent's input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

COLOURS = {"ppgta": "#c0392b", "ppgta-episodic": "#e67e22", "episodic": "#27ae60", "inspector": "#2c7fb8",
           "ppgta-step": "#8e44ad", "ppgta-episodic-step": "#f1c40f", "episodic-step": "#16a085",
           "ppgta-episodic-run": "#d35400", "random": "#7f7f7f", "expert": "#000000"}
"""One colour per agent, the same in every figure."""
CURVE_POINTS = 60
"""Points of a run's coverage-over-steps curve."""
DIAGNOSIS_TAGS = ("charts/alpha", "rewards/intrinsic", "rewards/episodic", "rewards/preference", "rewards/novelty")
"""The explorer's TensorBoard scalars the diagnosis draws (those a run lacks are left out)."""


def cells_of(src, trajectory: list[dict[str, Any]]) -> list[tuple[int, int] | None]:
    """Each row's coverage cell `(row, col)` of the map's grid (None: no position or off the grid)."""
    from playtester.report.coverage import OccupancyGrid

    grid = OccupancyGrid(src.bounds, src.cell)
    return [grid.index(float(r["position"][0]), float(r["position"][1])) if r.get("position") else None for r in trajectory]


def coverage_mask(src) -> tuple[np.ndarray | None, str]:
    """The cells coverage is the share of: the pathways where the map has them, else a level's
    cells reachable from its start, else the walkable cells; and its name."""
    if src.pathway_mask is not None:
        return src.pathway_mask, "pathway"
    if getattr(src, "reachable_mask", None) is not None:
        return src.reachable_mask, "reachable"
    return src.walkable_mask, "walkable"


def coverage_over_steps(src, trajectory: list[dict[str, Any]], points: int = CURVE_POINTS) -> dict[str, list]:
    """The share of the coverage cells visited after each of `points` game-step counts, evenly
    spaced up to the run's length (rows in the order played: with several instances, steps of all)."""
    mask, name = coverage_mask(src)
    cells = cells_of(src, trajectory)
    total = int(mask.sum()) if mask is not None else 0
    steps = [int(round(n)) for n in np.linspace(0, len(cells), points + 1)[1:]]
    seen: set[tuple[int, int]] = set()
    shares, i = [], 0
    for upto in steps:
        for cell in cells[i:upto]:
            if cell is not None and mask is not None and mask[cell]:
                seen.add(cell)
        i = upto
        shares.append(len(seen) / total if total else 0.0)
    return {"measure": name, "steps": steps, "share": shares}


def revisits(src, trajectory: list[dict[str, Any]], episodes: int) -> dict[str, list[float]]:
    """Per episode, the share of its exploring steps (not OOI tests) spent in cells already
    covered: earlier in the run (`run`), or earlier in the same episode (`episode`). A flattening
    agent shows a rising `run` share: its steps go where it has been."""
    cells = cells_of(src, trajectory)
    in_run: set[tuple[int, int]] = set()
    in_episode: dict[tuple[int, int], set] = {}
    counts = np.zeros((episodes, 3))  # exploring steps, in run-covered cells, in episode-covered cells
    for row, cell in zip(trajectory, cells):
        e = int(row["episode"])
        if cell is None or e >= episodes:
            continue
        key = (e, int(row.get("env", 0)))
        mine = in_episode.setdefault(key, set())
        if row.get("mode", "explore") == "explore":
            counts[e] += (1, cell in in_run, cell in mine)
        in_run.add(cell)
        mine.add(cell)
    with np.errstate(invalid="ignore", divide="ignore"):
        run_share = np.where(counts[:, 0] > 0, counts[:, 1] / counts[:, 0], np.nan)
        episode_share = np.where(counts[:, 0] > 0, counts[:, 2] / counts[:, 0], np.nan)
    return {"run": [float(v) for v in run_share], "episode": [float(v) for v in episode_share]}


def visit_counts(src, trajectory: list[dict[str, Any]]) -> np.ndarray:
    """Game steps spent in each cell of the map's grid (row 0 south)."""
    from playtester.report.coverage import OccupancyGrid

    grid = OccupancyGrid(src.bounds, src.cell)
    for cell in cells_of(src, trajectory):
        if cell is not None:
            grid.counts[cell] += 1
    return grid.counts


def explorer_scalars(folder: Path, tags: tuple[str, ...] = DIAGNOSIS_TAGS) -> dict[str, list[list[float]]]:
    """The explorer's logged scalars of a run folder: `tag -> [[step, value], ...]` (empty for a
    run without an explorer log, the random agent's)."""
    log = folder / "explorer" / "tensorboard"
    if not log.exists():
        return {}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log), size_guidance={"scalars": 0})
    events.Reload()
    have = set(events.Tags().get("scalars", []))
    return {tag: [[e.step, e.value] for e in events.Scalars(tag)] for tag in tags if tag in have}


def heat_maps(results: list[dict], out: Path, agents: tuple[str, ...]) -> dict[str, tuple[np.ndarray, Any]]:
    """Each agent's visits per map cell, summed over its seeds' run folders in `out`
    (`AGENT-seedS`): agent → (counts, MapSource)."""
    import yaml

    from playtester.report.maps import map_source
    from playtester.tester.runlog import read_jsonl

    maps: dict[str, tuple[np.ndarray, Any]] = {}
    for agent in agents:
        for r in sorted((r for r in results if r["agent"] == agent), key=lambda r: r["seed"]):
            folder = out / f"{agent}-seed{r['seed']}"
            if not (folder / "config.yaml").exists():
                continue
            src = map_source(folder, yaml.safe_load((folder / "config.yaml").read_text()))[0]
            if src is None:
                continue
            counts = visit_counts(src, list(read_jsonl(folder / "trajectory.jsonl")))
            maps[agent] = (maps[agent][0] + counts, src) if agent in maps else (counts, src)
    return maps


# -- pictures ------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_coverage_over_steps(results: list[dict], agents: tuple[str, ...], path: Path) -> None:
    """Mean coverage over game steps per agent (the band: lowest and highest seed)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=100)
    measure = "coverage"
    for agent in agents:
        curves = [r["coverage_curve"] for r in results if r["agent"] == agent and r.get("coverage_curve")]
        if not curves:
            continue
        measure = f"{curves[0]['measure']} coverage"
        length = min(len(c["share"]) for c in curves)
        steps = np.mean([c["steps"][:length] for c in curves], axis=0)
        shares = np.array([c["share"][:length] for c in curves]) * 100
        colour = COLOURS.get(agent)
        ax.plot(steps, shares.mean(axis=0), color=colour, label=f"{agent} ({len(curves)} seeds)")
        ax.fill_between(steps, shares.min(axis=0), shares.max(axis=0), color=colour, alpha=0.12)
    ax.set_xlabel("game steps (OOI tests included)")
    ax.set_ylabel(f"{measure} (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_heat_maps(maps: dict[str, tuple[np.ndarray, Any]], path: Path) -> None:
    """Where each agent spends its steps: visits per cell over all its seeds (log scale), on the
    map's picture. `maps`: agent → (counts, MapSource)."""
    import cv2

    plt = _pyplot()
    n = len(maps)
    if n == 0:
        return
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.4), dpi=100, squeeze=False)
    for ax, (agent, (counts, src)) in zip(axes[0], maps.items()):
        picture = src.view.image
        h, w = picture.shape[:2]
        heat = np.log1p(counts[::-1].astype(float))  # north up, as the picture
        heat = cv2.resize(heat, (w, h), interpolation=cv2.INTER_NEAREST)
        ax.imshow(picture, alpha=0.55)
        shown = np.ma.masked_where(heat <= 0, heat)
        ax.imshow(shown, cmap="inferno", alpha=0.85, vmin=0, vmax=max(float(heat.max()), 1e-9))
        ax.set_title(f"{agent}: {int(counts.sum())} steps", fontsize=9)
        ax.set_axis_off()
    fig.suptitle("where each agent spends its steps (all seeds, log scale)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def novelty_share(scalars: dict[str, list[list[float]]]) -> list[list[float]]:
    """Per logged update, novelty's share of the combined reward's size,
    `(1 − α)|r^e| / ((1 − α)|r^e| + α|r^p|)` from the rollout means of α, r^e and r^p: 1 for pure
    novelty; near 0 where the preference term outweighs it (the explorer then mostly imitates)."""
    needed = ("charts/alpha", "rewards/novelty", "rewards/preference")
    if not all(scalars.get(tag) for tag in needed):
        return []
    share = []
    for (step, alpha), (_, novelty), (_, preference) in zip(*(scalars[tag] for tag in needed)):
        own, other = (1 - alpha) * abs(novelty), alpha * abs(preference)
        share.append([step, own / (own + other) if own + other > 0 else float("nan")])
    return share


def diagnosis_rows(results: list[dict], agents: tuple[str, ...]) -> list[dict[str, Any]]:
    """`plot_diagnosis` in numbers, per agent (means over its seeds): α and the reward terms
    (`rewards/novelty`, `rewards/preference`) averaged over each run's updates, novelty's share of
    the reward (`novelty_share`), the share of the game steps spent confirming and testing objects
    (`not_exploring`) and returning to a frontier place (`returning`), and the share of the last
    episode's exploring steps in cells covered earlier in the run. None where no run of the agent
    has the figure (the random agent logs no reward)."""

    def finite_mean(values: list[float | None]) -> float | None:
        values = [v for v in values if v is not None and np.isfinite(v)]
        return float(np.mean(values)) if values else None

    def run_mean(series: list[list[float]]) -> float | None:
        return finite_mean([v for _, v in series])

    rows = []
    for agent in agents:
        runs = [r for r in results if r["agent"] == agent]
        scalars = [r.get("scalars") or {} for r in runs]
        rows.append({
            "agent": agent,
            "alpha": finite_mean([run_mean(s.get("charts/alpha", [])) for s in scalars]),
            "novelty": finite_mean([run_mean(s.get("rewards/novelty", [])) for s in scalars]),
            "preference": finite_mean([run_mean(s.get("rewards/preference", [])) for s in scalars]),
            "novelty_share": finite_mean([run_mean(novelty_share(s)) for s in scalars]),
            "not_exploring": finite_mean([1 - (r["explore_steps"] + r.get("return_steps", 0)) / r["steps"] if r.get("steps") else None
                                          for r in runs]),
            "returning": finite_mean([r.get("return_steps", 0) / r["steps"] if r.get("steps") else None for r in runs]),
            "revisits_last": finite_mean([(r.get("revisits") or {}).get("run", [None])[-1] for r in runs]),
        })
    return rows


def diagnosis_table(results: list[dict], agents: tuple[str, ...]) -> str:
    """`diagnosis_rows` as a Markdown table."""
    def cell(value: float | None, percent: bool = False) -> str:
        if value is None:
            return "–"
        return f"{100 * value:.1f} %" if percent else f"{value:.3g}"

    lines = ["| agent | α | novelty r^e | preference r^p | novelty's share of the reward | steps not exploring (confirm, test) "
             "| steps returning to a frontier | last episode's exploring steps in cells covered before |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in diagnosis_rows(results, agents):
        lines.append(f"| {row['agent']} | {cell(row['alpha'])} | {cell(row['novelty'])} | {cell(row['preference'])} | "
                     f"{cell(row['novelty_share'], True)} | {cell(row['not_exploring'], True)} | {cell(row['returning'], True)} | "
                     f"{cell(row['revisits_last'], True)} |")
    return "\n".join(lines)


def plot_diagnosis(results: list[dict], agents: tuple[str, ...], path: Path) -> None:
    """Why an agent flattens: α, the reward terms and novelty's share of the reward over training
    steps (mean over seeds), and per episode the share of exploring steps in cells covered before
    (in the run, in the episode)."""
    plt = _pyplot()
    panels = [tag for tag in DIAGNOSIS_TAGS if tag != "rewards/novelty"] + ["novelty share", "revisits"]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.2), dpi=100)
    for ax, panel in zip(axes.flat, panels):
        for agent in agents:
            rows = [r for r in results if r["agent"] == agent]
            colour = COLOURS.get(agent)
            if panel == "revisits":
                runs = [r["revisits"]["run"] for r in rows if r.get("revisits")]
                same = [r["revisits"]["episode"] for r in rows if r.get("revisits")]
                if runs:
                    x = np.arange(1, len(runs[0]) + 1)
                    marker = "o" if len(x) < 5 else None
                    ax.plot(x, np.nanmean(runs, axis=0) * 100, color=colour, label=agent, marker=marker)
                    ax.plot(x, np.nanmean(same, axis=0) * 100, color=colour, linestyle=":", marker=marker)
                continue
            if panel == "novelty share":
                series = [novelty_share(r["scalars"]) for r in rows if novelty_share(r.get("scalars", {}))]
            else:
                series = [r["scalars"][panel] for r in rows if r.get("scalars", {}).get(panel)]
            if not series:
                continue
            length = min(len(s) for s in series)
            values = np.array([[v for _, v in s[:length]] for s in series])
            steps = np.array([[t for t, _ in s[:length]] for s in series]).mean(axis=0)
            ax.plot(steps, values.mean(axis=0), color=colour, label=agent, marker="o" if length < 5 else None)
        if panel == "revisits":
            ax.set_title("exploring steps in cells covered before (%)\nsolid: earlier in the run; dotted: in the episode", fontsize=8)
            ax.set_xlabel("episode")
        elif panel == "novelty share":
            ax.set_title("novelty's share of the reward: (1−α)|r^e| / ((1−α)|r^e| + α|r^p|)", fontsize=8)
            ax.set_xlabel("explorer steps")
        else:
            ax.set_title(panel, fontsize=9)
            ax.set_xlabel("explorer steps")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
