"""The run report's page: facts, findings first, maps with legends, objects, tests.

One self-contained HTML file (pictures and clips inlined) that opens in any browser without
a server; `playtester.report.build_report` gathers what it shows.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from playtester.capture.level_map import DOOR, FLOOR, LOW, OUTSIDE, WALL
from playtester.report_maps import STATE_BY_KEY, STATES, THING, TRACE, VISITED, MapSource

e = html.escape
CLIP_INLINE_LIMIT = 4_000_000
"""Clips larger than this (bytes) are linked, not inlined."""


def swatch(rgb: tuple[int, int, int], shape: str = "square", outline: bool = True) -> str:
    """A legend's mark as inline SVG: the same colour and shape as on the map."""
    colour = "#%02x%02x%02x" % rgb
    stroke = ' stroke="#000"' if outline else ""
    if shape == "circle":
        body = f'<circle cx="7" cy="7" r="5.5" fill="{colour}"{stroke}/>'
    elif shape == "triangle":
        body = f'<polygon points="7,1 13,13 1,13" fill="{colour}"{stroke}/>'
    elif shape == "line":
        body = f'<line x1="0" y1="7" x2="14" y2="7" stroke="{colour}" stroke-width="3"/>'
    else:
        body = f'<rect x="1.5" y="1.5" width="11" height="11" fill="{colour}"{stroke}/>'
    return f'<svg width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">{body}</svg>'


def legend_items(src: MapSource) -> dict[str, list[tuple[str, str]]]:
    """What every mark on each map means: `{picture file: [(swatch, meaning)]}`."""
    if src.things:  # a Doom level's own geometry
        ground = [(swatch(FLOOR), "walkable floor"), (swatch(LOW), "floor the player cannot enter (ceiling too low)"),
                  (swatch(OUTSIDE, outline=False), "outside the level"), (swatch(WALL, "line"), "wall"),
                  (swatch(DOOR, "line"), "door")]
    elif src.pathway_mask is not None:  # the park
        ground = [(swatch((250, 250, 250)), "pathway (the preferred area)"), (swatch((76, 140, 64)), "grass"),
                  (swatch((52, 104, 186)), "water"), (swatch((196, 160, 110)), "bridge"),
                  (swatch((255, 0, 255), "line"), "invisible wall")]
    else:
        ground = [(swatch((200, 200, 200)), "the studio's map")]
    coverage = [(swatch(TRACE, "line"), "the player's trace, every episode")]
    if src.walkable_mask is not None:
        coverage.append((swatch(VISITED), f"walkable cell visited ({src.cell:g} × {src.cell:g} map units)"))
    if src.things:
        coverage.append((swatch(THING, "circle", outline=False), "an object placed on the level"))
    marks = [(swatch(s.colour, s.shape), s.label) for s in STATES]
    return {"coverage.png": coverage + ground, "ooi_map.png": marks + [("<b>12</b>", "the object's id")] + ground}


def _legend(items: list[tuple[str, str]]) -> str:
    rows = "".join(f"<li>{mark} {e(text)}</li>" for mark, text in items)
    return f'<ul class="legend">{rows}</ul>'


def _figure(png: bytes, caption: str) -> str:
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return f'<figure><img src="{uri}" alt="{e(caption)}"><figcaption>{e(caption)}</figcaption></figure>'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><tr>{th}</tr>{body}</table>'


def facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The header's lines: what was run and what came of it."""
    cov = summary.get("coverage", {})
    out = [("game", summary["game"]), ("explorer", summary["agent"] or "–"),
           ("objects found by", summary.get("objects_found_by") or "not recorded"),
           ("test policy", summary.get("test_policy") or ("not recorded" if summary["tests"] else "none (the run tested no object)")),
           ("preference policy", summary.get("preference_policy") or "none"),
           ("episodes", summary["episodes"]), ("steps", summary["steps"])]
    if "walkable_share" in cov:
        out.append((f"walkable area covered (cells of {cov['cell_size']:g} map units)",
                    f"{cov['walkable_share']:.1%} of {cov['walkable_cells']} cells"))
    if "pathway_share" in cov:
        out.append(("preferred area (pathways) covered", f"{cov['pathway_share']:.1%}"))
    if "area_share" in cov and "walkable_share" not in cov:
        out.append(("whole map covered", f"{cov['area_share']:.1%}"))
    if "frame_cells" in cov:
        out.append(("distinct frame cells seen (no positions)", cov["frame_cells"]))
    if summary.get("map_missing"):
        out.append(("map", f"missing: {summary['map_missing']}"))
    tested = f"{summary['oois_tested']}" + (f" of {summary['oois_total']}" if "oois_total" in summary else "")
    out.append(("objects tested", tested))
    if "oois_by_state" in summary:
        out.append(("objects by state", ", ".join(f"{STATE_BY_KEY[k].label}: {v}" for k, v in summary["oois_by_state"].items())))
    if summary.get("objects_note"):
        out.append(("objects", summary["objects_note"]))
    out.append(("findings", sum(summary["findings"].values()) if summary["findings"] else 0))
    if summary["test_success_rate"] is not None:
        out.append(("behaviour tests performed as asked", f"{summary['test_success_rate']:.0%}"))
    if "load" in summary:
        out.append(("low-FPS points (frame time over t = %.2f ms on most visits)" % summary["load"]["threshold_ms"],
                    summary["load"]["points"]))
    if summary.get("stopped_early"):
        out.append(("stopped early", summary["stopped_early"]))
    return out


def _findings(run: Path, findings: list[dict[str, Any]]) -> str:
    blocks = []
    for f in findings:
        folder = run / "findings" / f["folder"]
        clip = folder / "clip.mp4"
        video = ""
        if clip.exists() and clip.stat().st_size < CLIP_INLINE_LIMIT:
            video = f'<video controls muted src="data:video/mp4;base64,{base64.b64encode(clip.read_bytes()).decode()}"></video>'
        elif clip.exists():
            video = f'<p><a href="findings/{e(f["folder"])}/clip.mp4">clip.mp4</a></p>'
        blocks.append(
            f'<section class="finding"><h3>{e(f["folder"])}: {e(f["kind"])}</h3><p>{e(f["message"])} '
            f'(episode {f["episode"]}, step {f["step"]})</p>{video}'
            f'<p>Replay it:</p><pre>playtester replay {e(str(folder))}</pre></section>'
        )
    return "".join(blocks) or "<p>None.</p>"


def _objects(src: MapSource, states: dict[Any, str]) -> tuple[str, str]:
    """The objects beside the map (id, kind, state) and the table of those missed."""
    rows, missed = [], []
    rank = {s.key: i for i, s in enumerate(STATES)}

    def order(o: dict[str, Any]) -> tuple:  # bugs first, then failed tests, passed, untested; by kind and id
        ident = o["id"]
        return rank[states.get(ident, "untested")], str(o["kind"]), (0, ident, "") if isinstance(ident, int) else (1, 0, str(ident))

    for o in sorted(src.oois, key=order):
        state = STATE_BY_KEY[states.get(o["id"], "untested")]
        rows.append([e(str(o["id"])), e(str(o["kind"])), f'{swatch(state.colour, state.shape)} {e(state.label)}'])
        if o["id"] not in states:
            where = f"{o['x']:.0f}, {o['y']:.0f}"
            reach = "" if "reachable" not in o else ("yes" if o["reachable"] else "no (walled in)")
            missed.append([e(str(o["id"])), e(str(o["kind"])), where] + ([reach] if "reachable" in o else []))
    beside = _table(["id", "kind", "state"], rows, "objects")
    head = ["id", "kind", "x, y (map units)"] + (["reachable"] if src.oois and "reachable" in src.oois[0] else [])
    return beside, (_table(head, missed) if missed else "<p>None: every object was tested.</p>")


