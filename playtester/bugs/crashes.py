"""A run's game crashes, and why a run stopped before its budget.

    crashes.jsonl  one line a crash: env, episode, step, reason (every instance appends)
    stopped.json   the reason a run stopped early (crashes beyond --max-restarts, a game that
                   would not start again); absent when the run played its whole budget

A crash is also a finding (the crash oracle's); these files are what the restart budget and
the report read. Restarts are counted over the whole run folder, a resumed run's earlier
crashes included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playtester.files import write_text_atomic
from playtester.tester.runlog import JsonlWriter, read_jsonl

CRASHES = "crashes.jsonl"
STOPPED = "stopped.json"


def record_crash(run_dir: Path, env: int, episode: int, step: int, reason: str) -> None:
    """Append one crash to the run's log."""
    writer = JsonlWriter(Path(run_dir) / CRASHES)
    try:
        writer.write({"env": env, "episode": episode, "step": step, "reason": reason})
    finally:
        writer.close()


def count_crashes(run_dir: Path) -> int:
    return sum(1 for _ in read_jsonl(Path(run_dir) / CRASHES))


class CrashNews:
    """The crashes a run records while it plays, each said once on the console: every kind of run
    (random or PPO, one instance or many, on Ray) appends them to crashes.jsonl, so the console
    line comes from there, not from the process the game crashed in."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / CRASHES
        self.seen = count_crashes(run_dir)  # a resumed run's earlier crashes were said then

    def lines(self) -> list[str]:
        crashes = list(read_jsonl(self.path))
        new, self.seen = crashes[self.seen:], len(crashes)
        return [f"the game crashed in episode {c.get('episode')} (instance {c.get('env')}, step {c.get('step')}): "
                f"{c.get('reason') or 'the game is gone'}" for c in new]


def write_stop(run_dir: Path, reason: str, **details: Any) -> None:
    """Say why the run stopped early (the first instance to stop says it; later ones leave it)."""
    path = Path(run_dir) / STOPPED
    if not path.exists():
        write_text_atomic(path, json.dumps({"reason": reason, **details}, indent=1))


def read_stop(run_dir: Path) -> str | None:
    """Why the run stopped early, or None when it did not."""
    path = Path(run_dir) / STOPPED
    if not path.exists():
        return None
    try:
        return str(json.loads(path.read_text())["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"{path} is damaged"


def clear_stop(run_dir: Path) -> None:
    """A resumed run goes on: the earlier stop no longer holds."""
    (Path(run_dir) / STOPPED).unlink(missing_ok=True)
