"""`playtester report RUN`: the run for a QA lead, in one self-contained `report.html`, plus the
PNGs and `summary.json`.

The page reads top down: what was run (game, explorer, what found the objects, the test and
preference policies), the findings with their clip and replay command, the bird's-eye coverage
map and the object test map each with its legend, the objects beside the map and those missed,
then every executed test in episode and step order. Maps are drawn on the built-in park, on any
Doom level's own geometry, or on a window game's studio map (`playtester.report.maps`); a run
whose map cannot be drawn still gets its report, which says why the map is missing. A run with no map shows the places it reached instead
(`playtester.report.places`).
"""

from __future__ import annotations

from collections import Counter

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from playtester.files import write_bytes_atomic, write_text_atomic
from playtester.errors import UserError
from playtester.load.lowfps import load_section
from playtester.tester.object_source import FOUND_BY_KEY, found_by
from playtester.report.maps import (AMBER, GREEN, GREY, RED, STATES, MapSource, coverage_map, coverage_summary, map_source,
                                    object_states, ooi_map, passed)
from playtester.tester.runlog import read_config, read_jsonl
from playtester.tester.scoring import FAILURES

__all__ = ["AMBER", "GREEN", "GREY", "RED", "build_report", "known_ids", "passed", "summarise", "tested_counts"]