def _tests(tests: list[dict[str, Any]], states: dict[Any, str]) -> str:
    rows = []
    for t in tests:
        bug = (t.get("texture") or {}).get("bug")
        outcome = "bug found by the texture oracle" if bug else ("passed" if t.get("success", True) else "behaviour test failed")
        rows.append([str(t["episode"]), str(t["step"]), e(str(t["ooi"])), e(str(t.get("kind", ""))),
                     f"{t.get('jsd', float('nan')):.3f}", "yes" if t.get("success") else "no", e(str(bug or "–")), e(outcome)])
    return _table(["episode", "step", "object", "kind", "JSD", "behaviour performed", "texture bug", "outcome"], rows) \
        if rows else "<p>No test was executed.</p>"


def _coverage_table(cov: dict[str, Any]) -> str:
    per, cumulative = cov.get("walkable_share_per_episode"), cov.get("walkable_share_cumulative")
    if not per:
        return ""
    rows = [[str(i), f"{p:.1%}", f"{c:.1%}"] for i, (p, c) in enumerate(zip(per, cumulative))]
    return _table(["episode", "walkable area covered in the episode", "covered so far"], rows, "coverage")


def page(run: Path, summary: dict[str, Any], tests: list[dict[str, Any]], findings: list[dict[str, Any]],
         pictures: list[tuple[str, str, bytes]], src: MapSource | None, states: dict[Any, str]) -> str:
    by_name = {name: (caption, png) for name, caption, png in pictures}
    rows = "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in facts(summary))
    maps = ""
    if src is None:
        maps = f'<p class="missing">No map: {e(summary.get("map_missing") or "unknown reason")}.</p>'
    else:
        legends = legend_items(src)
        if "coverage.png" in by_name:
            maps += f'<div class="row">{_figure(by_name["coverage.png"][1], by_name["coverage.png"][0])}' \
                    f'<div><h3>Legend</h3>{_legend(legends["coverage.png"])}{_coverage_table(summary.get("coverage", {}))}</div></div>'
        if "ooi_map.png" in by_name:
            beside, missed = _objects(src, states)
            maps += f'<div class="row">{_figure(by_name["ooi_map.png"][1], by_name["ooi_map.png"][0])}' \
                    f'<div><h3>Legend</h3>{_legend(legends["ooi_map.png"])}<h3>Objects ({len(src.oois)})</h3>' \
                    f'<div class="scroll">{beside}</div></div></div>' \
                    f'<h2>Objects missed ({summary.get("oois_missed", 0)})</h2>{missed}'
    others = "".join(_figure(png, caption) for name, (caption, png) in by_name.items() if name not in ("coverage.png", "ooi_map.png"))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>playtester report: {e(run.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }}
table {{ border-collapse: collapse; margin: 0.6em 0; }} th, td {{ border: 1px solid #ccc; padding: 3px 9px; text-align: left; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }} figure img {{ width: 560px; max-width: 100%; border: 1px solid #999; }}
.row {{ display: flex; gap: 1.2em; align-items: flex-start; }} .legend {{ list-style: none; padding: 0; margin: 0; }}
.legend li {{ margin: 2px 0; }} .legend svg {{ vertical-align: middle; }} .scroll {{ max-height: 420px; overflow-y: auto; }}
.finding {{ border-left: 4px solid #c0392b; padding-left: 0.8em; margin-bottom: 1em; }} .missing {{ color: #a04000; }}
video {{ max-width: 320px; display: block; }} pre {{ background: #f4f4f4; padding: 6px; }}
</style></head>
<body>
<h1>playtester report: {e(run.name)}</h1>
<table>{rows}</table>
<h2>Findings ({len(findings)})</h2>
{_findings(run, findings)}
<h2>Maps</h2>
{maps}
<h2>Executed tests ({len(tests)}, by episode and step)</h2>
{_tests(tests, states)}
<h2>Over the run</h2>
{others}
<script>
window.addEventListener("load", () => {{
  const imgs = [...document.images];
  document.body.dataset.imagesLoaded = imgs.filter(i => i.complete && i.naturalWidth > 0).length + "/" + imgs.length;
}});
</script>
</body></html>
"""
