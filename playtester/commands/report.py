"""`playtester report RUN`."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from playtester.commands.options import InFolder, argument

console = Console()


def report(run: Path = argument(InFolder("run folder"), "run", help="A run folder (runs/NAME).")) -> None:
    """Write report.html (coverage map, OOI test map, tested OOIs over episodes, findings with
    clips and replay commands), the PNGs and summary.json into the run folder."""
    from playtester.report.build import build_report

    path = build_report(run)
    console.print(f"wrote {path}")
