"""`playtester report RUN`: the bird's-eye coverage map, the OOI test map, tested OOIs over
episodes and the findings, in one self-contained `report.html`, plus the PNGs and `summary.json`.

Maps need a bird's-eye picture and world bounds: the built-in park has its own; for another game
the run's config names `map` (an image) and `map_bounds` (x0, y0, x1, y1), and `oois` (a JSON list
of `{id, kind, x, y}`) for the OOI map.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from playtester.capture.atomic import write_bytes_atomic, write_text_atomic
from playtester.capture.errors import UserError
from playtester.capture.park.birdseye import BirdsEye, render_birdseye
from playtester.coverage import OccupancyGrid
from playtester.lowfps import load_section
from playtester.runlog import read_config, read_jsonl

GREEN, RED, GREY, TRACE = (40, 190, 60), (220, 30, 30), (150, 150, 150), (230, 20, 20)


@dataclass
class MapSource:
    """The picture to draw on, and what it knows of the game."""

    view: BirdsEye
    oois: list[dict[str, Any]]
    pathway_mask: np.ndarray | None
    """Preferred cells of an `OccupancyGrid` over the map (row 0 south), when known."""
    cell: float


def map_source(run: Path, config: dict[str, Any]) -> MapSource | None:
    game = str(config["game"])
    if game.startswith("doom:park"):
        from playtester.capture.games import park_config_from_spec
        from playtester.capture.park.build import build_park

        layout = build_park(park_config_from_spec(game)).layout()
        oois = [{"id": o.id, "kind": o.kind, "x": o.x, "y": o.y, "bug": o.bug, "reachable": o.reachable} for o in layout.oois]
        return MapSource(render_birdseye(layout, oois=False), oois, layout.pathway_mask, float(layout.config.cell))
    if config.get("map") and config.get("map_bounds"):
        path = Path(config["map"])
        image = cv2.imread(str(path if path.is_absolute() else run / path))
        if image is None:
            raise UserError(f"run config: map image {config['map']} is missing or unreadable")
        bounds = tuple(float(v) for v in config["map_bounds"])
        oois = json.loads(Path(config["oois"]).read_text()) if config.get("oois") else []
        cell = (bounds[2] - bounds[0]) / 40
        return MapSource(BirdsEye(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), bounds), oois, None, cell)
    return None


def _png(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def coverage_map(src: MapSource, trajectory: list[dict[str, Any]]) -> np.ndarray:
    """Pathways in white on the map, every episode's trace in red."""
    img = src.view.image.copy()
    by_episode: dict[int, list[tuple[float, float]]] = {}
    for r in trajectory:
        if r.get("position"):
            by_episode.setdefault(int(r["episode"]), []).append((r["position"][0], r["position"][1]))
    for points in by_episode.values():
        xs, ys = src.view.to_pixel([p[0] for p in points], [p[1] for p in points])
        pts = np.stack([xs, ys], 1).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(img, [pts], False, TRACE, 1, cv2.LINE_AA)
    return img


