"""The run report's page: facts, findings first, maps with legends, objects, tests.

One self-contained HTML file (pictures and clips inlined) that opens in any browser without
a server; `playtester.report.build.build_report` gathers what it shows.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from playtester.capture.level_map import DOOR, FLOOR, LOW, OUTSIDE, WALL
from playtester.report.harness import harness_facts
from playtester.report.maps import STATE_BY_KEY, STATES, THING, TRACE, VISITED, MapSource

from markupsafe import Markup, escape

CLIP_INLINE_LIMIT = 4_000_000
"""Clips larger than this (bytes) are linked, not inlined."""


def swatch(rgb: tuple[int, int, int], shape: str = "square", outline: bool = True) -> str:
    """A legend's mark as inline SVG (markup, not text): the same colour and shape as on the map."""
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
    return Markup(f'<svg width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">{body}</svg>')


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
    walkable = "walkable cell" if src.walkable_mask is not None else "cell"
    coverage.append((swatch(VISITED), f"{walkable} visited ({src.cell:g} × {src.cell:g} map units)"))
    if src.graph is not None:
        from playtester.report.level import DOOR_STATES, UNREACHED

        coverage += [(swatch(s.colour, "line"), s.label) for s in DOOR_STATES]
        coverage.append((swatch(UNREACHED, "line"), "a sector reachable from the start that no one reached"))
        from playtester.report.level import TRAP

        coverage.append((swatch(TRAP), "a softlock: the sectors the player was trapped in (a cross where it was)"))
    if src.things:
        coverage.append((swatch(THING, "circle", outline=False), "an object placed on the level"))
    marks = [(swatch(s.colour, s.shape), s.label) for s in STATES]
    return {"coverage.png": coverage + ground, "ooi_map.png": marks + [(Markup("<b>12</b>"), "the object's id")] + ground}


def _figure(png: bytes, caption: str) -> dict[str, str]:
    return {"uri": "data:image/png;base64," + base64.b64encode(png).decode("ascii"), "caption": caption}


def facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The header's lines: what was run and what came of it."""
    out = [("game", summary["game"]), ("explorer", summary["agent"] or "–"),
           ("objects found by", summary.get("objects_found_by") or "not recorded"),
           ("test policy", summary.get("test_policy") or ("not recorded" if summary["tests"] else "none (the run tested no object)")),
           ("preference policy", summary.get("preference_policy") or "none"),
           ("episodes", summary["episodes"]), ("steps", summary["steps"])]
    if summary.get("rules"):
        out.insert(1, ("tester rules", summary["rules"]))
    out += _coverage_facts(summary)
    out += _object_facts(summary)
    out.append(("findings", sum(summary["findings"].values()) if summary["findings"] else 0))
    out += _behaviour_test_facts(summary)
    if "load" in summary:
        out.append(("low-FPS points (frame time over t = %.2f ms on most visits)" % summary["load"]["threshold_ms"],
                    summary["load"]["points"]))
    out += _level_facts(summary)
    if summary.get("softlock_oracle"):
        out.append(("softlock oracle", summary["softlock_oracle"]))
    out += harness_facts(summary)
    if summary.get("stopped_early"):
        out.append(("stopped early", summary["stopped_early"]))
    return out


