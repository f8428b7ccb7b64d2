"""The plan report: every node and every rule fired, passed or failed and why, with the clip
of every failure, as `plan_report.json` and a self-contained `plan_report.html` (both atomic).

    OUT/plan_report.json   the result: passed, steps, nodes and rule firings with their checks
    OUT/plan_report.html   the same for people, failures with their clips inline
    OUT/findings/NNNN/     one failure each: finding.json, actions.jsonl, frames.npy, clip.mp4
                           (`playtester replay OUT/findings/NNNN` plays it again)
    OUT/trajectory.jsonl   every step: t, action, mode (node | rule | settle), owner, position
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from playtester.files import write_text_atomic
from playtester.plans.runner import PlanResult

CLIP_INLINE_BYTES = 4_000_000


def write_plan_report(out: str | Path, result: PlanResult) -> Path:
    """Write `plan_report.json` and `plan_report.html` into `out`; returns the HTML's path."""
    out = Path(out)
    doc = result.to_dict()
    write_text_atomic(out / "plan_report.json", json.dumps(doc, indent=1))
    return write_text_atomic(out / "plan_report.html", _html(out, doc))


def _record(r: dict[str, Any]) -> dict[str, Any]:
    """A node or rule firing as the table shows it."""
    where = r["target"] if r["kind"] == "node" else f"interrupted {r['interrupted'] or '–'}"
    checks = ", ".join(f"{c['name']} {'✓' if c['passed'] else '✗'}" for c in r["checks"]) or "–"
    return {**r, "where": str(where or "here"), "checks_text": checks}


def _failure(out: Path, name: str) -> dict[str, Any]:
    folder = out / "findings" / name
    doc = json.loads((folder / "finding.json").read_text())
    clip = folder / "clip.mp4"
    inline = clip.exists() and clip.stat().st_size < CLIP_INLINE_BYTES
    return {"name": name, "message": doc["message"], "step": doc["step"], "folder": str(folder),
            "video_uri": f"data:video/mp4;base64,{base64.b64encode(clip.read_bytes()).decode()}" if inline else None}


def _html(out: Path, doc: dict[str, Any]) -> str:
    """templates/plan_report.html filled in (Jinja2, every value escaped)."""
    from playtester.report.html import template

    failures = [f for r in doc["nodes"] + doc["rules"] for f in r["findings"]]
    return template("plan_report.html").render(
        doc=doc, verdict="PASSED" if doc["passed"] else "FAILED", n_failed=sum(not r["passed"] for r in doc["nodes"]),
        records=[_record(r) for r in doc["nodes"] + doc["rules"]], failures=[_failure(out, f) for f in failures])