def _png(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def tested_counts(tests: list[dict[str, Any]], episodes: int, known: set[str] | None = None) -> list[int]:
    """Distinct OOIs tested by the end of each episode (cumulative). With `known`, the ids of the
    objects the run knows (the park's, `--oois`), only those count: a test of a detection that no
    known object matched (a false detection, or an object the list lacks) tested no known OOI.
    A test the game's labels scored counts for the object they saw in its box; a phantom for none."""
    seen: set[str] = set()
    counts = []
    for e in range(episodes):
        seen |= {tested_object(t) for t in tests if int(t["episode"]) == e and t.get("target") != "phantom"}
        counts.append(len(seen if known is None else seen & known))
    return counts


def tested_object(test: dict[str, Any]) -> str:
    """The key of the object a test tested: the one the game's labels saw in its box where they
    scored it, else the tester's own key (a known OOI's id, or a detection's)."""
    return str(test["target_ooi"]) if test.get("target") == "matched" else str(test["ooi"])


def known_ids(src: MapSource | None) -> set[str] | None:
    """The ids of the objects a run's map source knows, as tests name them; None when it knows none."""
    return {str(o["id"]) for o in src.oois} if src is not None and src.oois else None


def tested_over_episodes(tests: list[dict[str, Any]], episodes: int, known: set[str] | None = None) -> np.ndarray:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    counts = tested_counts(tests, episodes, known)
    fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
    ax.plot(range(1, episodes + 1), counts, marker="o", color="#c0392b")
    ax.set_xlabel("episodes")
    ax.set_ylabel("OOIs tested")
    ax.set_ylim(0, max(1, max(counts, default=0)) * 1.1)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return image


def summarise(config: dict[str, Any], trajectory: list[dict], tests: list[dict], findings: list[dict],
              src: MapSource | None, map_missing: str = "") -> dict[str, Any]:
    episodes = 1 + max((int(r["episode"]) for r in trajectory), default=-1)
    tested = {tested_object(t) for t in tests if t.get("target") != "phantom"}  # each test's object key
    summary: dict[str, Any] = {
        "game": config["game"],
        "agent": config.get("agent", ""),
        "rules": config.get("rules"),
        FOUND_BY_KEY: found_by(config),
        "test_policy": config.get("tester"),
        "preference_policy": config.get("preference"),
        "episodes": episodes,
        "steps": len(trajectory),
        "tests": len(tests),
        "oois_tested": len(tested),
        "test_success_rate": float(np.mean([bool(t.get("success")) for t in tests])) if tests else None,
        "findings": {k: sum(f["kind"] == k for f in findings) for k in sorted({f["kind"] for f in findings})},
    }
    real = real_tests(tests)
    if real is not None:
        summary.update(test_scoring(tests, real))
    cells = {r.get("frame_cell", r.get("cell")) for r in trajectory} - {None}  # `cell`: runs written before frame_cell
    if cells:  # no telemetry: Go-Explore cells of downsampled frames stand for places
        summary["coverage"] = {"frame_cells": len(cells)}
    if src is None:
        summary["map_missing"] = map_missing
        return summary
    summary.setdefault("coverage", {}).update(coverage_summary(src, trajectory, episodes))
    if src.note:
        summary["objects_note"] = src.note
    if src.oois:
        states = object_states(tests, findings)
        on_map = {o["id"] for o in src.oois}
        known = known_ids(src)
        summary["oois_tested"] = len(tested & known)  # where the run knows its objects, only those count
        if real is None:  # not scored by labels: a test no known object matched counts as a phantom
            summary["tests_unmatched"] = sum(str(t["ooi"]) not in known for t in tests)
        summary["oois_total"] = len(src.oois)
        summary["oois_missed"] = sum(1 for o in src.oois if o["id"] not in states)
        summary["oois_by_state"] = {s.key: sum(1 for i in on_map if states.get(i, "untested") == s.key) for s in STATES}
    return summary


def real_tests(tests: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The tests the game's labels scored `matched` (of a real object); None when no test was
    scored (a game without labels, or a run from before the scoring)."""
    if not any("target" in t for t in tests):
        return None
    return [t for t in tests if t.get("target") == "matched"]


def test_scoring(tests: list[dict[str, Any]], real: list[dict[str, Any]]) -> dict[str, Any]:
    """What the labels say of a run's tests (scoring only): how many were of real objects, the
    test precision, and the test policy's success on real objects with why its tests failed (`playtester.tester.scoring`)."""
    scored = [t for t in tests if "target" in t]
    failed = [t for t in real if not t.get("success")]
    return {
        "tests_matched": len(real),
        "tests_unmatched": len(scored) - len(real),  # phantom: no real object stood in the tested box
        "test_precision": len(real) / len(scored) if scored else None,
        "test_success_on_real": float(np.mean([bool(t.get("success")) for t in real])) if real else None,
        "test_failures_on_real": {why: sum(t.get("failure") == why for t in failed) for why in FAILURES
                                  if any(t.get("failure") == why for t in failed)},
        # phantom tests whose box showed a thing of a kind the detector does not look for (a medikit taken for a health bonus)
        "tests_unmatched_showing": dict(sorted(Counter(t["shows"] for t in scored if t.get("target") == "phantom" and t.get("shows")).items())),
    }


def read_findings(run: Path) -> list[dict[str, Any]]:
    """Every finding of a run, oldest first by episode and step."""
    findings = []
    for f in sorted((run / "findings").glob("*/finding.json")) if (run / "findings").exists() else []:
        findings.append(json.loads(f.read_text()) | {"folder": f.parent.name})
    return sorted(findings, key=lambda f: (int(f.get("episode", 0)), int(f.get("step", 0)), f["folder"]))


def build_report(run: str | Path) -> Path:
    """Write `report.html`, `coverage.png`, `ooi_map.png`, `tested.png`, `places.png` (a run that
    kept places) and `summary.json`."""
    run = Path(run)
    if not run.is_dir():
        raise UserError(f"run folder {run}: not found")
    config = read_config(run)
    trajectory = list(read_jsonl(run / "trajectory.jsonl"))
    tests = sorted(read_jsonl(run / "tests.jsonl"), key=lambda t: (int(t["episode"]), int(t["step"])))
    findings = read_findings(run)
    src, map_missing = map_source(run, config)
    summary = summarise(config, trajectory, tests, findings, src, map_missing)
    from playtester.tester.crashes import read_stop

    summary["stopped_early"] = read_stop(run)  # why the run ended before its budget (a crashing game), else None
    from playtester.bugs.softlock import trap_oracle_status

    summary["softlock_oracle"] = trap_oracle_status(config.get("game", ""), src is not None)
    from playtester.report.harness import harness_summary

    harness = harness_summary(run, trajectory)
    if harness is not None:  # a window game's harness: game overs, time out of play
        summary["out_of_play"] = harness
    states = object_states(tests, findings)
    pictures: list[tuple[str, str, bytes]] = []
    if src is not None:
        coverage = coverage_map(src, trajectory)
        if src.graph is not None:  # a Doom level: its doors and the sectors no one reached
            from playtester.report.level import draw_level, level_summary

            summary["level"] = level_summary(src.graph, trajectory, findings, src.past_monsters)
            coverage = draw_level(coverage, src.view, src.graph, summary["level"])
        pictures.append(("coverage.png", "Bird's-eye coverage", _png(coverage)))
        if src.oois:
            pictures.append(("ooi_map.png", "Object test map", _png(ooi_map(src, states))))
    pictures.append(("tested.png", "OOIs tested over episodes",
                     _png(tested_over_episodes(tests, max(1, summary["episodes"]), known_ids(src)))))
    load = load_section(run, trajectory, src.view if src else None, src.cell if src else None, summary["agent"] or "agent")
    if load is not None:  # only when the run recorded frame times
        summary["load"] = load.summary
        pictures += load.pictures
    from playtester.report.places import novel_places_curve, places_view

    places = places_view(run, trajectory, tests, findings)  # a run with no map: the views it reached
    if places is not None:
        summary["places"] = places.summary()
        pictures.append(("places.png", "Distinct places over steps", _png(novel_places_curve(places))))
    for name, _, png in pictures:
        write_bytes_atomic(run / name, png)
    write_text_atomic(run / "summary.json", json.dumps(summary, indent=1))
    from playtester.report.html import page

    write_text_atomic(run / "report.html", page(run, summary, tests, findings, pictures, src, states, places))
    return run / "report.html"