def _coverage_facts(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """How much of the game the run saw: the map's cells where positions were recorded, else frame
    cells and places, so that a run without a map still says how far it went."""
    cov = summary.get("coverage", {})
    out: list[tuple[str, Any]] = []
    if "reachable_share" in cov:
        out.append(("reachable area covered (walkable cells reachable from the start, doors open, lifts moved)",
                    f"{cov['reachable_share']:.1%} of {cov['reachable_cells']} cells"))
    if "walkable_share" in cov:
        out.append((f"walkable area covered (cells of {cov['cell_size']:g} map units)",
                    f"{cov['walkable_share']:.1%} of {cov['walkable_cells']} cells"))
    if "pathway_share" in cov:
        out.append(("preferred area (pathways) covered", f"{cov['pathway_share']:.1%}"))
    if "area_share" in cov and "walkable_share" not in cov:
        out.append(("whole map covered", f"{cov['area_share']:.1%}"))
    if "frame_cells" in cov:
        out.append(("distinct frame cells seen (no positions)", cov["frame_cells"]))
    if "places" in summary:
        out.append(("distinct places reached (views clustered by "
                    f"{'the encoder' if summary['places']['embedding'] == 'encoder' else 'pixels'})",
                    summary["places"]["places"]))
    if summary.get("map_missing"):
        out.append(("map", f"missing: {summary['map_missing']}"))
    return out


def _object_facts(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The objects the run tested, and how many tests hit a real object (when the game's labels
    could score them), so that phantom detections are not counted as coverage."""
    tested = f"{summary['oois_tested']}" + (f" of {summary['oois_total']}" if "oois_total" in summary else "")
    out: list[tuple[str, Any]] = [("objects tested", tested)]
    if summary.get("test_precision") is not None:
        out.append(("tests of real objects (scored by the game's labels: an object in the tested box)",
                    f"{summary['tests_matched']} of {summary['tests']} ({summary['test_precision']:.0%}); "
                    f"{summary['tests_unmatched']} phantom, listed apart below"))
    elif summary.get("tests_unmatched"):
        out.append(("tests of detections no known object matched (false detections, or objects the list lacks)",
                    summary["tests_unmatched"]))
    if "oois_by_state" in summary:
        out.append(("objects by state", ", ".join(f"{STATE_BY_KEY[k].label}: {v}" for k, v in summary["oois_by_state"].items())))
    if summary.get("objects_note"):
        out.append(("objects", summary["objects_note"]))
    return out


def _behaviour_test_facts(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """How often the test policy did what it was asked: on real objects when the labels say which
    were real (with the failures by kind), else over all tests."""
    if summary.get("test_success_on_real") is not None:
        failures = summary.get("test_failures_on_real") or {}
        why = "; failed: " + ", ".join(f"{k} {v}" for k, v in failures.items()) if failures else ""
        return [("behaviour tests of real objects performed as asked", f"{summary['test_success_on_real']:.0%}{why}")]
    if summary["test_success_rate"] is not None:
        return [("behaviour tests performed as asked", f"{summary['test_success_rate']:.0%}")]
    return []


def _level_facts(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """What the level's geometry says of the run (doors, unreached sectors, deaths, softlocks);
    nothing when the game has no level section."""
    level = summary.get("level")
    if not level:
        return []
    doors = level["doors"]
    out: list[tuple[str, Any]] = [
        ("doors", f"{doors['opened']} of {doors['total']} opened; used without effect {doors['no effect']}, "
                  f"used not gone through {doors['pressed']}, reached not used {doors['reached']}, "
                  f"never reached {doors['never reached']}"),
        ("sectors reachable in the level's geometry that no one reached", _unreached_count(level["unreached_sectors"]))]
    if summary.get("rules") in ("play", "no-monsters") or level["deaths"]:
        out.append(("deaths (each a finding; the level started again)", len(level["deaths"])))
    out.append(("softlocks (trapped for good, by the level's geometry; each a finding, the episode ended there)",
                len(level.get("softlocks", []))))
    return out


def _unreached_count(sectors: list[dict[str, Any]]) -> str:
    behind = sum(1 for u in sectors if u.get("why"))
    return f"{len(sectors)} ({behind} past a monster standing in the way)" if behind else str(len(sectors))


def _level(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The level section's tables: doors, unreached sectors, deaths, softlocks."""
    level = summary.get("level")
    if not level:
        return None
    from playtester.report.level import DOOR_STATE

    doors = [[d["sector"], Markup(f"{swatch(DOOR_STATE[d['state']].colour, 'line')} {escape(d['state'])}"),
              "by hand" if d["manual"] else "switch or walk-over line", d["key"] or "–", ", ".join(map(str, d["lines"]))]
             for d in level["doors"]["each"]]
    unreached = [[u["sector"], u["cells"], f"{u['x']}, {u['y']}", f"{u['floor']:g} / {u['ceiling']:g}", u.get("why") or "–"]
                 for u in level["unreached_sectors"]]
    deaths = [[d["episode"], d["t"], ", ".join(f"{v:.0f}" for v in (d.get("position") or [])[:2]), d["cause"]] for d in level["deaths"]]
    traps = [[t["episode"], t["step"], "the start" if t["at_start"] else ", ".join(f"{v:.0f}" for v in (t["position"] or [])[:2]),
              ", ".join(map(str, t["region"][:8])) + (" …" if len(t["region"]) > 8 else ""), t["cause"],
              t.get("replay") or (f"playtester replay findings/{t['folder']}" if t.get("folder") else "–")]
             for t in level.get("softlocks", [])]
    return {"doors": doors, "unreached": unreached, "deaths": deaths, "exits": level["level_exits"], "softlocks": traps}


def _findings(run: Path, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for f in findings:
        folder = run / "findings" / f["folder"]
        clip = folder / "clip.mp4"
        inline = clip.exists() and clip.stat().st_size < CLIP_INLINE_LIMIT
        out.append({**f, "replay": str(folder),
                    "video_uri": f"data:video/mp4;base64,{base64.b64encode(clip.read_bytes()).decode()}" if inline else None,
                    "clip_link": f"findings/{f['folder']}/clip.mp4" if clip.exists() and not inline else None})
    return out


def _objects(src: MapSource, states: dict[Any, str]) -> dict[str, Any]:
    """The objects beside the map (id, kind, state) and the table of those missed."""
    rows, missed = [], []
    rank = {s.key: i for i, s in enumerate(STATES)}

    def order(o: dict[str, Any]) -> tuple:  # bugs first, then failed tests, passed, untested; by kind and id
        ident = o["id"]
        return rank[states.get(ident, "untested")], str(o["kind"]), (0, ident, "") if isinstance(ident, int) else (1, 0, str(ident))

    for o in sorted(src.oois, key=order):
        state = STATE_BY_KEY[states.get(o["id"], "untested")]
        rows.append([o["id"], o["kind"], Markup(f"{swatch(state.colour, state.shape)} {escape(state.label)}")])
        if o["id"] not in states:
            where = f"{o['x']:.0f}, {o['y']:.0f}"
            reach = "" if "reachable" not in o else ("yes" if o["reachable"] else "no (walled in)")
            missed.append([o["id"], o["kind"], where] + ([reach] if "reachable" in o else []))
    head = ["id", "kind", "x, y (map units)"] + (["reachable"] if src.oois and "reachable" in src.oois[0] else [])
    return {"rows": rows, "missed_head": head, "missed_rows": missed}


def _tests(tests: list[dict[str, Any]]) -> list[list[Any]]:
    """The executed tests' rows, phantom tests left out (`_phantoms` lists them)."""
    rows = []
    for t in tests:
        if t.get("target") == "phantom":
            continue
        bug = (t.get("texture") or {}).get("bug")
        outcome = "bug found by the texture oracle" if bug else ("passed" if t.get("success", True) else "behaviour test failed")
        if t.get("failure") and not t.get("success", True):
            outcome += f" ({t['failure']})"
        rows.append([t["episode"], t["step"], t.get("target_ooi", t["ooi"]), t.get("kind", ""), f"{t.get('jsd', float('nan')):.3f}",
                     "yes" if t.get("success") else "no", bug or "–", outcome])
    return rows


def _phantoms(tests: list[dict[str, Any]]) -> list[list[Any]]:
    """The tests the game's labels found no object for: where, what the detector took it for."""
    return [[t["episode"], t["step"], t.get("kind", ""), "–" if t.get("score") is None else f"{t['score']:.2f}",
             ", ".join(f"{v:.0f}" for v in t.get("box", ())), t.get("shows") or "nothing"]
            for t in tests if t.get("target") == "phantom"]


def _coverage_rows(cov: dict[str, Any]) -> tuple[str, list[list[Any]]]:
    """What the coverage table counts (the walkable area, or a studio's whole map) and its rows."""
    key = "walkable_share" if "walkable_share_per_episode" in cov else "area_share"
    per, cumulative = cov.get(f"{key}_per_episode"), cov.get(f"{key}_cumulative")
    if not per:
        return "", []
    what = "walkable area" if key == "walkable_share" else "map"
    reach = cov.get("reachable_share_per_episode")
    if reach:
        return what, [[i, f"{p:.1%}", f"{c:.1%}", f"{r:.1%}", f"{rc:.1%}"]
                      for i, (p, c, r, rc) in enumerate(zip(per, cumulative, reach, cov["reachable_share_cumulative"]))]
    return what, [[i, f"{p:.1%}", f"{c:.1%}"] for i, (p, c) in enumerate(zip(per, cumulative))]


def _places(places: Any, by_name: dict[str, tuple[str, bytes]]) -> dict[str, Any] | None:
    """The places view's grid and curve (`playtester.report.places`), or None for a run without places."""
    if places is None:
        return None
    from playtester.report.places import EMBEDDINGS

    shown = places.shown
    caption, png = by_name["places.png"]
    return {"count": len(places.cards), "shown": shown, "hidden": len(places.cards) - len(shown),
            "embedding": EMBEDDINGS.get(places.embedding, places.embedding), "curve": _figure(png, caption)}


def page(run: Path, summary: dict[str, Any], tests: list[dict[str, Any]], findings: list[dict[str, Any]],
         pictures: list[tuple[str, str, bytes]], src: MapSource | None, states: dict[Any, str], places: Any = None) -> str:
    """The report's HTML: templates/report.html filled in (Jinja2, every value escaped)."""
    by_name = {name: (caption, png) for name, caption, png in pictures}
    maps: dict[str, Any] = {"missing": None, "coverage": None, "objects": None}
    if src is None:
        maps["missing"] = summary.get("map_missing") or "unknown reason"
    else:
        legends = legend_items(src)
        if "coverage.png" in by_name:
            caption, png = by_name["coverage.png"]
            what, rows = _coverage_rows(summary.get("coverage", {}))
            maps["coverage"] = {**_figure(png, caption), "legend": legends["coverage.png"], "rows": rows, "what": what}
        if "ooi_map.png" in by_name:
            caption, png = by_name["ooi_map.png"]
            maps["objects"] = {**_figure(png, caption), "legend": legends["ooi_map.png"], **_objects(src, states),
                               "missed_count": summary.get("oois_missed", 0)}
    others = [_figure(png, caption) for name, (caption, png) in by_name.items()
              if name not in ("coverage.png", "ooi_map.png", "places.png")]
    return template("report.html").render(title=run.name, facts=facts(summary), findings=_findings(run, findings), maps=maps,
                              places=_places(places, by_name), tests=_tests(tests), phantoms=_phantoms(tests),
                              others=others, level=_level(summary),
                              reachable="reachable_share_per_episode" in summary.get("coverage", {}))


def template(name: str):
    """A page template of playtester/templates/, HTML-escaping every value it is given."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("playtester", "templates"), autoescape=select_autoescape(["html"]))
    return env.get_template(name)
