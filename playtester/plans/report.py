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
import html
import json
from pathlib import Path
from typing import Any

from playtester.capture.atomic import write_text_atomic
from playtester.plans.runner import PlanResult

CLIP_INLINE_BYTES = 4_000_000


def write_plan_report(out: str | Path, result: PlanResult) -> Path:
    """Write `plan_report.json` and `plan_report.html` into `out`; returns the HTML's path."""
    out = Path(out)
    doc = result.to_dict()
    write_text_atomic(out / "plan_report.json", json.dumps(doc, indent=1))
    return write_text_atomic(out / "plan_report.html", _html(out, doc))


def _row(r: dict[str, Any]) -> str:
    e = html.escape
    verdict = '<td class="pass">passed</td>' if r["passed"] else '<td class="fail">failed</td>'
    checks = ", ".join(f"{c['name']} {'✓' if c['passed'] else '✗'}" for c in r["checks"]) or "–"
    where = r["target"] if r["kind"] == "node" else f"interrupted {r['interrupted'] or '–'}"
    return (f"<tr><td>{r['kind']} {r['index'] + 1}</td><td>{e(r['name'])}</td><td>{e(str(where or 'here'))}</td>"
            f"<td>{e(str(r['action'] or '–'))}</td><td>{r['start']}–{r['end']}</td>{verdict}"
            f"<td>{e('; '.join(r['reasons']) or '–')}</td><td>{e(checks)}</td></tr>")


def _failure(out: Path, name: str) -> str:
    e = html.escape
    folder = out / "findings" / name
    doc = json.loads((folder / "finding.json").read_text())
    clip = folder / "clip.mp4"
    video = ""
    if clip.exists() and clip.stat().st_size < CLIP_INLINE_BYTES:
        video = f'<video controls muted src="data:video/mp4;base64,{base64.b64encode(clip.read_bytes()).decode()}"></video>'
    return (f'<section class="failure"><h3>{e(name)}</h3><p>{e(doc["message"])} (step {doc["step"]})</p>{video}'
            f'<pre>playtester replay {e(str(folder))}</pre></section>')


def _html(out: Path, doc: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(_row(r) for r in doc["nodes"] + doc["rules"])
    failures = [f for r in doc["nodes"] + doc["rules"] for f in r["findings"]]
    verdict = "PASSED" if doc["passed"] else "FAILED"
    n_failed = sum(not r["passed"] for r in doc["nodes"])
    ended = f"<p>Ended early: {e(doc['ended'])}</p>" if doc["ended"] else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>plan {e(doc['plan'])}: {verdict}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }}
table {{ border-collapse: collapse; margin: 1em 0; }} th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; }}
.pass {{ color: #1e7b34; font-weight: bold; }} .fail {{ color: #b3261e; font-weight: bold; }}
video {{ max-width: 320px; display: block; }} pre {{ background: #f4f4f4; padding: 6px; }}
</style></head>
<body>
<h1>plan {e(doc['plan'])}: <span class="{'pass' if doc['passed'] else 'fail'}">{verdict}</span></h1>
<p>game {e(doc['game'])}, objects found by {e(doc.get('objects_found_by', 'not recorded'))}, {doc['steps']} steps, {len(doc['nodes'])} nodes ({n_failed} failed),
{len(doc['rules'])} rule firings.</p>{ended}
<table><tr><th></th><th>name</th><th>target</th><th>action</th><th>steps</th><th>verdict</th><th>why</th><th>checks</th></tr>
{rows}</table>
<h2>Failures ({len(failures)})</h2>
{''.join(_failure(out, f) for f in failures) or '<p>None.</p>'}
</body></html>
"""
