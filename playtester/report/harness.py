"""What a window game's harness did in a run: episodes that game over ended, and the time the
game spent out of play (reset recipes, launches, the steps judged out of play), for the summary
and the report's header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playtester.tester.runlog import read_jsonl


def harness_summary(run: Path, trajectory: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`episodes_ended` (by game over or a menu), `steps` judged out of play, `reset_seconds`
    (recipes and launches, outside the episodes), `launches`, `reset_failures`; None for a run
    with no harness."""
    resets = list(read_jsonl(Path(run) / "harness.jsonl"))
    ended = [r for r in trajectory if r.get("out_of_play")]
    if not resets and not ended:
        return None
    return {"episodes_ended": len(ended), "steps": sum(int(r.get("out_of_play_steps", 1)) for r in ended),
            "reset_seconds": round(sum(float(r["seconds"]) for r in resets), 1),
            "launches": sum(bool(r.get("launched")) for r in resets),
            "reset_failures": sum(bool(r.get("failed")) for r in resets)}


def harness_facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The report header's lines about the harness."""
    h = summary.get("out_of_play")
    if not h:
        return []
    return [("episodes ended by game over (out of play)", str(h["episodes_ended"])),
            ("time out of play", f"{h['reset_seconds']:g} s of resets outside the episodes ({h['launches']} relaunches, "
                                 f"{h['reset_failures']} recipes that missed play), "
                                 f"{h['steps']} steps judged out of play")]