def ooi_map(src: MapSource, verdicts: dict[int, bool]) -> np.ndarray:
    """Green: tested and passed; red: tested and failed (a bug found); grey: missed."""
    img = src.view.image.copy()
    r = max(3, img.shape[0] // 120)
    for o in src.oois:
        colour = GREY if o["id"] not in verdicts else (GREEN if verdicts[o["id"]] else RED)
        px, py = src.view.to_pixel(o["x"], o["y"])
        cv2.circle(img, (int(px), int(py)), r, colour, -1)
        cv2.circle(img, (int(px), int(py)), r, (0, 0, 0), 1)
    return img


def tested_counts(tests: list[dict[str, Any]], episodes: int) -> list[int]:
    """Distinct OOIs tested by the end of each episode (cumulative)."""
    seen: set[str] = set()
    counts = []
    for e in range(episodes):
        seen |= {str(t["ooi"]) for t in tests if int(t["episode"]) == e}
        counts.append(len(seen))
    return counts


def tested_over_episodes(tests: list[dict[str, Any]], episodes: int) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    counts = tested_counts(tests, episodes)
    fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
    ax.plot(range(1, episodes + 1), counts, marker="o", color="#c0392b")
    ax.set_xlabel("episodes")
    ax.set_ylabel("OOIs tested")
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return image


def passed(test: dict[str, Any]) -> bool:
    """A test passes when the behaviour was executed well and the texture oracle found no bug."""
    texture = test.get("texture") or {}
    return bool(test.get("success", True)) and not texture.get("bug")


def summarise(config: dict[str, Any], trajectory: list[dict], tests: list[dict], findings: list[dict], src: MapSource | None) -> dict[str, Any]:
    episodes = 1 + max((int(r["episode"]) for r in trajectory), default=-1)
    summary: dict[str, Any] = {
        "game": config["game"],
        "agent": config.get("agent", ""),
        "episodes": episodes,
        "steps": len(trajectory),
        "tests": len(tests),
        "oois_tested": len({str(t["ooi"]) for t in tests}),
        "test_success_rate": float(np.mean([bool(t.get("success")) for t in tests])) if tests else None,
        "findings": {k: sum(f["kind"] == k for f in findings) for k in sorted({f["kind"] for f in findings})},
    }
    cells = {r["cell"] for r in trajectory if "cell" in r}
    if cells:  # no telemetry: Go-Explore cells of downsampled frames stand for places
        summary["coverage"] = {"frame_cells": len(cells)}
    if src is not None:
        x0, y0, x1, y1 = src.view.bounds
        grid = OccupancyGrid((x0, y0, x1, y1), src.cell)
        for r in trajectory:
            if r.get("position"):
                grid.visit(r["position"][0], r["position"][1])
        summary.setdefault("coverage", {})["area_share"] = grid.share()
        if src.pathway_mask is not None:
            summary["coverage"]["pathway_share"] = grid.share(src.pathway_mask)
        if src.oois:
            summary["oois_total"] = len(src.oois)
            summary["oois_missed"] = len(src.oois) - summary["oois_tested"]
    return summary


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_report(run: str | Path) -> Path:
    """Write `report.html`, `coverage.png`, `ooi_map.png`, `tested.png` and `summary.json`."""
    run = Path(run)
    if not run.is_dir():
        raise UserError(f"run folder {run}: not found")
    config = read_config(run)
    trajectory = list(read_jsonl(run / "trajectory.jsonl"))
    tests = list(read_jsonl(run / "tests.jsonl"))
    findings = []
    for f in sorted((run / "findings").glob("*/finding.json")) if (run / "findings").exists() else []:
        findings.append(json.loads(f.read_text()) | {"folder": f.parent.name})
    src = map_source(run, config)
    summary = summarise(config, trajectory, tests, findings, src)
    verdicts: dict[int, bool] = {}
    for t in tests:
        if isinstance(t["ooi"], int):  # a known OOI; those told apart by sight have no place on the map
            verdicts[t["ooi"]] = verdicts.get(t["ooi"], True) and passed(t)
    pictures: list[tuple[str, str, bytes]] = []
    if src is not None:
        pictures.append(("coverage.png", "Bird's-eye coverage: traces in red, pathways in white", _png(coverage_map(src, trajectory))))
        pictures.append(("ooi_map.png", "OOI test map: green passed, red failed (bug found), grey missed", _png(ooi_map(src, verdicts))))
    pictures.append(("tested.png", "OOIs tested over episodes", _png(tested_over_episodes(tests, max(1, summary["episodes"])))))
    load = load_section(run, trajectory, src.view if src else None, src.cell if src else None, summary["agent"] or "agent")
    if load is not None:  # only when the run recorded frame times
        summary["load"] = load.summary
        pictures += load.pictures
    for name, _, png in pictures:
        write_bytes_atomic(run / name, png)
    write_text_atomic(run / "summary.json", json.dumps(summary, indent=1))
    write_text_atomic(run / "report.html", _html(run, summary, tests, findings, pictures))
    return run / "report.html"


def _html(run: Path, summary: dict, tests: list[dict], findings: list[dict], pictures: list[tuple[str, str, bytes]]) -> str:
    e = html.escape
    cov = summary.get("coverage", {})
    facts = [("game", summary["game"]), ("agent", summary["agent"] or "–"), ("episodes", summary["episodes"]), ("steps", summary["steps"])]
    if "pathway_share" in cov:
        facts.append(("preferred area (pathways) covered", f"{cov['pathway_share']:.1%}"))
    if "area_share" in cov:
        facts.append(("whole map covered", f"{cov['area_share']:.1%}"))
    tested = f"{summary['oois_tested']}" + (f" of {summary['oois_total']}" if "oois_total" in summary else "")
    facts.append(("OOIs tested", tested))
    if "load" in summary:
        facts.append(("low-FPS points (frame time over t = %.2f ms on most visits)" % summary["load"]["threshold_ms"],
                      summary["load"]["points"]))
    if summary["test_success_rate"] is not None:
        facts.append(("test success rate", f"{summary['test_success_rate']:.0%}"))
    rows = "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in facts)
    figs = "".join(
        f'<figure><img src="{_data_uri(png)}" alt="{e(caption)}"><figcaption>{e(caption)}</figcaption></figure>'
        for _, caption, png in pictures
    )
    test_rows = "".join(
        f"<tr><td>{t['episode']}</td><td>{t['step']}</td><td>{t['ooi']}</td><td>{e(str(t.get('kind', '')))}</td>"
        f"<td>{t.get('jsd', float('nan')):.3f}</td><td>{'yes' if t.get('success') else 'no'}</td>"
        f"<td>{e(str((t.get('texture') or {}).get('bug') or '–'))}</td></tr>"
        for t in tests
    )
    finding_blocks = []
    for f in findings:
        clip = run / "findings" / f["folder"] / "clip.mp4"
        video = ""
        if clip.exists() and clip.stat().st_size < 4_000_000:
            video = f'<video controls muted src="data:video/mp4;base64,{base64.b64encode(clip.read_bytes()).decode()}"></video>'
        finding_blocks.append(
            f'<section class="finding"><h3>{e(f["folder"])}: {e(f["kind"])}</h3><p>{e(f["message"])} '
            f'(episode {f["episode"]}, step {f["step"]})</p>{video}'
            f'<pre>playtester replay {e(str(run / "findings" / f["folder"]))}</pre></section>'
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>playtester report: {e(run.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }}
table {{ border-collapse: collapse; margin: 1em 0; }} th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: left; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }} figure img {{ max-width: 520px; border: 1px solid #999; }}
video {{ max-width: 320px; display: block; }} pre {{ background: #f4f4f4; padding: 6px; }}
</style></head>
<body>
<h1>playtester report: {e(run.name)}</h1>
<table>{rows}</table>
<h2>Maps</h2>
{figs}
<h2>Executed tests</h2>
<table><tr><th>episode</th><th>step</th><th>OOI</th><th>kind</th><th>JSD</th><th>success</th><th>texture bug</th></tr>{test_rows}</table>
<h2>Findings ({len(findings)})</h2>
{''.join(finding_blocks) or '<p>None.</p>'}
<script>
window.addEventListener("load", () => {{
  const imgs = [...document.images];
  document.body.dataset.imagesLoaded = imgs.filter(i => i.complete && i.naturalWidth > 0).length + "/" + imgs.length;
}});
</script>
</body></html>
"""
